/* runtime/gcs_store_file.c - the persistent GCS store: the memory store as
 * the index, and an append-only log of every put and delete, replayed when
 * the store opens, so a GCS restarted on the same file has its tables back.
 *
 * The log is rewritten from the index (compacted) once it is more than twice
 * the live data and over 4 MiB.  A record is written to the log before the
 * index changes, and a failed write is cut off again, so the two never
 * disagree.  The store must never read a damaged log as if it were whole:
 * a torn last record (a crash inside write) is dropped with a warning, any
 * other damage refuses the open. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "gcs_store.h"
#include "log.h"
#include "raydist/error.h"

/* File: the 8-byte magic, then records.  Record: u32 body length, u32
 * CRC-32C of the body, body = u8 op, u8 table length, u16 0, u32 key
 * length, u32 value length, table, key, value.  Little-endian. */
#define LOG_MAGIC "RDGCSLG1"
#define HDR 8
#define BODY_HDR 12
#define OP_PUT 1
#define OP_DEL 2
#define BODY_MAX (1u << 30)
#define COMPACT_MIN (4u << 20)

typedef struct file_store {
  rd_gcs_store base;
  rd_gcs_store *mem;        /* every live entry */
  char *path;
  int fd;
  uint64_t file_bytes;      /* the log's length */
  uint64_t live_bytes;      /* what a compacted log would take */
  uint64_t compact_at;      /* next compaction when the log passes this */
  int dirty;                /* written since the last sync */
} file_store;

static uint32_t crc_table[256];

static void crc_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    crc_table[i] = c;
  }
}

static uint32_t crc32c(uint32_t crc, const void *p, size_t n) {
  const uint8_t *b = p;
  crc = ~crc;
  while (n--) crc = crc_table[(crc ^ *b++) & 0xff] ^ (crc >> 8);
  return ~crc;
}

static void put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rec_size(size_t tlen, size_t klen, size_t vlen) {
  return HDR + BODY_HDR + (uint64_t)tlen + klen + vlen;
}

/* Appends one record at the log's end: 0, or RD_EIO/RD_ENOSPC with the log
 * cut back to where it was. */
static int log_append(file_store *f, int op, const char *table, const char *key, size_t klen,
                      const void *val, size_t vlen) {
  size_t tlen = strlen(table);
  uint64_t body = rec_size(tlen, klen, vlen) - HDR;
  if (tlen > 255 || body > BODY_MAX) return RD_EINVAL;
  uint8_t hdr[HDR + BODY_HDR] = {0};
  hdr[HDR] = (uint8_t)op;
  hdr[HDR + 1] = (uint8_t)tlen;
  put32(hdr + HDR + 4, (uint32_t)klen);
  put32(hdr + HDR + 8, (uint32_t)vlen);
  uint32_t crc = crc32c(0, hdr + HDR, BODY_HDR);
  crc = crc32c(crc, table, tlen);
  crc = crc32c(crc, key, klen);
  crc = crc32c(crc, val, vlen);
  put32(hdr, (uint32_t)body);
  put32(hdr + 4, crc);
  struct iovec iov[4] = {{hdr, sizeof(hdr)}, {(void *)table, tlen}, {(void *)key, klen},
                         {(void *)val, vlen}};
  uint64_t want = body + HDR, done = 0;
  int i = 0;
  while (done < want) {
    ssize_t n = writev(f->fd, iov + i, 4 - i);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = n < 0 ? errno : EIO;
      rd__log(RD_LOG_ERROR, "gcs store: cannot append to %s: %s", f->path, strerror(e));
      if (ftruncate(f->fd, (off_t)f->file_bytes) != 0 || lseek(f->fd, 0, SEEK_END) < 0)
        rd__log(RD_LOG_ERROR, "gcs store: cannot cut %s back: %s", f->path, strerror(errno));
      return e == ENOSPC || e == EDQUOT ? RD_ENOSPC : RD_EIO;
    }
    done += (uint64_t)n;
    while (i < 4 && (size_t)n >= iov[i].iov_len) n -= (ssize_t)iov[i++].iov_len;
    if (i < 4) {
      iov[i].iov_base = (char *)iov[i].iov_base + n;
      iov[i].iov_len -= (size_t)n;
    }
  }
  f->file_bytes += want;
  f->dirty = 1;
  return 0;
}

