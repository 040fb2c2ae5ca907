/* objectstore/alloc.h - extent allocator for the store segment.
 *
 * Hands out [offset, offset+size) ranges of a segment of fixed size.  All of
 * its metadata lives in ordinary process memory, never in the segment.  Best
 * fit over size-ordered free extents, with immediate coalescing of neighbours
 * so that freed space is reusable at any size.  Not thread-safe. */
#ifndef RD_OBJECTSTORE_ALLOC_H
#define RD_OBJECTSTORE_ALLOC_H

#include <stdint.h>

#define RD_ALLOC_ALIGN 64u   /* every offset and size is a multiple of this */

typedef struct rd_alloc rd_alloc;

typedef struct rd_alloc_stats {
  uint64_t capacity, used, free, largest_free;
  uint64_t num_allocs;       /* live allocations */
  uint64_t num_free_extents;
} rd_alloc_stats;

int rd_alloc_new(rd_alloc **out, uint64_t capacity);   /* RD_ENOMEM */
void rd_alloc_destroy(rd_alloc *a);
/* size 0 is rounded up to one alignment unit.  RD_ESTORE_FULL if no free
 * extent is large enough (the caller evicts and retries). */
int rd_alloc_alloc(rd_alloc *a, uint64_t size, uint64_t *offset_out);
/* RD_EINVAL if offset is not the start of a live allocation. */
int rd_alloc_free(rd_alloc *a, uint64_t offset);
void rd_alloc_get_stats(const rd_alloc *a, rd_alloc_stats *out);
/* A growable range (the store's fallback region): rd_alloc_grow makes the
 * range [0, capacity) larger (the new bytes free, joined to a free last
 * extent); RD_EINVAL for a smaller capacity, RD_ENOMEM.  rd_alloc_trim
 * gives back a free last extent down to `floor` (64-byte aligned up) and
 * returns the capacity left: the end of the last allocation, or floor. */
int rd_alloc_grow(rd_alloc *a, uint64_t capacity);
uint64_t rd_alloc_trim(rd_alloc *a, uint64_t floor);

/* Internal, for tests: walk every structure and verify its invariants
 * (extents partition the range, no two free neighbours, red-black properties,
 * counters).  Returns 0 if consistent, -1 otherwise.  O(n). */
int rd__alloc_check(const rd_alloc *a);

#endif
