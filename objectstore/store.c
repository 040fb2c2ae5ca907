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
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "raydist/error.h"
#include "u64map.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define PAGE 4096ull
#define PREFAULT_CHUNK (64ull << 20)
#define OBJ_CHUNK 256
#define EXT_SIZE(sz) ((sz) == 0 ? RD_ALLOC_ALIGN : (((sz) + RD_ALLOC_ALIGN - 1) & ~(uint64_t)(RD_ALLOC_ALIGN - 1)))

enum { LIST_NONE = 0, LIST_LRU, LIST_UNSEALED };

typedef struct obj {
  uint64_t id;
  uint64_t offset;         /* in the segment, valid when !spilled */
  uint64_t size;           /* bytes asked for at create */
  struct obj *prev, *next; /* LRU list or unsealed list, see `list` */
  uint32_t owner;
  uint32_t pins;
  uint8_t sealed;
  uint8_t deleted;         /* delete called while pinned: free on last release */
  uint8_t spilled;         /* bytes are in spill file <hex id>, not the segment */
  uint8_t list;
} obj;

typedef struct obj_chunk {
  struct obj_chunk *next;
  obj objs[OBJ_CHUNK];
} obj_chunk;

struct rd_store {
  int fd;
  uint8_t *base;
  uint64_t capacity;
  rd_alloc *alloc;
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
  o->prev->next = o->next;
  o->next->prev = o->prev;
  o->prev = o->next = NULL;
  o->list = LIST_NONE;
}

static void lru_push(rd_store *s, obj *o) {
  assert(o->sealed && !o->spilled && o->pins == 0 && !o->deleted);
  list_push_tail(&s->lru, o, LIST_LRU);
  s->lru_bytes += EXT_SIZE(o->size);
}

/* ---- spill files ---- */

static void spill_name(char name[17], uint64_t id) {
  snprintf(name, 17, "%016" PRIx64, id);
}

static int spill_errno(int e) {
  return (e == ENOSPC || e == EFBIG || e == EDQUOT) ? RD_ENOSPC : RD_EIO;
}

/* Write o's bytes to its spill file and give its extent back.  On failure the
 * object is untouched (still in memory, still on the LRU list). */