/* Cuts the log back after an index change failed. */
static void log_undo(file_store *f, uint64_t len) {
  if (ftruncate(f->fd, (off_t)len) == 0 && lseek(f->fd, 0, SEEK_END) >= 0) f->file_bytes = len;
}

typedef struct compact_ctx {
  file_store *tmp;
  int rc;
} compact_ctx;

static int compact_one(void *arg, const char *table, const char *key, size_t klen, const void *val,
                       size_t vlen) {
  compact_ctx *c = arg;
  c->rc = log_append(c->tmp, OP_PUT, table, key, klen, val, vlen);
  return c->rc != 0;
}

static int write_all(int fd, const void *p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p = (const char *)p + w;
    n -= (size_t)w;
  }
  return 0;
}

static void sync_dir(const char *path) {
  char dir[4096];
  snprintf(dir, sizeof(dir), "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash == dir) slash[1] = 0;
  else if (slash) *slash = 0;
  else snprintf(dir, sizeof(dir), ".");
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    (void)fsync(fd);
    close(fd);
  }
}

/* Rewrites the log from the index: a new file, synced, renamed over the old
 * one.  On failure the old log stays and the next try waits for the log to
 * grow by COMPACT_MIN more. */
static void compact(file_store *f) {
  char tmp[4096];
  snprintf(tmp, sizeof(tmp), "%s.compact", f->path);
  file_store t = {.path = tmp};
  t.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  compact_ctx c = {&t, 0};
  if (t.fd < 0 || flock(t.fd, LOCK_EX | LOCK_NB) != 0 || write_all(t.fd, LOG_MAGIC, HDR) != 0) {
    c.rc = RD_EIO;
  } else {
    t.file_bytes = HDR;
    rd__gcs_mem_each(f->mem, compact_one, &c);
  }
  if (c.rc == 0 && (fdatasync(t.fd) != 0 || rename(tmp, f->path) != 0)) c.rc = RD_EIO;
  if (c.rc != 0) {
    rd__log(RD_LOG_WARN, "gcs store: cannot compact %s (%s); keeping the log as it is", f->path,
            strerror(errno));
    if (t.fd >= 0) close(t.fd);
    unlink(tmp);
    f->compact_at = f->file_bytes + COMPACT_MIN;
    return;
  }
  sync_dir(f->path);
  rd__log(RD_LOG_INFO, "gcs store: compacted %s from %llu to %llu bytes", f->path,
          (unsigned long long)f->file_bytes, (unsigned long long)t.file_bytes);
  close(f->fd);
  f->fd = t.fd;
  f->file_bytes = t.file_bytes;
  f->live_bytes = t.file_bytes - HDR;
  f->compact_at = 0;
  f->dirty = 0;
}

static void maybe_compact(file_store *f) {
  if (f->file_bytes < COMPACT_MIN || f->file_bytes < 2 * f->live_bytes + HDR) return;
  if (f->compact_at && f->file_bytes < f->compact_at) return;
  compact(f);
}

static int file_put(rd_gcs_store *s, const char *table, const char *key, size_t klen,
                    const void *val, size_t vlen) {
  file_store *f = (file_store *)s;
  size_t tlen = strlen(table), old = 0;
  int had = rd__gcs_mem_vlen(f->mem, table, key, klen, &old) == 0;
  uint64_t len = f->file_bytes;
  int rc = log_append(f, OP_PUT, table, key, klen, val, vlen);
  if (rc) return rc;
  rc = f->mem->ops->put(f->mem, table, key, klen, val, vlen);
  if (rc) {
    log_undo(f, len);
    return rc;
  }
  f->live_bytes += rec_size(tlen, klen, vlen) - (had ? rec_size(tlen, klen, old) : 0);
  maybe_compact(f);
  return 0;
}

static int file_del(rd_gcs_store *s, const char *table, const char *key, size_t klen) {
  file_store *f = (file_store *)s;
  size_t old;
  if (rd__gcs_mem_vlen(f->mem, table, key, klen, &old) != 0) return RD_ENOENT;
  int rc = log_append(f, OP_DEL, table, key, klen, NULL, 0);
  if (rc) return rc;
  (void)f->mem->ops->del(f->mem, table, key, klen);
  f->live_bytes -= rec_size(strlen(table), klen, old);
  maybe_compact(f);
  return 0;
}

