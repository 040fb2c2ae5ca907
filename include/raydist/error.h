/* raydist/error.h - the one error space of libraydist.
 *
 * Every call that can fail returns 0 or a negative RD_E* code from this table.
 * The table is an X-macro so that the enum, rd_err_name() and rd_strerror()
 * can never drift apart.  Never return a positive value or a raw errno. */
#ifndef RAYDIST_ERROR_H
#define RAYDIST_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/* XX(name, value, message) */
#define RD_ERRNO_MAP(XX)                                                        \
  XX(EINVAL,         -1,  "invalid argument")                                  \
  XX(ENOMEM,         -2,  "out of memory")                                     \
  XX(ETIMEDOUT,      -3,  "timed out")                                         \
  XX(ETASK,          -4,  "remote task failed")                                \
  XX(EWORKER_DIED,   -5,  "worker process died while running the task")        \
  XX(EACTOR_DIED,    -6,  "actor died")                                        \
  XX(EOBJECT_LOST,   -7,  "object lost")                                       \
  XX(ENODE_DIED,     -8,  "node died")                                         \
  XX(EINFEASIBLE,    -9,  "resource request can never be satisfied")           \
  XX(ENOFUNC,        -10, "unknown remote function")                           \
  XX(EPROTO,         -11, "malformed or unexpected message")                   \
  XX(EIO,            -12, "input/output error")                                \
  XX(ENOSPC,         -13, "no space left on spill device")                     \
  XX(E2BIG,          -14, "object larger than the object store")               \
  XX(ESTORE_FULL,    -15, "object store full and nothing can be evicted")      \
  XX(ECONN,          -16, "connection failed (node daemon, GCS or peer)")     \
  XX(ESTATE,         -17, "call not valid in the current state")               \
  XX(EEXIST,         -18, "already exists")                                    \
  XX(ENOENT,         -19, "no such object")                                    \
  XX(EGPU,           -20, "GPU (CUDA or cuBLAS) error")                        \
  XX(ESYS,           -21, "system call failed")                                \
  XX(ECANCELED,      -22, "canceled")                                          \
  XX(EAGAIN,         -23, "resource temporarily unavailable")                  \
  XX(ENOTSUP,        -24, "not supported")                                     \
  XX(EAUTH,          -25, "cluster token missing or wrong")                   \
  XX(EPG_REMOVED,    -26, "placement group removed")                        \
  XX(EOOM,           -27, "killed by the memory monitor (node out of memory)") \
  XX(EEND,           -28, "end of stream: no more items")

typedef enum rd_errno {
  RD_OK = 0,
#define RD__ERR_ENUM(name, val, msg) RD_##name = (val),
  RD_ERRNO_MAP(RD__ERR_ENUM)
#undef RD__ERR_ENUM
  RD__ERR_MIN = -28
} rd_errno;

#ifdef __cplusplus
}
#endif
#endif /* RAYDIST_ERROR_H */
