/* objectstore/store.h - the per-node shared-memory object store.
 *
 * Owned by the node daemon, single-threaded (called from its event loop only).
 * Objects live in one memfd segment that every process on the node maps; this
 * module keeps all metadata out of the segment, so a client that writes where
 * it should not can damage object bytes but never the store's bookkeeping.  It never blocks on another process
 * and never spins: a full segment with nothing evictable is RD_ESTORE_FULL.
 *
 * Spilling: least recently used unpinned sealed objects move to files in
 * the spill directory.  With a spill threshold, a thread of the store writes
 * them in the background as soon as objects fill more than that share of the
 * segment, so that creates seldom have to write a file themselves, and
 * reads spilled objects back for rd_store_get_nowait(); the caller's loop
 * polls rd_store_spill_fd() and calls rd_store_spill_reap(). */
#ifndef RD_OBJECTSTORE_STORE_H
#define RD_OBJECTSTORE_STORE_H

#include <stddef.h>
#include <stdint.h>

typedef struct rd_store rd_store;

typedef struct rd_store_config {
  uint64_t capacity;       /* segment size in bytes (rounded up to pages) */
  const char *spill_dir;   /* directory for spilled objects; NULL = no spilling */
  int prefault;            /* 1: populate the segment's pages in a background thread */
  double spill_threshold;  /* (0, 1]: spill in the background above this share of
                            * the segment; 0: only inside a create that does not fit */
  /* Fallback allocation: bytes past `capacity` that objects which cannot be
   * placed in it, even by spilling, may take (an object larger than the
   * capacity, a segment full of pinned objects, spilling failing).  Pages
   * are committed at create and given back when the object goes; such an
   * object is spilled only to make room in the region when it is full.
   * 0: none (those creates fail). */
  uint64_t fallback_bytes;
} rd_store_config;

typedef struct rd_store_stats {
  uint64_t capacity;
  uint64_t used;           /* bytes allocated to objects in the segment */
  uint64_t largest_free;   /* largest allocation that would succeed now */
  uint64_t num_objects;    /* objects known (in memory or spilled) */
  uint64_t num_in_memory;
  uint64_t num_spilled;
  uint64_t bytes_spilled;  /* currently on disk */
  uint64_t spill_count;    /* total spills since open */
  uint64_t restore_count;  /* total restores since open */
  uint64_t evict_count;    /* total objects moved out of memory */
  uint64_t spilling_bytes; /* being written by the background spill thread */
  uint64_t restoring_bytes; /* being read back by it */
  uint64_t spill_failures; /* background writes that failed (disk full, I/O) */
  int spill_last_error;    /* RD_ENOSPC / RD_EIO of the last failure, or 0 */
  uint64_t fallback_limit; /* config's fallback_bytes (page-rounded) */
  uint64_t fallback_used;  /* bytes of objects in the fallback region now */
  uint64_t num_fallback;   /* objects there now */
  uint64_t fallback_count; /* fallback allocations since open */
} rd_store_stats;

/* Create the segment (memfd, owner-only) and empty tables.  *out owned by caller,
 * released with rd_store_close(). */
int rd_store_open(rd_store **out, const rd_store_config *cfg);
/* Free everything, unmap and close the segment, remove this store's spill files. */
void rd_store_close(rd_store *s);

int rd_store_fd(const rd_store *s);            /* the memfd, to pass to clients */
uint64_t rd_store_capacity(const rd_store *s);
/* What every process maps of the memfd: capacity + fallback bytes (the
 * memfd itself is shorter until the fallback region is used; offsets the
 * store hands out are always inside it). */
uint64_t rd_store_map_size(const rd_store *s);
uint8_t *rd_store_base(const rd_store *s);     /* daemon's own mapping */

/* Allocate `size` bytes for a new unsealed object `id`, created by client `owner`
 * (an opaque number; see rd_store_abort_client).  Makes room by spilling
 * least-recently-used unpinned sealed objects when needed, and when that
 * cannot (or fails), allocates in the fallback region.  The new object holds
 * one pin for its creator.  Errors: RD_EEXIST, RD_E2BIG (larger than the
 * segment and the fallback region), RD_ESTORE_FULL (nothing more can be
 * evicted, and no fallback room), RD_ENOSPC / RD_EIO (spilling failed, no
 * fallback room).  size 0 is allowed. */
int rd_store_create(rd_store *s, uint64_t id, uint64_t size, uint32_t owner,
                    uint64_t *offset_out);
/* As rd_store_create, but it leaves writing spill files to the background
 * thread: when the object fits only once others are spilled and that thread
 * has work for it (started now or already running), it answers RD_EAGAIN, and
 * the caller tries again after rd_store_spill_reap() has finished jobs.  With
 * nothing to wait for it spills here, as rd_store_create does (so a full disk
 * is still RD_ENOSPC to the caller). */
int rd_store_create_nowait(rd_store *s, uint64_t id, uint64_t size, uint32_t owner,
                           uint64_t *offset_out);