static int file_get(rd_gcs_store *s, const char *table, const char *key, size_t klen, void **val,
                    size_t *vlen) {
  file_store *f = (file_store *)s;
  return f->mem->ops->get(f->mem, table, key, klen, val, vlen);
}

static int file_read(rd_gcs_store *s, const char *table, const char *key, size_t klen,
                     uint64_t offset, void *buf, size_t len, size_t *n, uint64_t *total) {
  file_store *f = (file_store *)s;
  return f->mem->ops->read(f->mem, table, key, klen, offset, buf, len, n, total);
}

static int file_scan(rd_gcs_store *s, const char *table, const char *prefix, size_t plen,
                     rd_gcs_store_scan_cb cb, void *arg) {
  file_store *f = (file_store *)s;
  return f->mem->ops->scan(f->mem, table, prefix, plen, cb, arg);
}

static int file_sync(rd_gcs_store *s) {
  file_store *f = (file_store *)s;
  if (!f->dirty) return 0;
  if (fdatasync(f->fd) != 0) {
    rd__log(RD_LOG_ERROR, "gcs store: cannot sync %s: %s", f->path, strerror(errno));
    return RD_EIO;
  }
  f->dirty = 0;
  return 0;
}

static void file_destroy(rd_gcs_store *s) {
  file_store *f = (file_store *)s;
  if (f->fd >= 0) {
    (void)file_sync(s);
    close(f->fd);
  }
  if (f->mem) f->mem->ops->destroy(f->mem);
  free(f->path);
  free(f);
}

static const rd_gcs_store_ops file_ops = {"file",    file_put,  file_get,  file_read,
                                          file_del,  file_scan, file_sync, file_destroy};

/* Reads exactly n bytes at off: 1, 0 at a short read, -1 on an error. */
static int read_at(int fd, void *p, size_t n, uint64_t off) {
  while (n) {
    ssize_t r = pread(fd, p, n, (off_t)off);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) return 0;
    p = (char *)p + r;
    n -= (size_t)r;
    off += (uint64_t)r;
  }
  return 1;
}

/* Whether the file holds only zero bytes from off to size (a crash can
 * leave the last pages of a file zero-filled). */
static int zeros_to_end(int fd, uint64_t off, uint64_t size) {
  uint8_t buf[4096];
  while (off < size) {
    size_t n = size - off < sizeof(buf) ? (size_t)(size - off) : sizeof(buf);
    if (read_at(fd, buf, n, off) != 1) return 0;
    for (size_t i = 0; i < n; i++)
      if (buf[i]) return 0;
    off += n;
  }
  return 1;
}

