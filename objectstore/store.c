/* objectstore/store.c - the per-node shared-memory object store.
 *
 * One memfd segment carved by the extent allocator, an object table keyed by
 * id, and an LRU list of unpinned sealed objects that are spilled to files when
 * space runs out.  All metadata lives in daemon heap memory, never in the
 * segment; it never blocks on another process and never retries a failed spill. */

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create, asprintf */
#endif
#include "store.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/falloc.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "raydist/error.h"
#include "u64map.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define PAGE 4096ull
#define PREFAULT_CHUNK (64ull << 20)
#define FALLBACK_CHUNK (2ull << 20)   /* the fallback region grows by this much at least */
/* The fallback region keeps its first FALLBACK_KEEP bytes (and the pages of
 * freed extents smaller than that) once it has them: committing and
 * punching pages at every create and delete ran 60-80x slower than the
 * segment for objects of 64 KiB-1 MiB; larger objects give their pages
 * back at once. */
#define FALLBACK_KEEP (4ull << 20)
#define OBJ_CHUNK 256
#define EXT_SIZE(sz) ((sz) == 0 ? RD_ALLOC_ALIGN : (((sz) + RD_ALLOC_ALIGN - 1) & ~(uint64_t)(RD_ALLOC_ALIGN - 1)))

enum { LIST_NONE = 0, LIST_LRU, LIST_UNSEALED, LIST_FALLBACK_LRU };

/* Background spills of objects under FUSE_OBJ_MAX bytes go out together, up
 * to FUSE_BYTES or FUSE_OBJS in one file (Ray fuses spills too): one open
 * and one close for many small objects instead of one each, ten times
 * faster for 64 KiB objects here.  Larger objects, and inline spills, get a
 * file of their own, named by id. */
#define FUSE_OBJ_MAX (1ull << 20)
#define FUSE_BYTES (32ull << 20)
#define FUSE_OBJS 1024

/* A fused spill file, "b<seq>": removed when no spilled object is in it. */
typedef struct spill_file {
  uint64_t seq;
  uint32_t live;           /* spilled objects whose bytes are in it */
} spill_file;

typedef struct obj {
  uint64_t id;
  uint64_t offset;         /* in the segment, valid when !spilled */
  uint64_t size;           /* bytes asked for at create */
  struct obj *prev, *next; /* LRU list or unsealed list, see `list` */
  uint32_t owner;          /* the creator */
  uint32_t pins;
  uint8_t sealed;
  uint8_t maker_gone;      /* co-owned: the client its id names no longer holds it */
  uint16_t nco;            /* co-owners (rd_store_owner_add), in co[] */
  struct co_owner *co;
  uint8_t deleted;         /* delete called while pinned: free on last release */
  uint8_t spilled;         /* bytes are in spill file <hex id>, not the segment */
  uint8_t spilling;        /* being written by the spill thread (holds one pin) */
  uint8_t restoring;       /* spilled, being read back by the thread (holds one pin) */
  uint8_t restore_failed;  /* the thread could not read it: the next get reads inline */
  uint8_t fallback;        /* its extent is in the fallback region: on fallback_lru, not lru */
  uint8_t list;
  spill_file *file;        /* spilled into a fused file (at foff), or NULL: its own file */
  uint64_t foff;
} obj;

/* A client other than the one an object's id names that holds it, `count`
 * times (rd_return_refs hands the object over to it once per reply). */
typedef struct co_owner {
  uint32_t client, count;
} co_owner;

/* One piece of I/O handed to the spill thread.  The thread reads only this:
 * the extent stays where it is (the job's pin keeps it) and all bookkeeping
 * waits for rd_store_spill_reap on the store's thread. */
enum { JOB_WRITE, JOB_READ, JOB_UNLINK };
typedef struct spill_item {
  uint64_t id, size;
  uint64_t off;             /* the object's extent in the segment */
  uint64_t foff;            /* where its bytes go in the file */
} spill_item;

typedef struct spill_job {
  int kind;
  int rc;
  uint64_t id, size;
  uint64_t off;             /* the object's extent in the segment */
  spill_file *file;         /* JOB_WRITE: a fused file of its own (items); JOB_READ: the object's, at foff */
  uint64_t foff;
  spill_item *items;        /* JOB_WRITE into file: n objects */
  uint32_t n;
  char trash[48];           /* JOB_UNLINK: the renamed file */
  struct spill_job *next;
} spill_job;

typedef struct obj_chunk {
  struct obj_chunk *next;
  obj objs[OBJ_CHUNK];
} obj_chunk;

struct rd_store {
  int fd;
  uint8_t *base;
  uint64_t capacity;
  rd_alloc *alloc;
  /* Fallback allocation (Ray's): an object that cannot be placed in the
   * segment's capacity even by spilling (larger than it, or everything
   * pinned, or spilling failing) gets an extent past it, in a region of the
   * same memfd that grows (ftruncate, pages committed with fallocate) up to
   * `fallback` bytes and gives pages back when its objects go.  Every
   * process maps capacity + fallback bytes from the start, so offsets stay
   * valid everywhere and nothing is remapped. */
  uint64_t fallback;         /* the region's limit (0: no fallback allocation) */
  rd_alloc *over;            /* the region's extents, offsets from `capacity` */
  uint64_t over_mapped;      /* the memfd's size past capacity now */
  uint64_t fallback_count;   /* allocations there since open (`over` counts the live ones) */
  obj fallback_lru;          /* sentinel: unpinned sealed objects there, spilled only when
                              * the region itself is full */
  uint64_t fallback_lru_bytes;
  uint64_t fallback_spilling; /* extent bytes of objects there with a write job out */
  rd__u64map objs;         /* id -> obj */
  obj *spare;              /* recycled entries, linked through next */
  obj_chunk *chunks;
  obj lru;                 /* sentinel; lru.next is the least recently used */
  obj unsealed;            /* sentinel of the created-not-sealed list */
  uint64_t lru_bytes;      /* extent bytes held by objects on the LRU list */

  int spill_dirfd;         /* -1 = no spilling */
  char *spill_path;        /* this instance's own subdirectory */

  uint64_t num_objects, num_in_memory, num_spilled, bytes_spilled;
  uint64_t spill_count, restore_count, evict_count;

  /* background spilling (cfg->spill_threshold > 0): a FIFO of jobs for one
   * thread, finished jobs back through `done` and an eventfd */
  double spill_threshold;
  uint64_t spilling_bytes;   /* extent bytes of objects with a write job out */
  uint64_t restoring_bytes;  /* extent bytes of objects with a read job out */
  uint64_t spill_backoff_ns; /* after a failed background write: none before this */
  uint64_t spill_fail_count;
  int spill_last_error;
  pthread_t spill_thread;
  int spill_started;
  int spill_efd;
  pthread_mutex_t spill_mu;
  pthread_cond_t spill_cv;         /* the thread waits for jobs */
  pthread_cond_t spill_done_cv;    /* rd_store_create waits for the thread */
  spill_job *todo, **todo_tail, *done;
  int spill_stop, spill_busy;
  uint64_t trash_seq;        /* names files of deleted objects for the thread */
  uint64_t file_seq;         /* names fused spill files */

