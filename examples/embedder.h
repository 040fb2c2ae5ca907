/* examples/embedder.h - what the engine examples share: the Embedder actor
 * class (one all-MiniLM-L6-v2 engine per actor), the wire format of a list of
 * texts, and small helpers (errors, clock, fortune files, .npy output,
 * latency percentiles).  Examples only; not part of libraydist. */
#ifndef RD_EXAMPLES_EMBEDDER_H
#define RD_EXAMPLES_EMBEDDER_H

#include <raydist.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifndef RD_DEFAULT_MODEL_DIR
#define RD_DEFAULT_MODEL_DIR "models/all-MiniLM-L6-v2"
#endif

#define EX_MAX_TEXTS 1024   /* texts in one Embedder call */

/* Monotonic seconds. */
double ex_now(void);
/* The model directory: $RD_MODEL_DIR, else RD_DEFAULT_MODEL_DIR. */
const char *ex_model_dir(void);
/* Print "PROG: message" on stderr and exit with `code`. */
void ex_die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
void ex_set_prog(const char *name);

/* A list of texts on the wire: u32 count, count x u32 lengths, then the texts
 * back to back.  encode: malloc'd buffer of *size bytes (exits on ENOMEM). */
uint8_t *ex_texts_encode(const char *const *texts, const size_t *lens, size_t n, size_t *size);
/* Point texts[i]/lens[i] into p; at most `max` texts.  0, or -1 when malformed. */
int ex_texts_decode(const uint8_t *p, size_t size, const char **texts, size_t *lens, size_t max, size_t *n);
/* The count a buffer announces (0 when too short to say). */
size_t ex_texts_count(const uint8_t *p, size_t size);

/* The fortune files of `dir` (no dot-files, no .dat/.u8 indexes), sorted by
 * name into *names (caller frees each and the array); returns the count.
 * Exits with status 2 and a hint when the directory is missing. */
int ex_fortune_files(const char *dir, char ***names);
/* Call fn(ctx, k, text, len) for each cookie of the file at `path` (cookies
 * are separated by lines holding a single '%'; k counts every block, empty
 * ones included, and fn sees only non-empty ones, untrimmed).  With `strip`,
 * attribution lines ("-- Author") are left out.  Returns the number of
 * blocks, or -1 when `path` is not a readable regular file. */
long ex_fortune_cookies(const char *path, int strip, void (*fn)(void *ctx, int k, const char *text, size_t len),
                        void *ctx);

/* The header of a float32 (rows x dim) .npy v1.0 file into buf (at least
 * 128 bytes); returns its length, a multiple of 64. */
size_t ex_npy_header(char *buf, size_t rows, size_t dim);
/* pwrite all n bytes at off (retrying short writes); 0 or -1 with errno. */
int ex_pwrite_all(int fd, const void *p, size_t n, off_t off);

/* A growing list of samples (latencies) and its nearest-rank percentile
 * (p in 0..1; sorts the samples; 0 when empty). */
typedef struct ex_series {
  double *v;
  size_t n, cap;
} ex_series;
void ex_series_add(ex_series *s, double x);
double ex_percentile(ex_series *s, double p);

/* The result of Embedder.embed: this header, then n x dim float32 rows. */
typedef struct ex_result_hdr {
  uint32_t n, dim;
  int32_t pid;
  uint32_t pad;
  double seconds;   /* time spent in the engine */
} ex_result_hdr;

/* The rows of a result r (a rd_get slot with status rc) of a call on
 * `n` texts (0: any number) of `dim`-wide embeddings; *h gets its header (may
 * be NULL).  A failed call or a malformed result ends the program (status 1)
 * with the message, naming `what`. */
const float *ex_result_rows(const rd_buf *r, int rc, size_t n, size_t dim, ex_result_hdr *h, const char *what);

/* Actor class Embedder, constructed with (model dir: bytes, threads: int,
 * use_gpu: int); method Embedder.embed(texts) -> header + embeddings. */
extern rd_actor_class *const Embedder;
extern rd_actor_method *const Embedder_embed;

#endif