/* Replays the log into the index.  0, or an error with a sentence in err. */
static int replay(file_store *f, uint64_t size, char *err, size_t errlen) {
  uint8_t *buf = NULL;
  size_t cap = 0;
  uint64_t off = HDR, records = 0;
  int rc = 0;
  while (off < size) {
    uint8_t hdr[HDR];
    const char *torn = NULL;
    uint32_t body = 0;
    if (size - off < HDR) {
      torn = "a record header cut short";
    } else if (read_at(f->fd, hdr, HDR, off) != 1) {
      rc = RD_EIO;
      snprintf(err, errlen, "cannot read %s: %s", f->path, strerror(errno));
      break;
    } else if ((body = get32(hdr)) < BODY_HDR || body > BODY_MAX) {
      if (!zeros_to_end(f->fd, off, size)) {
        rc = RD_EIO;
        snprintf(err, errlen, "%s is corrupt at offset %llu (a record of %u bytes); move it aside to start "
                 "with empty tables", f->path, (unsigned long long)off, body);
        break;
      }
      torn = "zero bytes";
    } else if (size - off - HDR < body) {
      torn = "a record cut short";
    }
    if (torn) {
      rd__log(RD_LOG_WARN, "gcs store: %s ends in %s at offset %llu (a write the last process did not "
              "finish); dropping %llu bytes", f->path, torn, (unsigned long long)off,
              (unsigned long long)(size - off));
      if (ftruncate(f->fd, (off_t)off) != 0) {
        rc = RD_EIO;
        snprintf(err, errlen, "cannot truncate %s: %s", f->path, strerror(errno));
      }
      size = off;
      break;
    }
    if (body > cap) {
      uint8_t *nb = realloc(buf, body);
      if (!nb) {
        rc = RD_ENOMEM;
        snprintf(err, errlen, "out of memory reading %s", f->path);
        break;
      }
      buf = nb;
      cap = body;
    }
    if (read_at(f->fd, buf, body, off + HDR) != 1) {
      rc = RD_EIO;
      snprintf(err, errlen, "cannot read %s: %s", f->path, strerror(errno));
      break;
    }
    uint32_t klen = get32(buf + 4), vlen = get32(buf + 8);
    size_t tlen = buf[1];
    int op = buf[0];
    if (crc32c(0, buf, body) != get32(hdr + 4) || (op != OP_PUT && op != OP_DEL) || buf[2] || buf[3] ||
        (uint64_t)BODY_HDR + tlen + klen + vlen != body || (op == OP_DEL && vlen) ||
        memchr(buf + BODY_HDR, 0, tlen)) {
      if (off + HDR + body == size) {   /* the last record: a torn write */
        rd__log(RD_LOG_WARN, "gcs store: the last record of %s (offset %llu) does not check; dropping it",
                f->path, (unsigned long long)off);
        if (ftruncate(f->fd, (off_t)off) != 0) {
          rc = RD_EIO;
          snprintf(err, errlen, "cannot truncate %s: %s", f->path, strerror(errno));
        }
        size = off;
        break;
      }
      rc = RD_EIO;
      snprintf(err, errlen, "%s is corrupt at offset %llu (a record that does not check); move it aside to "
               "start with empty tables", f->path, (unsigned long long)off);
      break;
    }
    char table[256];
    memcpy(table, buf + BODY_HDR, tlen);
    table[tlen] = 0;
    const char *key = (const char *)buf + BODY_HDR + tlen;
    size_t old = 0;
    int had = rd__gcs_mem_vlen(f->mem, table, key, klen, &old) == 0;
    if (had) f->live_bytes -= rec_size(tlen, klen, old);
    if (op == OP_PUT) {
      rc = f->mem->ops->put(f->mem, table, key, klen, key + klen, vlen);
      if (rc) {
        snprintf(err, errlen, "out of memory reading %s", f->path);
        break;
      }
      f->live_bytes += rec_size(tlen, klen, vlen);
    } else if (had) {
      (void)f->mem->ops->del(f->mem, table, key, klen);
    }
    off += HDR + body;
    records++;
  }
  free(buf);
  if (rc == 0) {
    f->file_bytes = size;
    if (lseek(f->fd, (off_t)size, SEEK_SET) < 0) rc = RD_EIO;
    rd__log(RD_LOG_INFO, "gcs store: %s: %llu records replayed, %llu bytes live of %llu", f->path,
            (unsigned long long)records, (unsigned long long)f->live_bytes, (unsigned long long)size);
  }
  return rc;
}

rd_gcs_store *rd_gcs_store_file_open(const char *path, char *err, size_t errlen) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, crc_init);
  file_store *f = calloc(1, sizeof(*f));
  if (f) f->fd = -1;
  if (!f || !(f->path = strdup(path)) || !(f->mem = rd_gcs_store_memory_create())) {
    snprintf(err, errlen, "out of memory");
    if (f) file_destroy(&f->base);
    return NULL;
  }
  f->base.ops = &file_ops;
  f->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  struct stat st;
  uint8_t magic[HDR];
  int ok = 0;
  if (f->fd < 0 || fstat(f->fd, &st) != 0) {
    snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
  } else if (flock(f->fd, LOCK_EX | LOCK_NB) != 0) {
    snprintf(err, errlen, "%s is in use by another process (a GCS is running on it)", path);
  } else if (!S_ISREG(st.st_mode)) {
    snprintf(err, errlen, "%s is not a regular file", path);
  } else if (st.st_size == 0) {
    ok = write_all(f->fd, LOG_MAGIC, HDR) == 0 && fdatasync(f->fd) == 0;
    if (!ok) snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
    f->file_bytes = HDR;
    if (ok) sync_dir(path);
  } else if (read_at(f->fd, magic, HDR, 0) != 1 || memcmp(magic, LOG_MAGIC, HDR) != 0) {
    snprintf(err, errlen, "%s is not a raydist GCS log (no %s header)", path, LOG_MAGIC);
  } else {
    ok = replay(f, (uint64_t)st.st_size, err, errlen) == 0;
  }
  if (!ok) {
    file_destroy(&f->base);
    return NULL;
  }
  maybe_compact(f);
  return &f->base;
}