static int spill(rd_store *s, obj *o) {
  char name[17];
  spill_name(name, o->id);
  int fd = openat(s->spill_dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return spill_errno(errno);
  int rc = 0;
  const uint8_t *src = s->base + o->offset;
  uint64_t done = 0;
  while (done < o->size) {
    ssize_t n = pwrite(fd, src + done, o->size - done, (off_t)done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      rc = n < 0 ? spill_errno(errno) : RD_EIO;
      break;
    }
    done += (uint64_t)n;
  }
  if (close(fd) != 0 && rc == 0)
    rc = spill_errno(errno);
  if (rc != 0) {
    unlinkat(s->spill_dirfd, name, 0);
    return rc;
  }
  list_remove(s, o);
  int frc = rd_alloc_free(s->alloc, o->offset);
  assert(frc == 0);
  (void)frc;
  o->spilled = 1;
  o->offset = 0;
  s->num_in_memory--;
  s->num_spilled++;
  s->bytes_spilled += o->size;
  s->spill_count++;
  s->evict_count++;
  return 0;
}

/* Allocate `size` bytes, spilling least recently used objects until it fits. */
static int alloc_room(rd_store *s, uint64_t size, uint64_t *off) {
  for (;;) {
    int rc = rd_alloc_alloc(s->alloc, size, off);
    if (rc != RD_ESTORE_FULL)
      return rc;
    if (s->spill_dirfd < 0 || s->lru.next == &s->lru)
      return RD_ESTORE_FULL;
    rd_alloc_stats st;
    rd_alloc_get_stats(s->alloc, &st);
    if (EXT_SIZE(size) > st.free + s->lru_bytes)
      return RD_ESTORE_FULL; /* evicting everything evictable would not do */
    rc = spill(s, s->lru.next);
    if (rc != 0)
      return rc;
  }
}

/* Read a spilled object back into a new extent.  On failure it stays spilled. */
static int restore(rd_store *s, obj *o) {
  uint64_t off;
  int rc = alloc_room(s, o->size, &off);
  if (rc != 0)
    return rc;
  char name[17];
  spill_name(name, o->id);
  int fd = openat(s->spill_dirfd, name, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    rd_alloc_free(s->alloc, off);
    return RD_EIO;
  }
  uint8_t *dst = s->base + off;
  uint64_t done = 0;
  while (done < o->size) {
    ssize_t n = pread(fd, dst + done, o->size - done, (off_t)done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) { /* error, or the file is shorter than the object */
      rc = RD_EIO;
      break;
    }
    done += (uint64_t)n;
  }
  close(fd);
  if (rc != 0) {
    rd_alloc_free(s->alloc, off);
    return rc;
  }
  unlinkat(s->spill_dirfd, name, 0);
  o->spilled = 0;
  o->offset = off;
  s->num_spilled--;
  s->bytes_spilled -= o->size;
  s->num_in_memory++;
  s->restore_count++;
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
    char name[17];
    spill_name(name, o->id);
    unlinkat(s->spill_dirfd, name, 0);
    s->bytes_spilled -= o->size;
  } else {
    int rc = rd_alloc_free(s->alloc, o->offset);
    assert(rc == 0);
    (void)rc;
  }
  obj *gone = rd__u64map_del(&s->objs, o->id);
  assert(gone == o);
  (void)gone;
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
  if (cfg == NULL || cfg->capacity == 0 || cfg->capacity > (uint64_t)INT64_MAX - PAGE ||
      cfg->capacity > (uint64_t)SIZE_MAX - PAGE)
    return RD_EINVAL;
  rd_store *s = calloc(1, sizeof(*s));
  if (s == NULL)
    return RD_ENOMEM;
  s->fd = -1;
  s->base = MAP_FAILED;
  s->spill_dirfd = -1;
  s->capacity = (cfg->capacity + PAGE - 1) & ~(PAGE - 1);
  list_init(&s->lru);
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
  s->base = mmap(NULL, (size_t)s->capacity, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
  if (s->base == MAP_FAILED) {
    rc = RD_ENOMEM;
    goto fail;
  }
  if ((rc = rd_alloc_new(&s->alloc, s->capacity)) != 0)
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
  if (s->objs.slots != NULL && s->spill_dirfd >= 0) {
    for (uint64_t i = 0; i <= s->objs.mask; i++) {
      obj *o = s->objs.slots[i].val;
      if (o != NULL && o->spilled) {
        char name[17];
        spill_name(name, o->id);
        unlinkat(s->spill_dirfd, name, 0);
      }
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
  if (s->base != MAP_FAILED)
    munmap(s->base, (size_t)s->capacity);
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
uint8_t *rd_store_base(const rd_store *s) { return s->base; }

int rd_store_create(rd_store *s, uint64_t id, uint64_t size, uint32_t owner,
                    uint64_t *offset_out) {
  if (s == NULL || offset_out == NULL)
    return RD_EINVAL;
  if (rd__u64map_get(&s->objs, id) != NULL)
    return RD_EEXIST;
  if (size > s->capacity)
    return RD_E2BIG;
  if (rd__u64map_reserve(&s->objs, s->objs.count + 1) != 0)
    return RD_ENOMEM;
  obj *o = obj_get(s);
  if (o == NULL)
    return RD_ENOMEM;
  uint64_t off;
  int rc = alloc_room(s, size, &off);
  if (rc != 0) {
    obj_put(s, o);
    return rc;
  }
  o->id = id;
  o->offset = off;
  o->size = size;
  o->owner = owner;
  o->pins = 1;
  rd__u64map_put(&s->objs, id, o);
  list_push_tail(&s->unsealed, o, LIST_UNSEALED);
  s->num_objects++;
  s->num_in_memory++;
  *offset_out = off;
  return 0;
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
  if (o->pins == 0)
    lru_push(s, o);
  return 0;
}

int rd_store_get(rd_store *s, uint64_t id, uint64_t *offset_out, uint64_t *size_out) {
  if (s == NULL)
    return RD_EINVAL;
  obj *o = rd__u64map_get(&s->objs, id);
  if (o == NULL || o->deleted)
    return RD_ENOENT;
  if (!o->sealed)
    return RD_EAGAIN;
  if (o->pins == UINT32_MAX)
    return RD_ESTATE;
  if (o->spilled) {
    int rc = restore(s, o);
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

int rd_store_reuse(rd_store *s, uint64_t id, uint64_t *offset_out, uint64_t *size_out) {
  if (s == NULL)
    return RD_EINVAL;
  obj *o = rd__u64map_get(&s->objs, id);
  if (o == NULL || !o->deleted || !o->sealed || o->pins == 0 || o->pins == UINT32_MAX)
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
  if (o->deleted)
    destroy(s, o);
  else if (o->sealed)
    lru_push(s, o); /* most recently used end */
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
}
