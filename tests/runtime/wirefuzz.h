/* tests/runtime/wirefuzz.h - structure-aware random frames for the node
 * protocol, for the fuzz tests (tests only).
 *
 * A frame is built from a protobuf-c descriptor: each field is present or not,
 * repeated 0..n times, with values drawn from the edges (0, 1, -1, the type's
 * limits, small ids, names the test registered) more often than at random, and
 * nested messages filled the same way.  A share of frames is then damaged
 * (wrong wire type, truncation, flipped bytes) so both the decoder and the
 * handlers behind it see hostile input.  Everything comes from one seeded
 * generator, so a failure is replayed by its seed. */
#ifndef RD_TESTS_WIREFUZZ_H
#define RD_TESTS_WIREFUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <protobuf-c/protobuf-c.h>

typedef struct wf_rng { uint64_t s; } wf_rng;

uint64_t wf_next(wf_rng *r);
/* uniform in [0, n) (n > 0) */
uint64_t wf_below(wf_rng *r, uint64_t n);
/* 1 with probability pct/100 */
int wf_chance(wf_rng *r, unsigned pct);

typedef struct wf_buf {
  uint8_t *p;
  size_t len, cap;
} wf_buf;

void wf_buf_free(wf_buf *b);

/* Strings the generator picks from besides random ones (function and class
 * names the target knows, so requests reach deeper than "unknown name"). */
void wf_set_names(const char *const *names, size_t n);

/* Append a random encoding of message `d` (depth limits nesting). */
void wf_message(wf_rng *r, const ProtobufCMessageDescriptor *d, int depth, wf_buf *out);

/* Remember the integers in a payload the target sent (a reply), so later
 * frames can name ids it actually holds: objects, actors, requests. */
void wf_note_reply(const uint8_t *p, size_t n);

/* Damage a payload in place: flip bytes, truncate, or append garbage. */
void wf_damage(wf_rng *r, wf_buf *b);

/* The descriptor of a frame type (NULL: none, e.g. MSG_NONE or unknown). */
const ProtobufCMessageDescriptor *wf_type_desc(unsigned type);
/* Highest frame type the protocol defines. */
unsigned wf_max_type(void);

#endif