  pthread_t prefault_thread;
  int prefault_started;
  int prefault_joined;
  atomic_int prefault_stop;
  int prefault_rc;
};

/* ---- entries and lists ---- */

static obj *obj_get(rd_store *s) {
  if (s->spare == NULL) {
    obj_chunk *c = malloc(sizeof(*c));
    if (c == NULL)
      return NULL;
    c->next = s->chunks;
    s->chunks = c;
    for (int i = 0; i < OBJ_CHUNK; i++) {
      c->objs[i].next = s->spare;
      s->spare = &c->objs[i];
    }
  }
  obj *o = s->spare;
  s->spare = o->next;
  memset(o, 0, sizeof(*o));
  return o;
}

static void obj_put(rd_store *s, obj *o) {
  o->next = s->spare;
  s->spare = o;
}

static void list_init(obj *head) { head->prev = head->next = head; }

static void list_push_tail(obj *head, obj *o, int which) {
  assert(o->list == LIST_NONE);
  o->prev = head->prev;
  o->next = head;
  head->prev->next = o;
  head->prev = o;
  o->list = (uint8_t)which;
}

static void list_remove(rd_store *s, obj *o) {
  if (o->list == LIST_NONE)
    return;
  if (o->list == LIST_LRU)
    s->lru_bytes -= EXT_SIZE(o->size);
  else if (o->list == LIST_FALLBACK_LRU)
    s->fallback_lru_bytes -= EXT_SIZE(o->size);
  o->prev->next = o->next;
  o->next->prev = o->prev;
  o->prev = o->next = NULL;
  o->list = LIST_NONE;
}

static void lru_push(rd_store *s, obj *o) {
  assert(o->sealed && !o->spilled && o->pins == 0 && !o->deleted);
  if (o->fallback) {   /* spilling it frees no room in the segment: its own list */
    list_push_tail(&s->fallback_lru, o, LIST_FALLBACK_LRU);
    s->fallback_lru_bytes += EXT_SIZE(o->size);
    return;
  }
  list_push_tail(&s->lru, o, LIST_LRU);
  s->lru_bytes += EXT_SIZE(o->size);
}

/* ---- spill files ---- */

/* The spill file of object `id` (file NULL), or the fused file. */
static void spill_name(char name[24], const spill_file *file, uint64_t id) {
  if (file != NULL)
    snprintf(name, 24, "b%016" PRIx64, file->seq);
  else
    snprintf(name, 24, "%016" PRIx64, id);
}

static int spill_errno(int e) {
  return (e == ENOSPC || e == EFBIG || e == EDQUOT) ? RD_ENOSPC : RD_EIO;
}

/* All `size` bytes between buf and fd at offset `at`: 0, or the errno of the
 * failure (EIO for a short file). */
