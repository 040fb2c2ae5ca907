/* runtime/common.h - small helpers shared by the daemon and the client library:
 * resource strings and resource messages, session paths, object-id layout.
 * Nothing here does I/O beyond what its name says. */
#ifndef RD_RUNTIME_COMMON_H
#define RD_RUNTIME_COMMON_H

#include <stdint.h>
#include "resources.h"
#include "raydist.pb-c.h"

#define RD_PROTO_VERSION 1u
#define RD_INLINE_MAX (100u * 1024u)   /* results and puts up to this stay inline */
#define RD_NODE_SOCK "node.sock"

/* Object ids: the owner's client id in the top 20 bits, a per-owner sequence
 * below.  The daemon hands out client ids, so ids are unique on the node. */
#define RD_OID_CLIENT_BITS 20
#define RD_OID_SEQ_BITS 44
static inline uint64_t rd__oid_make(uint32_t client, uint64_t seq) {
  return ((uint64_t)client << RD_OID_SEQ_BITS) | (seq & ((1ull << RD_OID_SEQ_BITS) - 1));
}
static inline uint32_t rd__oid_client(uint64_t oid) { return (uint32_t)(oid >> RD_OID_SEQ_BITS); }

/* Parse "name=amount,name=amount" into r's custom resources (amounts as in
 * rd_res_from_double).  RD_EINVAL with a reason in err (if non-NULL). */
int rd__res_parse_custom(rd_resources *r, const char *spec, char *err, int errlen);

/* rd_resources <-> message.  The message form points into `r` (no copies)
 * and is valid while r and storage live. */
typedef struct rd__res_msg {
  Rd__Resources msg;
  Rd__Custom custom[RD_RES_MAX_CUSTOM];
  Rd__Custom *customp[RD_RES_MAX_CUSTOM];
} rd__res_msg;
void rd__res_to_msg(const rd_resources *r, rd__res_msg *out);
/* RD_EINVAL when the message is out of range. */
int rd__res_from_msg(const Rd__Resources *m, rd_resources *out);

#endif
