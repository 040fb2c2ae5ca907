/* runtime/gcs_store.h - where the GCS keeps its tables: a (table, key) ->
 * bytes store behind a table of function pointers, so a persistent back end
 * can replace the in-memory one without the GCS changing.
 *
 * Stores copy what they are given and never keep the caller's pointers.  The
 * GCS serialises all access (one lock), so back ends need not be
 * thread-safe.  Tables and keys are short byte strings; values may be large
 * (code blobs), hence the ranged read. */
#ifndef RD_RUNTIME_GCS_STORE_H
#define RD_RUNTIME_GCS_STORE_H

#include <stddef.h>
#include <stdint.h>

typedef struct rd_gcs_store rd_gcs_store;

/* A scan callback: return non-zero to stop the scan. */
typedef int (*rd_gcs_store_scan_cb)(void *arg, const char *key, size_t klen, const void *val,
                                    size_t vlen);

typedef struct rd_gcs_store_ops {
  const char *name;
  /* Insert or replace.  0 or RD_ENOMEM/RD_EIO. */
  int (*put)(rd_gcs_store *s, const char *table, const char *key, size_t klen, const void *val,
             size_t vlen);
  /* A malloc'ed copy in *val (free() it; non-NULL even for an empty value).
   * 0, RD_ENOENT or RD_ENOMEM. */
  int (*get)(rd_gcs_store *s, const char *table, const char *key, size_t klen, void **val,
             size_t *vlen);
  /* Up to len bytes from offset into buf; *n gets the count and *total the
   * value's size.  0, RD_ENOENT or RD_EINVAL (offset past the end). */
  int (*read)(rd_gcs_store *s, const char *table, const char *key, size_t klen, uint64_t offset,
              void *buf, size_t len, size_t *n, uint64_t *total);
  /* 0 or RD_ENOENT. */
  int (*del)(rd_gcs_store *s, const char *table, const char *key, size_t klen);
  /* Every entry of table whose key starts with prefix, in key order.  The
   * callback must not modify the store.  0, or RD_ENOMEM. */
  int (*scan)(rd_gcs_store *s, const char *table, const char *prefix, size_t plen,
              rd_gcs_store_scan_cb cb, void *arg);
  void (*destroy)(rd_gcs_store *s);
} rd_gcs_store_ops;

struct rd_gcs_store {
  const rd_gcs_store_ops *ops;
};

/* The in-memory back end (state dies with the process).  NULL on OOM. */
rd_gcs_store *rd_gcs_store_memory_create(void);

/* Back ends by name ("memory"); NULL for an unknown name. */
rd_gcs_store *rd_gcs_store_create(const char *name);

#endif
