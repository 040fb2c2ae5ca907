/* runtime/gcs_store.h - where the GCS keeps its tables: a (table, key) ->
 * bytes store behind a table of function pointers, so a persistent back end
 * can replace the in-memory one without the GCS changing.
 *
 * Stores copy what they are given and never keep the caller's pointers.  The
 * GCS serialises all access (one lock), so back ends need not be
 * thread-safe.  Tables and keys are short byte strings (a table name is at
 * most 255 bytes); values may be large (code blobs), hence the ranged read. */
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
  /* Makes what was written durable (fdatasync); NULL for a back end with
   * nothing to sync.  0 or RD_EIO. */
  int (*sync)(rd_gcs_store *s);
  void (*destroy)(rd_gcs_store *s);
} rd_gcs_store_ops;

struct rd_gcs_store {
  const rd_gcs_store_ops *ops;
};

/* The in-memory back end (state dies with the process).  NULL on OOM. */
rd_gcs_store *rd_gcs_store_memory_create(void);

/* The file back end (gcs_store_file.c): the memory store as the index plus
 * an append-only log at path, replayed on open, so a restarted GCS has its
 * tables back.  Refuses (NULL, with a sentence in err) a file that is not a
 * log, is corrupt before its last record, or is held by another process;
 * drops a torn last record.  Writes reach the page cache before a call
 * returns (a process crash loses nothing); sync() makes them durable. */
rd_gcs_store *rd_gcs_store_file_open(const char *path, char *err, size_t errlen);

/* A back end from a spec: "memory" or "file:PATH".  NULL with a sentence in
 * err for an unknown spec or a store that cannot open. */
rd_gcs_store *rd_gcs_store_open(const char *spec, char *err, size_t errlen);

/* For back ends built on the memory store.  The size of a value (0 or
 * RD_ENOENT), and every entry of every table, in no order (the callback
 * returns non-zero to stop). */
int rd__gcs_mem_vlen(rd_gcs_store *s, const char *table, const char *key, size_t klen,
                     size_t *vlen);
typedef int (*rd__gcs_mem_each_cb)(void *arg, const char *table, const char *key, size_t klen,
                                   const void *val, size_t vlen);
void rd__gcs_mem_each(rd_gcs_store *s, rd__gcs_mem_each_cb cb, void *arg);

#endif