static int full_io(int fd, uint8_t *buf, uint64_t size, uint64_t at, int writing) {
  uint64_t done = 0;
  while (done < size) {
    ssize_t n = writing ? pwrite(fd, buf + done, size - done, (off_t)(at + done))
                        : pread(fd, buf + done, size - done, (off_t)(at + done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return n < 0 ? errno : EIO;
    done += (uint64_t)n;
  }
  return 0;
}

/* Write the n items' bytes from the segment at base into the file `name`,
 * each at its foff; on failure no file is left.  Touches no store state: the
 * spill thread calls it too. */
static int write_items(int dirfd, const char *name, const uint8_t *base, const spill_item *items, uint32_t n) {
  int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return spill_errno(errno);
  int e = 0;
  for (uint32_t i = 0; i < n && e == 0; i++)
    e = full_io(fd, (uint8_t *)(uintptr_t)(base + items[i].off), items[i].size, items[i].foff, 1);
  int rc = e != 0 ? spill_errno(e) : 0;
  if (close(fd) != 0 && rc == 0)
    rc = spill_errno(errno);
  if (rc != 0)
    unlinkat(dirfd, name, 0);
  return rc;
}

static void enqueue(rd_store *s, spill_job *j);

/* The spill file of `id` alone (one item at offset 0). */
static int write_file(int dirfd, uint64_t id, const uint8_t *base, uint64_t off, uint64_t size) {
  char name[24];
  spill_name(name, NULL, id);
  spill_item it = {.id = id, .size = size, .off = off, .foff = 0};
  return write_items(dirfd, name, base, &it, 1);
}

/* Remove spill file `name`.  With a spill thread, the file is renamed out of
 * the way here (a new file of the same name may follow at once) and removed
 * there: freeing its blocks can take a millisecond per 16 MiB. */
static void unlink_name(rd_store *s, const char *name) {
  spill_job *j = s->spill_started && !s->spill_stop ? calloc(1, sizeof(*j)) : NULL;
  if (j != NULL) {
    j->kind = JOB_UNLINK;
    snprintf(j->trash, sizeof(j->trash), "%s.%" PRIu64 ".del", name, ++s->trash_seq);
    if (renameat(s->spill_dirfd, name, s->spill_dirfd, j->trash) == 0) {
      enqueue(s, j);
      return;
    }
    free(j);
  }
  unlinkat(s->spill_dirfd, name, 0);
}

static void unlink_file(rd_store *s, uint64_t id) {
  char name[24];
  spill_name(name, NULL, id);
  unlink_name(s, name);
}

/* Remove fused file f and forget it. */
static void file_remove(rd_store *s, spill_file *f) {
  char name[24];
  spill_name(name, f, 0);
  unlink_name(s, name);
  free(f);
}

/* A fused file lost one object (read back or deleted): it goes with its last. */
static void file_unref(rd_store *s, spill_file *f) {
  if (--f->live == 0)
    file_remove(s, f);
}

/* o's bytes on disk are no longer wanted: its file, or its part of one. */
static void drop_file(rd_store *s, obj *o) {
  if (o->file != NULL)
    file_unref(s, o->file);
  else
    unlink_file(s, o->id);
  o->file = NULL;
  o->foff = 0;
}

/* Read `size` bytes at `foff` of the spill file (file, id) into dst.
 * Touches no store state: the spill thread calls it too. */
static int read_file(int dirfd, const spill_file *file, uint64_t id, uint64_t foff, uint8_t *dst, uint64_t size) {
  char name[24];
  spill_name(name, file, id);
  int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return RD_EIO;
  int e = full_io(fd, dst, size, foff, 0);   /* an error, or a file shorter than the object */
  close(fd);
  return e != 0 ? RD_EIO : 0;
}

/* ---- the fallback region ---- */

static int fallback_extent(const rd_store *s, uint64_t off) { return off >= s->capacity; }

/* Set the memfd's size to capacity + over (page-rounded). */
static int over_resize(rd_store *s, uint64_t over) {
  over = (over + PAGE - 1) & ~(PAGE - 1);
  if (over == s->over_mapped)
    return 0;
  if (ftruncate(s->fd, (off_t)(s->capacity + over)) != 0)
    return RD_ESTORE_FULL;
  s->over_mapped = over;
  return 0;
}

/* The region's size once its free end is given back, down to FALLBACK_KEEP
 * (less when the limit is smaller). */
static uint64_t trimmed(rd_store *s) {
  return rd_alloc_trim(s->over, s->fallback < FALLBACK_KEEP ? s->fallback : FALLBACK_KEEP);
}

/* Bytes the region could still give: free in it, and what it may grow by. */
static uint64_t region_room(const rd_store *s) {
  rd_alloc_stats st;
  rd_alloc_get_stats(s->over, &st);
  return s->fallback - st.capacity + st.free;
}

/* An extent of `size` bytes in the fallback region, its pages committed:
 * RD_E2BIG when the region could never hold it, RD_ESTORE_FULL when it is
 * full now or the kernel has no memory for the pages. */
static int fallback_place(rd_store *s, uint64_t size, uint64_t *off) {
  uint64_t want = EXT_SIZE(size), o;
  if (s->fallback == 0)
    return RD_ESTORE_FULL;
  if (want > s->fallback)
    return RD_E2BIG;
  int rc = rd_alloc_alloc(s->over, size, &o);
  if (rc == RD_ESTORE_FULL) {
    rd_alloc_stats st;
    rd_alloc_get_stats(s->over, &st);
    uint64_t grown = st.capacity + (want > FALLBACK_CHUNK ? want : FALLBACK_CHUNK);
    if (grown > s->fallback)
      grown = s->fallback;   /* a free last extent may make up the rest */
    if (grown <= st.capacity || over_resize(s, grown) != 0)
      return RD_ESTORE_FULL;
    if ((rc = rd_alloc_grow(s->over, grown)) == 0)
      rc = rd_alloc_alloc(s->over, size, &o);
    if (rc != 0) {
      (void)over_resize(s, trimmed(s));
      return rc;
    }
  } else if (rc != 0) {
    return rc;
  }
  /* commit the pages now: no memory is an error here, not SIGBUS in a
   * client writing the object */
  if (fallocate(s->fd, 0, (off_t)(s->capacity + o), (off_t)want) != 0) {
    rd_alloc_free(s->over, o);
    (void)over_resize(s, trimmed(s));
    return RD_ESTORE_FULL;
  }
  s->fallback_count++;
  *off = s->capacity + o;
  return 0;
}

/* Give an extent back: to the segment's allocator, or to the fallback
 * region with its whole pages (and the region's free end) returned to the
 * kernel. */
static void extent_free(rd_store *s, uint64_t off, uint64_t size) {
  if (!fallback_extent(s, off)) {
    int rc = rd_alloc_free(s->alloc, off);
    assert(rc == 0);
    (void)rc;
    return;
  }
  uint64_t ext = EXT_SIZE(size);
  int rc = rd_alloc_free(s->over, off - s->capacity);
  assert(rc == 0);
  (void)rc;
  uint64_t lo = (off + PAGE - 1) & ~(PAGE - 1), hi = (off + ext) & ~(PAGE - 1);
  if (ext >= FALLBACK_KEEP && hi > lo)
    (void)fallocate(s->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)lo, (off_t)(hi - lo));
  (void)over_resize(s, trimmed(s));
}

/* o's bytes are back in the extent at off: the file (or its part) goes. */
static void restored(rd_store *s, obj *o, uint64_t off) {
  drop_file(s, o);
  o->spilled = 0;
  o->offset = off;
  o->fallback = (uint8_t)fallback_extent(s, off);
  s->num_spilled--;
  s->bytes_spilled -= o->size;
  s->num_in_memory++;
  s->restore_count++;
}

/* o's bytes are in its file now: give its extent back. */
static void spilled(rd_store *s, obj *o) {
  list_remove(s, o);
  extent_free(s, o->offset, o->size);
  o->spilled = 1;
  o->offset = 0;
  o->fallback = 0;
  s->num_in_memory--;
  s->num_spilled++;
  s->bytes_spilled += o->size;
  s->spill_count++;
  s->evict_count++;
}

/* Write o's bytes to its spill file and give its extent back, here and now.
 * On failure the object is untouched (still in memory, still on the LRU
 * list). */
static int spill(rd_store *s, obj *o) {
  int rc = write_file(s->spill_dirfd, o->id, s->base, o->offset, o->size);
  if (rc == 0)
    spilled(s, o);
  return rc;
}

/* fallback_place, spilling the region's least recently used unpinned
 * objects, here and now, while it is full and they could make room. */
static int fallback_alloc(rd_store *s, uint64_t size, uint64_t *off) {
  for (;;) {
    int rc = fallback_place(s, size, off);
    if (rc != RD_ESTORE_FULL || s->spill_dirfd < 0 || s->fallback_lru.next == &s->fallback_lru)
      return rc;
    if (EXT_SIZE(size) > region_room(s) + s->fallback_lru_bytes)
      return RD_ESTORE_FULL;   /* spilling all of them would not do */
    if ((rc = spill(s, s->fallback_lru.next)) != 0)
      return rc;
  }
}

/* ---- background spilling ---- */

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *spill_main(void *arg) {
  rd_store *s = arg;
  pthread_mutex_lock(&s->spill_mu);
  for (;;) {
    while (s->todo == NULL && !s->spill_stop)
      pthread_cond_wait(&s->spill_cv, &s->spill_mu);
    if (s->spill_stop)
      break;
    spill_job *j = s->todo;
    s->todo = j->next;
    if (s->todo == NULL)
      s->todo_tail = &s->todo;
    s->spill_busy = 1;
    pthread_mutex_unlock(&s->spill_mu);
    if (j->kind == JOB_UNLINK) {   /* freeing a big file's blocks takes a while */
      unlinkat(s->spill_dirfd, j->trash, 0);
    } else if (j->kind == JOB_WRITE && j->file != NULL) {
      char name[24];
      spill_name(name, j->file, 0);
      j->rc = write_items(s->spill_dirfd, name, s->base, j->items, j->n);
    } else if (j->kind == JOB_WRITE) {
      j->rc = write_file(s->spill_dirfd, j->id, s->base, j->off, j->size);
    } else {
      j->rc = read_file(s->spill_dirfd, j->file, j->id, j->foff, s->base + j->off, j->size);
    }
    pthread_mutex_lock(&s->spill_mu);
    s->spill_busy = 0;
    pthread_cond_broadcast(&s->spill_done_cv);
    if (j->kind == JOB_UNLINK) {   /* nothing to finish */
      free(j);
      continue;
    }
    j->next = s->done;
    s->done = j;
    uint64_t one = 1;
    ssize_t w = write(s->spill_efd, &one, sizeof(one));
    (void)w;
  }
  pthread_mutex_unlock(&s->spill_mu);
  return NULL;
}

static void enqueue(rd_store *s, spill_job *j) {
  j->next = NULL;
  pthread_mutex_lock(&s->spill_mu);
  *s->todo_tail = j;
  s->todo_tail = &j->next;
  pthread_cond_signal(&s->spill_cv);
  pthread_mutex_unlock(&s->spill_mu);
}

/* A write job for a new fused file, with room for FUSE_OBJS items. */
static spill_job *new_batch(rd_store *s) {
  spill_job *j = calloc(1, sizeof(*j));
  spill_file *f = calloc(1, sizeof(*f));
  spill_item *items = malloc(FUSE_OBJS * sizeof(*items));
  if (j == NULL || f == NULL || items == NULL) {
    free(j);
    free(f);
    free(items);
    return NULL;
  }
  f->seq = ++s->file_seq;
  j->kind = JOB_WRITE;
  j->file = f;
  j->items = items;
  return j;
}

static void free_job(spill_job *j) {
  if (j->kind == JOB_WRITE)
    free(j->file);   /* a write's file is its own until write_finish hands it to its objects */
  free(j->items);
  free(j);
}

/* A write job of o's own (its own file), or NULL without memory. */
static spill_job *write_job(const obj *o) {
  spill_job *j = calloc(1, sizeof(*j));
  if (j != NULL) {
    j->kind = JOB_WRITE;
    j->id = o->id;
    j->size = o->size;
    j->off = o->offset;
  }
  return j;
}

/* o is handed to the spill thread: off its list, pinned by the job, its
 * bytes counted as on their way out (the segment's, or the region's:
 * write_finish_one takes them off the same count). */
static void mark_spilling(rd_store *s, obj *o) {
  list_remove(s, o);
  o->pins++;
  o->spilling = 1;
  if (o->fallback)
    s->fallback_spilling += EXT_SIZE(o->size);
  else
    s->spilling_bytes += EXT_SIZE(o->size);
}

/* Hand the least recently used objects to the spill thread while the bytes
 * in memory that no job is moving out exceed the threshold, or while `want`
 * bytes (a create waiting for room) are not covered by what is free plus
 * what the running jobs will free.  Returns how many jobs it started. */
static int spill_more(rd_store *s, uint64_t want) {
  if (!s->spill_started || s->lru.next == &s->lru)
    return 0;
  rd_alloc_stats st;
  rd_alloc_get_stats(s->alloc, &st);
  uint64_t limit = (uint64_t)(s->spill_threshold * (double)s->capacity);
  if (st.used <= limit + s->spilling_bytes && want <= st.free + s->spilling_bytes)
    return 0;   /* the common case, without a clock read */
  if (s->spill_backoff_ns != 0 && mono_ns() < s->spill_backoff_ns)
    return 0;
  int started = 0;
  spill_job *batch = NULL;   /* small objects gathered into one fused file */
  uint64_t batch_bytes = 0;
  /* once it has to spill, it spills at least this much (or all it can), so
   * that small objects leave together rather than one per create */
  uint64_t at_least = s->capacity / 32 < FUSE_BYTES ? s->capacity / 32 : FUSE_BYTES, moved = 0;
  while (s->lru.next != &s->lru) {
    uint64_t staying = st.used > s->spilling_bytes ? st.used - s->spilling_bytes : 0;
    if (staying <= limit && want <= st.free + s->spilling_bytes && moved >= at_least)
      break;
    obj *o = s->lru.next;
    spill_job *j = NULL;
    if (o->size < FUSE_OBJ_MAX) {
      if (batch == NULL && (batch = new_batch(s)) == NULL)
        break;
      batch->items[batch->n++] = (spill_item){.id = o->id, .size = o->size, .off = o->offset, .foff = batch_bytes};
      batch_bytes += o->size;
    } else if ((j = write_job(o)) == NULL) {
      break;
    }
    mark_spilling(s, o);
    moved += EXT_SIZE(o->size);
    if (j != NULL) {
      enqueue(s, j);
      started++;
    } else if (batch->n == FUSE_OBJS || batch_bytes >= FUSE_BYTES) {
      enqueue(s, batch);
      started++;
      batch = NULL;
      batch_bytes = 0;
    }
  }
  if (batch != NULL) {
    enqueue(s, batch);
    started++;
  }
  return started;
}

/* Could spilling the segment's whole LRU list (and the writes under way)
 * not make room for `size` bytes there?  Then it goes to the fallback region. */
static int segment_hopeless(const rd_store *s, uint64_t size) {
  if (size > s->capacity)
    return 1;
  rd_alloc_stats st;
  rd_alloc_get_stats(s->alloc, &st);
  return EXT_SIZE(size) > st.free + s->lru_bytes + s->spilling_bytes;
}

/* No room for `size` bytes now: 1 when the spill thread will make it (jobs
 * started for it here, or already running), so the caller may wait; 0 when
 * only an inline spill could (fragmentation, a paused thread) or nothing
 * can. */
static int room_coming(rd_store *s, uint64_t size) {
  return !segment_hopeless(s, size) && (spill_more(s, EXT_SIZE(size)) > 0 || s->spilling_bytes > 0);
}

/* The region has no room for `size` bytes: hand its least recently used
 * unpinned objects to the spill thread (a file each) until what they free,
 * with what is free and what jobs under way free, covers it.  1 when room
 * is coming, so the caller may wait; 0 when it fits already (or only
 * fragmentation is in the way) or cannot, and the caller goes on inline. */
static int fallback_room_coming(rd_store *s, uint64_t size) {
  uint64_t want = EXT_SIZE(size);
  if (!s->spill_started || want > s->fallback)
    return 0;
  uint64_t room = region_room(s);
  if (want <= room || want > room + s->fallback_lru_bytes + s->fallback_spilling)
    return 0;
  while (room + s->fallback_spilling < want && s->fallback_lru.next != &s->fallback_lru) {
    obj *o = s->fallback_lru.next;
    spill_job *j = write_job(o);
    if (j == NULL)
      break;
    mark_spilling(s, o);
    enqueue(s, j);
  }
  return s->fallback_spilling > 0;
}

static void destroy(rd_store *s, obj *o);
static int reap(rd_store *s);

/* Block until the spill thread has written every job handed to it, and
 * finish them: for a create that cannot be put off (rd_store_create). */
static void spill_wait(rd_store *s) {
  pthread_mutex_lock(&s->spill_mu);
  while (s->todo != NULL || s->spill_busy)
    pthread_cond_wait(&s->spill_done_cv, &s->spill_mu);
  pthread_mutex_unlock(&s->spill_mu);
  reap(s);
}

/* A read is back: the object is in memory again, unless it was deleted
 * meanwhile (then it is freed).  A failed read leaves it spilled, and the
 * next get reads inline and reports the error. */
static void restore_finish(rd_store *s, spill_job *j) {
  obj *o = rd__u64map_get(&s->objs, j->id);
  assert(o != NULL && o->restoring && o->spilled && o->pins > 0);
  o->restoring = 0;
  o->pins--;
  s->restoring_bytes -= EXT_SIZE(o->size);
  if (j->rc != 0 || o->deleted) {
    extent_free(s, j->off, o->size);
    o->restore_failed = j->rc != 0;
    if (o->deleted && o->pins == 0)
      destroy(s, o);
    return;
  }
  restored(s, o, j->off);
  if (o->pins == 0)
    lru_push(s, o);
}

/* One object of a write that is back (rc): it moves to disk (its own file,
 * or file at foff) if nobody pinned or deleted it meanwhile; otherwise its
 * bytes there are dropped and the object stays as it is. */
static void write_finish_one(rd_store *s, uint64_t id, int rc, spill_file *file, uint64_t foff) {
  obj *o = rd__u64map_get(&s->objs, id);
  assert(o != NULL && o->spilling && o->pins > 0);
  o->spilling = 0;
  if (o->fallback)
    s->fallback_spilling -= EXT_SIZE(o->size);
  else
    s->spilling_bytes -= EXT_SIZE(o->size);
  if (--o->pins == 0 && !o->deleted && rc == 0) {
    spilled(s, o);
    o->file = file;
    o->foff = foff;
    if (file != NULL)
      file->live++;
    return;
  }
  if (rc == 0 && file == NULL)
    unlink_file(s, o->id);
  if (o->pins == 0) {
    if (o->deleted)
      destroy(s, o);
    else
      lru_push(s, o);
  }
}

/* A write is back: each of its objects, then its fused file goes if none of
 * them is in it. */
static void write_finish(rd_store *s, spill_job *j) {
  if (j->rc != 0) {
    s->spill_fail_count++;
    s->spill_last_error = j->rc;
    s->spill_backoff_ns = mono_ns() + 1000000000ull;   /* a full disk: never spin */
  }
  if (j->file == NULL) {
    write_finish_one(s, j->id, j->rc, NULL, 0);
    return;
  }
  for (uint32_t i = 0; i < j->n; i++)
    write_finish_one(s, j->items[i].id, j->rc, j->file, j->items[i].foff);
  if (j->file->live == 0 && j->rc != 0)
    return;   /* nothing was written: free_job frees it */
  if (j->file->live == 0)
    file_remove(s, j->file);   /* written, but none of its objects moved to disk */
  j->file = NULL;   /* its objects own it now, or it is gone */
}

/* Allocate `size` bytes, spilling least recently used objects until it fits. */
static int alloc_spilling(rd_store *s, uint64_t size, uint64_t *off) {
  for (;;) {
    int rc = rd_alloc_alloc(s->alloc, size, off);
    if (rc != RD_ESTORE_FULL)
      return rc;
    rd_alloc_stats st;
    rd_alloc_get_stats(s->alloc, &st);
    if (s->spill_dirfd < 0 || s->lru.next == &s->lru || EXT_SIZE(size) > st.free + s->lru_bytes) {
      /* evicting everything evictable would not do; objects on their way
       * to disk may, once their jobs are done (when not even they would,
       * the fallback region is next: no wait) */
      if (s->spilling_bytes == 0 || segment_hopeless(s, size))
        return RD_ESTORE_FULL;
      spill_wait(s);
      continue;
    }
    rc = spill(s, s->lru.next);
    if (rc != 0)
      return rc;
  }
}

/* Allocate `size` bytes, spilling least recently used objects until it
 * fits; when spilling cannot make room (or fails), in the fallback region. */
static int alloc_room(rd_store *s, uint64_t size, uint64_t *off) {
  int rc = size > s->capacity ? RD_E2BIG : alloc_spilling(s, size, off);
  if (rc == RD_E2BIG || rc == RD_ESTORE_FULL || rc == RD_ENOSPC || rc == RD_EIO) {
    int frc = fallback_alloc(s, size, off);
    if (frc == 0 || size > s->capacity)
      return frc;
  }
  return rc;
}

/* Read a spilled object back into a new extent, here and now.  On failure it
 * stays spilled. */
static int restore(rd_store *s, obj *o) {
  uint64_t off;
  int rc = alloc_room(s, o->size, &off);
  if (rc != 0)
    return rc;
  rc = read_file(s->spill_dirfd, o->file, o->id, o->foff, s->base + off, o->size);
  if (rc != 0) {
    extent_free(s, off, o->size);
    return rc;
  }
  restored(s, o, off);
  return 0;
}

/* Stop counting o as a known object (delete or abort). */
static void uncount(rd_store *s, obj *o) {
  s->num_objects--;
  if (o->spilled)
    s->num_spilled--;
  else
    s->num_in_memory--;
}

/* Free o's space or spill file and forget it. */
static void destroy(rd_store *s, obj *o) {
  if (!o->deleted)
    uncount(s, o);
  list_remove(s, o);
  if (o->spilled) {
    drop_file(s, o);
    s->bytes_spilled -= o->size;
  } else {
    extent_free(s, o->offset, o->size);
  }
  obj *gone = rd__u64map_del(&s->objs, o->id);
  assert(gone == o);
  (void)gone;
  free(o->co);
  obj_put(s, o);
}

/* ---- segment and prefault ---- */

static void *prefault_main(void *arg) {
  rd_store *s = arg;
  long pagesz = sysconf(_SC_PAGESIZE);
  uint64_t page = pagesz > 0 ? (uint64_t)pagesz : PAGE;
  int use_madvise = 1;
  int retries = 0;
  for (uint64_t off = 0; off < s->capacity;) {
    if (atomic_load_explicit(&s->prefault_stop, memory_order_relaxed))
      break;
    uint64_t len = s->capacity - off < PREFAULT_CHUNK ? s->capacity - off : PREFAULT_CHUNK;
    if (use_madvise) {
      if (madvise(s->base + off, len, MADV_POPULATE_WRITE) == 0) {
        off += len;
        retries = 0;
        continue;
      }
      if ((errno == EINTR || errno == EAGAIN) && ++retries < 8)
        continue;
      if (errno != EINVAL && errno != EINTR && errno != EAGAIN) {
        /* ENOMEM/EFAULT: the memory is not there; touching would SIGBUS. */
        s->prefault_rc = RD_ENOMEM;
        break;
      }
      use_madvise = 0; /* kernel older than 5.14: touch the pages instead */
    }
    /* An atomic add of zero faults the page in for writing without ever
     * changing a byte that a client may already have written. */
    for (uint64_t p = 0; p < len; p += page)
      __atomic_fetch_add((volatile uint8_t *)(s->base + off + p), 0, __ATOMIC_RELAXED);
    off += len;
  }
  return NULL;
}

static void prefault_join(rd_store *s) {
  if (s->prefault_started && !s->prefault_joined) {
    pthread_join(s->prefault_thread, NULL);
    s->prefault_joined = 1;
  }
}

/* ---- public calls ---- */

int rd_store_open(rd_store **out, const rd_store_config *cfg) {
  if (out == NULL)
    return RD_EINVAL;
  *out = NULL;
  if (cfg == NULL || cfg->capacity == 0 || cfg->capacity > (uint64_t)INT64_MAX / 2 ||
      cfg->fallback_bytes > (uint64_t)INT64_MAX / 2 || cfg->capacity + cfg->fallback_bytes > (uint64_t)SIZE_MAX / 2)
    return RD_EINVAL;
  rd_store *s = calloc(1, sizeof(*s));
  if (s == NULL)
    return RD_ENOMEM;
  s->fd = -1;
  s->base = MAP_FAILED;
  s->spill_dirfd = -1;
  s->spill_efd = -1;
  s->capacity = (cfg->capacity + PAGE - 1) & ~(PAGE - 1);
  s->fallback = (cfg->fallback_bytes + PAGE - 1) & ~(PAGE - 1);
  list_init(&s->lru);
  list_init(&s->fallback_lru);
  list_init(&s->unsealed);
  atomic_init(&s->prefault_stop, 0);
  int rc;

  s->fd = memfd_create("raydist-store", MFD_CLOEXEC);
  if (s->fd < 0) {
    rc = errno == ENOMEM || errno == EMFILE || errno == ENFILE ? RD_ENOMEM : RD_ESYS;
    goto fail;
  }
  if (ftruncate(s->fd, (off_t)s->capacity) != 0) {
    rc = errno == ENOMEM || errno == ENOSPC || errno == EFBIG ? RD_ENOMEM : RD_ESYS;
    goto fail;
  }
  if (fchmod(s->fd, 0600) != 0) {
    rc = RD_ESYS;
    goto fail;
  }
  /* the fallback region's addresses too, past the memfd's end until used */
  s->base = mmap(NULL, (size_t)(s->capacity + s->fallback), PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
  if (s->base == MAP_FAILED) {
    rc = RD_ENOMEM;
    goto fail;
  }
  if ((rc = rd_alloc_new(&s->alloc, s->capacity)) != 0 || (rc = rd_alloc_new(&s->over, 0)) != 0)
    goto fail;
  if (rd__u64map_init(&s->objs, 1024) != 0) {
    rc = RD_ENOMEM;
    goto fail;
  }
  if (cfg->spill_dir != NULL) {
    if (asprintf(&s->spill_path, "%s/raydist-store-XXXXXX", cfg->spill_dir) < 0) {
      s->spill_path = NULL;
      rc = RD_ENOMEM;
      goto fail;
    }
    if (mkdtemp(s->spill_path) == NULL) { /* mode 0700, unique to this store */
      rc = errno == ENOSPC || errno == EDQUOT ? RD_ENOSPC : RD_EIO;
      free(s->spill_path);
      s->spill_path = NULL;
      goto fail;
    }
    s->spill_dirfd = open(s->spill_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s->spill_dirfd < 0) {
      rc = RD_EIO;
      goto fail;
    }
  }
  s->todo_tail = &s->todo;
  if (s->spill_dirfd >= 0 && cfg->spill_threshold > 0) {
    s->spill_threshold = cfg->spill_threshold < 1 ? cfg->spill_threshold : 1;
    s->spill_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s->spill_efd < 0) {
      rc = RD_ESYS;
      goto fail;
    }
    pthread_mutex_init(&s->spill_mu, NULL);
    pthread_cond_init(&s->spill_cv, NULL);
    pthread_cond_init(&s->spill_done_cv, NULL);
    if (pthread_create(&s->spill_thread, NULL, spill_main, s) != 0) {
      pthread_cond_destroy(&s->spill_done_cv);
      pthread_cond_destroy(&s->spill_cv);
      pthread_mutex_destroy(&s->spill_mu);
      rc = RD_ESYS;
      goto fail;
    }
    s->spill_started = 1;
  }
  if (cfg->prefault) {
    /* Best effort: a store without a prefault thread still works. */
    if (pthread_create(&s->prefault_thread, NULL, prefault_main, s) == 0)
      s->prefault_started = 1;
  }
  *out = s;
  return 0;

fail:
  rd_store_close(s);
  return rc;
}

void rd_store_close(rd_store *s) {
  if (s == NULL)
    return;
  atomic_store(&s->prefault_stop, 1);
  prefault_join(s);
  if (s->spill_started) {   /* a job being written is finished first */
    pthread_mutex_lock(&s->spill_mu);
    s->spill_stop = 1;
    pthread_cond_signal(&s->spill_cv);
    pthread_mutex_unlock(&s->spill_mu);
    pthread_join(s->spill_thread, NULL);
    for (spill_job *lists[2] = {s->todo, s->done}, **l = lists; l < lists + 2; l++) {
      while (*l != NULL) {
        spill_job *j = *l;
        *l = j->next;
        if (j->kind == JOB_UNLINK)
          unlinkat(s->spill_dirfd, j->trash, 0);
        if (j->kind == JOB_WRITE && j->file != NULL) {   /* written or not: not reaped */
          char name[24];
          spill_name(name, j->file, 0);
          unlinkat(s->spill_dirfd, name, 0);
        }
        free_job(j);
      }
    }
    pthread_cond_destroy(&s->spill_done_cv);
    pthread_cond_destroy(&s->spill_cv);
    pthread_mutex_destroy(&s->spill_mu);
  }
  if (s->spill_efd >= 0)
    close(s->spill_efd);
  if (s->objs.slots != NULL && s->spill_dirfd >= 0) {
    for (uint64_t i = 0; i <= s->objs.mask; i++) {
      obj *o = s->objs.slots[i].val;
      if (o != NULL && o->spilled)
        drop_file(s, o);   /* the thread is stopped: removed here */
      else if (o != NULL && o->spilling)
        unlink_file(s, o->id);
    }
  }
  if (s->spill_dirfd >= 0)
    close(s->spill_dirfd);
  if (s->spill_path != NULL) {
    rmdir(s->spill_path);
    free(s->spill_path);
  }
  while (s->chunks != NULL) {
    obj_chunk *c = s->chunks;
    s->chunks = c->next;
    free(c);
  }
  rd__u64map_free(&s->objs);
  rd_alloc_destroy(s->alloc);
  rd_alloc_destroy(s->over);
  if (s->base != MAP_FAILED)
    munmap(s->base, (size_t)(s->capacity + s->fallback));
  if (s->fd >= 0)
    close(s->fd);
  free(s);
}

int rd_store_prefault_wait(rd_store *s) {
  if (s == NULL)
    return RD_EINVAL;
  prefault_join(s);
  return s->prefault_rc;
}

int rd_store_fd(const rd_store *s) { return s->fd; }
uint64_t rd_store_capacity(const rd_store *s) { return s->capacity; }
uint64_t rd_store_map_size(const rd_store *s) { return s->capacity + s->fallback; }
uint8_t *rd_store_base(const rd_store *s) { return s->base; }

/* inline: 1 spills here when needed; 0 first leaves that to the spill thread
 * (RD_EAGAIN) whenever the spill thread has something to do for it. */
static int create(rd_store *s, uint64_t id, uint64_t size, uint32_t owner, int inline_spill,
                  uint64_t *offset_out) {
  if (s == NULL || offset_out == NULL)
    return RD_EINVAL;
  if (rd__u64map_get(&s->objs, id) != NULL)
    return RD_EEXIST;
  if (size > s->capacity && EXT_SIZE(size) > s->fallback)
    return RD_E2BIG;
  if (rd__u64map_reserve(&s->objs, s->objs.count + 1) != 0)
    return RD_ENOMEM;
  obj *o = obj_get(s);
  if (o == NULL)
    return RD_ENOMEM;
  uint64_t off;
  int rc = rd_alloc_alloc(s->alloc, size, &off);   /* RD_ESTORE_FULL past the capacity too */
  if (rc == RD_ESTORE_FULL && !inline_spill &&
      (room_coming(s, size) || (segment_hopeless(s, size) && fallback_room_coming(s, size)))) {
    obj_put(s, o);
    return RD_EAGAIN;
  }
  if (rc == RD_ESTORE_FULL)
    rc = alloc_room(s, size, &off);
  if (rc != 0) {
    obj_put(s, o);
    return rc;
  }
  o->id = id;
  o->offset = off;
  o->fallback = (uint8_t)fallback_extent(s, off);
  o->size = size;
  o->owner = owner;
  o->pins = 1;
  rd__u64map_put(&s->objs, id, o);
  list_push_tail(&s->unsealed, o, LIST_UNSEALED);
  s->num_objects++;
  s->num_in_memory++;
  *offset_out = off;
  spill_more(s, 0);
  return 0;
}

int rd_store_create(rd_store *s, uint64_t id, uint64_t size, uint32_t owner,
                    uint64_t *offset_out) {
  return create(s, id, size, owner, 1, offset_out);
}

int rd_store_create_nowait(rd_store *s, uint64_t id, uint64_t size, uint32_t owner,
                           uint64_t *offset_out) {
  return create(s, id, size, owner, 0, offset_out);
}

int rd_store_seal(rd_store *s, uint64_t id) {
  if (s == NULL)
    return RD_EINVAL;
  obj *o = rd__u64map_get(&s->objs, id);
  if (o == NULL || o->deleted)
    return RD_ENOENT;
  if (o->sealed)
    return RD_ESTATE;
  list_remove(s, o);
  o->sealed = 1;
  if (o->pins == 0) {
    lru_push(s, o);
    spill_more(s, 0);
  }
  return 0;
}

/* Hand a spilled object's read to the spill thread: RD_EAGAIN when the read
 * (or the room for it) is under way, 1 when the caller must read inline. */
static int restore_later(rd_store *s, obj *o) {
  if (!s->spill_started || o->restore_failed)
    return 1;
  uint64_t off;
  int rc = rd_alloc_alloc(s->alloc, o->size, &off);
  if (rc == RD_ESTORE_FULL && room_coming(s, o->size))
    return RD_EAGAIN;   /* asked again once jobs are reaped */
  if (rc == RD_ESTORE_FULL && segment_hopeless(s, o->size)) {   /* read back into the region */
    rc = fallback_place(s, o->size, &off);
    if (rc == RD_ESTORE_FULL && fallback_room_coming(s, o->size))
      return RD_EAGAIN;
  }
  spill_job *j = rc == 0 ? calloc(1, sizeof(*j)) : NULL;
  if (j == NULL) {
    if (rc == 0)
      extent_free(s, off, o->size);
    return 1;
  }
  o->restoring = 1;
  o->pins++;
  s->restoring_bytes += EXT_SIZE(o->size);
  j->kind = JOB_READ;
  j->id = o->id;
  j->size = o->size;
  j->off = off;
  j->file = o->file;   /* not the job's: the object keeps it while restoring */
  j->foff = o->foff;
  enqueue(s, j);
  return RD_EAGAIN;
}

static int get(rd_store *s, uint64_t id, int wait, uint64_t *offset_out, uint64_t *size_out) {
  if (s == NULL)
    return RD_EINVAL;
  obj *o = rd__u64map_get(&s->objs, id);
  if (o == NULL || o->deleted)
    return RD_ENOENT;
  if (!o->sealed)
    return RD_EAGAIN;
  if (o->pins == UINT32_MAX)
    return RD_ESTATE;
  if (o->restoring) {
    if (!wait)
      return RD_EAGAIN;
    spill_wait(s);   /* reaps the read: in memory, or restore_failed */
  }
  if (o->spilled) {
    int rc = wait ? 1 : restore_later(s, o);
    if (rc == 1 && (rc = restore(s, o)) == 0)
      o->restore_failed = 0;   /* sticks while inline reads fail too */
    if (rc != 0)
      return rc;
  }
  list_remove(s, o);  /* pinned objects are not evictable */
  o->pins++;
  if (offset_out != NULL)
    *offset_out = o->offset;
  if (size_out != NULL)
    *size_out = o->size;
  return 0;
}

int rd_store_get(rd_store *s, uint64_t id, uint64_t *offset_out, uint64_t *size_out) {
  return get(s, id, 1, offset_out, size_out);
}

int rd_store_get_nowait(rd_store *s, uint64_t id, uint64_t *offset_out, uint64_t *size_out) {
  return get(s, id, 0, offset_out, size_out);
}

int rd_store_reuse(rd_store *s, uint64_t id, uint64_t *offset_out, uint64_t *size_out) {
  if (s == NULL)
    return RD_EINVAL;
  obj *o = rd__u64map_get(&s->objs, id);
  if (o == NULL || !o->deleted || !o->sealed || o->spilled || o->pins == 0 || o->pins == UINT32_MAX)
    return RD_ENOENT;
  o->pins++;   /* pinned, so in memory: never spilled */
  if (offset_out != NULL)
    *offset_out = o->offset;
  if (size_out != NULL)
    *size_out = o->size;
  return 0;
}

int rd_store_release(rd_store *s, uint64_t id) {
  if (s == NULL)
    return RD_EINVAL;
  obj *o = rd__u64map_get(&s->objs, id);
  if (o == NULL)
    return RD_ENOENT;
  if (o->pins == 0)
    return RD_ESTATE;
  if (--o->pins > 0)
    return 0;
  if (o->deleted) {
    destroy(s, o);
  } else if (o->sealed) {
    lru_push(s, o); /* most recently used end */
    spill_more(s, 0);
  }
  return 0;
}

int rd_store_delete(rd_store *s, uint64_t id) {
  if (s == NULL)
    return RD_EINVAL;
  obj *o = rd__u64map_get(&s->objs, id);
  if (o == NULL || o->deleted)
    return RD_ENOENT;
  if (o->pins > 0) {
    uncount(s, o);
    o->deleted = 1; /* freed by the last rd_store_release */
    return 0;
  }
  destroy(s, o);
  return 0;
}

/* Where client is among o's co-owners, or -1. */
static int co_find(const obj *o, uint32_t client) {
  for (int k = 0; k < o->nco; k++)
    if (o->co[k].client == client)
      return k;
  return -1;
}

/* Which objects a scan of the table picks: those of the range [lo, hi]
 * still held by their maker (to delete, or to leave to their co-owners), or
 * those co-owned by a client (it leaves).  The action on each takes it out
 * of the pick, so repeated scans end. */
enum { PICK_RANGE, PICK_CO_OWNED };

/* Up to `cap` ids of the live objects picked; how many there are in all
 * (more than cap when some did not fit). */
static size_t ids_picked(const rd_store *s, int pick, uint64_t lo, uint64_t hi, uint32_t client, uint64_t *out,
                         size_t cap) {
  size_t n = 0;
  for (uint64_t i = 0; i <= s->objs.mask; i++) {
    const obj *o = s->objs.slots[i].val;
    if (o == NULL || o->deleted)
      continue;
    int match = pick == PICK_CO_OWNED ? co_find(o, client) >= 0
                                      : o->id >= lo && o->id <= hi && (o->nco == 0 || !o->maker_gone);
    if (match) {
      if (n < cap)
        out[n] = o->id;
      n++;
    }
  }
  return n;
}

/* Calls fn(s, id, client) on each object picked: collected first, since
 * deleting moves entries of the open-addressing table.  Returns how many
 * calls returned 1. */
static size_t each_picked(rd_store *s, int pick, uint64_t lo, uint64_t hi, uint32_t client,
                          int (*fn)(rd_store *, uint64_t, uint32_t)) {
  uint64_t few[256];
  size_t total = 0, n = ids_picked(s, pick, lo, hi, client, few, 256);
  uint64_t *ids = n > 256 ? malloc(n * sizeof(*ids)) : few;
  if (ids == NULL) {   /* out of memory: in passes of 256 */
    while ((n = ids_picked(s, pick, lo, hi, client, few, 256)) > 0) {
      for (size_t i = 0; i < n && i < 256; i++)
        total += fn(s, few[i], client);
    }
    return total;
  }
  if (ids != few)
    n = ids_picked(s, pick, lo, hi, client, ids, n);
  for (size_t i = 0; i < n; i++)
    total += fn(s, ids[i], client);
  if (ids != few)
    free(ids);
  return total;
}

/* Its maker is gone: deleted, or, co-owned, left to its co-owners. */
static int maker_leaves(rd_store *s, uint64_t id, uint32_t unused) {
  (void)unused;
  obj *o = rd__u64map_get(&s->objs, id);
  if (o->nco == 0)
    return rd_store_delete(s, id) == 0;
  o->maker_gone = 1;
  return 0;
}

/* Removes client from o's co-owners, all its counts or (`one`) one; deletes
 * o when nobody holds it any more.  RD_EINVAL when client is not one. */
static int co_owner_drop(rd_store *s, obj *o, uint32_t client, int one) {
  int k = co_find(o, client);
  if (k < 0)
    return RD_EINVAL;
  if (!one || --o->co[k].count == 0)
    o->co[k] = o->co[--o->nco];
  return o->nco == 0 && o->maker_gone ? rd_store_delete(s, o->id) : 0;
}

static int co_owner_leaves(rd_store *s, uint64_t id, uint32_t client) {
  obj *o = rd__u64map_get(&s->objs, id);
  int deletes = o->nco == 1 && o->maker_gone;
  return co_owner_drop(s, o, client, 0) == 0 && deletes;
}

size_t rd_store_delete_range(rd_store *s, uint64_t lo, uint64_t hi) {
  if (s == NULL || lo > hi)
    return 0;
  return each_picked(s, PICK_RANGE, lo, hi, 0, maker_leaves);
}

size_t rd_store_owner_gone(rd_store *s, uint32_t client) {
  if (s == NULL)
    return 0;
  return each_picked(s, PICK_CO_OWNED, 0, 0, client, co_owner_leaves);
}

int rd_store_owner_add(rd_store *s, uint64_t id, uint32_t client) {
  if (s == NULL)
    return RD_EINVAL;
  obj *o = rd__u64map_get(&s->objs, id);
  if (o == NULL || o->deleted)
    return RD_ENOENT;
  /* unsealed: its seal may come after the hand-over (the maker seals on its
   * own connection; the caller hands over on another); aborted, it goes
   * with its co-owners (destroy) */
  int k = co_find(o, client);
  if (k >= 0) {
    o->co[k].count++;
    return 0;
  }
  if (o->nco == UINT16_MAX)
    return RD_ENOMEM;
  co_owner *p = realloc(o->co, (o->nco + 1u) * sizeof(*p));
  if (p == NULL)
    return RD_ENOMEM;
  o->co = p;
  o->co[o->nco].client = client;
  o->co[o->nco++].count = 1;
  return 0;
}

int rd_store_owner_drop(rd_store *s, uint64_t id, uint32_t client, int maker) {
  if (s == NULL)
    return RD_EINVAL;
  obj *o = rd__u64map_get(&s->objs, id);
  if (o == NULL || o->deleted)
    return RD_ENOENT;
  if (!maker)
    return co_owner_drop(s, o, client, 1);
  o->maker_gone = 1;
  return o->nco == 0 ? rd_store_delete(s, id) : 0;
}

int rd_store_is_owner(const rd_store *s, uint64_t id, uint32_t client) {
  if (s == NULL)
    return 0;
  const obj *o = rd__u64map_get(&s->objs, id);
  return o != NULL && !o->deleted && co_find(o, client) >= 0;
}

int rd_store_is_spilled(const rd_store *s, uint64_t id) {
  if (s == NULL)
    return 0;
  const obj *o = rd__u64map_get(&s->objs, id);
  return o != NULL && !o->deleted && o->spilled;
}

int rd_store_contains(const rd_store *s, uint64_t id) {
  if (s == NULL)
    return 0;
  const obj *o = rd__u64map_get(&s->objs, id);
  return o != NULL && !o->deleted && o->sealed;
}

void rd_store_abort_client(rd_store *s, uint32_t owner) {
  if (s == NULL)
    return;
  obj *o = s->unsealed.next;
  while (o != &s->unsealed) {
    obj *next = o->next;
    if (o->owner == owner)
      destroy(s, o); /* even if the dead creator still pins it */
    o = next;
  }
}

void rd_store_get_stats(const rd_store *s, rd_store_stats *out) {
  memset(out, 0, sizeof(*out));
  if (s == NULL)
    return;
  rd_alloc_stats st;
  rd_alloc_get_stats(s->alloc, &st);
  out->capacity = s->capacity;
  out->used = st.used;
  out->largest_free = st.largest_free;
  out->num_objects = s->num_objects;
  out->num_in_memory = s->num_in_memory;
  out->num_spilled = s->num_spilled;
  out->bytes_spilled = s->bytes_spilled;
  out->spill_count = s->spill_count;
  out->restore_count = s->restore_count;
  out->evict_count = s->evict_count;
  out->spilling_bytes = s->spilling_bytes + s->fallback_spilling;
  out->restoring_bytes = s->restoring_bytes;
  out->spill_failures = s->spill_fail_count;
  out->spill_last_error = s->spill_last_error;
  out->fallback_limit = s->fallback;
  rd_alloc_get_stats(s->over, &st);   /* its extents are the objects' (EXT_SIZE) */
  out->fallback_used = st.used;
  out->num_fallback = st.num_allocs;
  out->fallback_count = s->fallback_count;
}

int rd_store_spill_fd(const rd_store *s) {
  return s != NULL && s->spill_started ? s->spill_efd : -1;
}

int rd_store_spill_reap(rd_store *s) {
  if (s == NULL || !s->spill_started)
    return 0;
  return reap(s);
}

/* Finish the jobs the thread is done with. */
static int reap(rd_store *s) {
  uint64_t n;
  ssize_t r = read(s->spill_efd, &n, sizeof(n));
  (void)r;
  pthread_mutex_lock(&s->spill_mu);
  spill_job *done = s->done;
  s->done = NULL;
  pthread_mutex_unlock(&s->spill_mu);
  int count = 0;
  while (done != NULL) {
    spill_job *j = done;
    done = j->next;
    if (j->kind == JOB_READ)
      restore_finish(s, j);
    else
      write_finish(s, j);
    free_job(j);
    count++;
  }
  return count;
}

size_t rd_store_list(const rd_store *s, rd_store_obj_info *out, size_t max) {
  size_t n = 0;
  if (!s || !s->objs.slots) return 0;
  for (uint64_t i = 0; i <= s->objs.mask; i++) {
    const obj *o = s->objs.slots[i].val;
    if (!o || o->deleted) continue;
    if (n < max && out) {
      rd_store_obj_info *x = &out[n];
      x->id = o->id;
      x->size = o->size;
      x->creator = o->owner;
      x->pins = o->pins;
      x->co_owners = o->nco;
      x->sealed = o->sealed;
      x->spilled = o->spilled;
      x->maker_gone = o->maker_gone;
      x->fallback = o->fallback;
    }
    n++;
  }
  return n;
}