/* Make `id` immutable and visible to get.  RD_ENOENT, RD_ESTATE if sealed. */
int rd_store_seal(rd_store *s, uint64_t id);
/* Pin a sealed object and return where it is.  A spilled object is restored
 * first (which can itself spill others).  RD_ENOENT unknown; RD_EAGAIN exists but
 * not sealed yet (the caller waits for the seal); restore errors as create. */
int rd_store_get(rd_store *s, uint64_t id, uint64_t *offset_out, uint64_t *size_out);
/* As rd_store_get, but a spilled object is read back by the background
 * thread: RD_EAGAIN while that read (or the room for it) is under way; ask
 * again after rd_store_spill_reap() has finished jobs.  Without a spill
 * thread, or after the thread's read failed, it reads inline as
 * rd_store_get does (which reports the error). */
int rd_store_get_nowait(rd_store *s, uint64_t id, uint64_t *offset_out, uint64_t *size_out);
/* As rd_store_get, for a sealed object deleted while pinned (a pulled copy on
 * its way out, which a new reader may still use): pins it, and it stays
 * deleted, freed by its last release.  RD_ENOENT when there is no such
 * object. */
int rd_store_reuse(rd_store *s, uint64_t id, uint64_t *offset_out, uint64_t *size_out);
/* Drop one pin taken by create or get.  RD_ENOENT, RD_ESTATE if not pinned. */
int rd_store_release(rd_store *s, uint64_t id);
/* The object is no longer referenced: free it now, or when its last pin is
 * released.  RD_ENOENT if unknown. */
int rd_store_delete(rd_store *s, uint64_t id);
/* Delete every object whose id is in [lo, hi] (the objects of an owner that
 * is gone), as rd_store_delete does each; co-owned ones stay while their
 * co-owners hold them (their maker lets go).  Returns how many.  It scans the
 * whole table: for rare events, not for the hot path. */
size_t rd_store_delete_range(rd_store *s, uint64_t lo, uint64_t hi);
/* Co-owners (rd_return_refs): a task hands an object it made over to its
 * caller, who then holds it as well as its maker (the client its id names).
 * The object goes when neither holds it any more.
 *   rd_store_owner_add: client holds the object `id` once more; it may
 *     not be sealed yet (the hand-over can come before its seal, on another
 *     connection), and goes for every holder if it is aborted instead
 *     (RD_ENOENT, RD_ENOMEM).
 *   rd_store_owner_drop: client lets go: its maker (`maker`) for good, a
 *     co-owner once; deleted when nobody holds it (RD_ENOENT, RD_EINVAL when
 *     client does not co-own it).
 *   rd_store_is_owner: does client co-own it?
 *   rd_store_owner_gone: client is gone: it lets go of all it co-owns;
 *     returns how many objects that deleted. */
int rd_store_owner_add(rd_store *s, uint64_t id, uint32_t client);
int rd_store_owner_drop(rd_store *s, uint64_t id, uint32_t client, int maker);
int rd_store_is_owner(const rd_store *s, uint64_t id, uint32_t client);
size_t rd_store_owner_gone(rd_store *s, uint32_t client);
/* Is `id` a sealed object whose bytes are on disk (or being read back)? */
int rd_store_is_spilled(const rd_store *s, uint64_t id);
/* Does the store hold a sealed copy (in memory or spilled)? */
int rd_store_contains(const rd_store *s, uint64_t id);
/* Client `owner` is gone: delete the unsealed objects it created.  Pins it held
 * on sealed objects are dropped by the caller (rd_store_release per pin). */
void rd_store_abort_client(rd_store *s, uint32_t owner);

void rd_store_get_stats(const rd_store *s, rd_store_stats *out);

/* One object as rd_store_list reports it. */
typedef struct rd_store_obj_info {
  uint64_t id;
  uint64_t size;           /* bytes asked for at create */
  uint32_t creator;        /* the client that created it here */
  uint32_t pins;           /* gets holding it now */
  uint16_t co_owners;      /* clients it was handed over to (rd_store_owner_add) */
  uint8_t sealed, spilled;
  uint8_t maker_gone;      /* held only by co-owners */
  uint8_t fallback;        /* in the fallback region */
} rd_store_obj_info;
/* Every object known (in memory, unsealed or spilled), in no order: fills
 * out[0..max) and returns how many there are (more than max: the rest are
 * left out).  For the daemon's thread, as every call that changes the table. */
size_t rd_store_list(const rd_store *s, rd_store_obj_info *out, size_t max);

/* Background spilling: an fd that turns readable when the spill thread has
 * finished jobs (-1 without a spill threshold or spill directory), and the
 * call that finishes them on the store's thread: a written object moves to
 * disk unless it was pinned or deleted meanwhile (then it stays in memory, or
 * is freed); a read one is in memory again (or freed if deleted).  Returns
 * how many jobs it finished.  A failed write is counted in the stats and
 * stops background spilling for a second. */
int rd_store_spill_fd(const rd_store *s);
int rd_store_spill_reap(rd_store *s);

/* Block until the background prefault thread (cfg->prefault) has finished.
 * For tests and benchmarks, not for the event loop.  Returns 0, or RD_ENOMEM
 * if the kernel could not populate the pages (the store still works; pages
 * are then faulted in on first use). */
int rd_store_prefault_wait(rd_store *s);

#endif
