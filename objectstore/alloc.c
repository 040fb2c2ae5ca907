/* objectstore/alloc.c - best-fit extent allocator with immediate coalescing.
 *
 * Every extent, free or used, is a node in an address-ordered list that
 * partitions [0, capacity); free extents also sit in a red-black tree keyed by
 * (size, offset) and live ones in a hash keyed by offset, so alloc and free are
 * O(log n).  It must never read or write the segment: all metadata is heap
 * memory, taken from a node pool so steady-state alloc/free do not malloc. */

#include "alloc.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "raydist/error.h"
#include "u64map.h"

#define EXT_CHUNK 512
#define ALIGN_UP(x) (((x) + (RD_ALLOC_ALIGN - 1)) & ~(uint64_t)(RD_ALLOC_ALIGN - 1))

enum { RB_RED = 0, RB_BLACK = 1 };

typedef struct ext {
  uint64_t off, size;
  struct ext *prev, *next;            /* address order, NULL at the ends */
  struct ext *left, *right, *parent;  /* size tree (free extents only) */
  uint8_t color, is_free;
} ext;

typedef struct ext_chunk {
  struct ext_chunk *next;
  ext nodes[EXT_CHUNK];
} ext_chunk;

struct rd_alloc {
  uint64_t capacity, used;
  uint64_t num_allocs, num_free_extents;
  ext *head;          /* the extent at offset 0 */
  ext *tail;          /* the last extent (rd_alloc_grow, rd_alloc_trim) */
  ext *root;          /* size tree; &nil when empty */
  ext nil;            /* sentinel leaf, always black */
  ext *spare;         /* unused nodes, linked through next */
  ext_chunk *chunks;
  rd__u64map live;    /* offset -> used extent */
};

/* ---- node pool ---- */

static ext *node_get(rd_alloc *a) {
  if (a->spare == NULL) {
    ext_chunk *c = malloc(sizeof(*c));
    if (c == NULL)
      return NULL;
    c->next = a->chunks;
    a->chunks = c;
    for (int i = 0; i < EXT_CHUNK; i++) {
      c->nodes[i].next = a->spare;
      a->spare = &c->nodes[i];
    }
  }
  ext *e = a->spare;
  a->spare = e->next;
  memset(e, 0, sizeof(*e));
  return e;
}

static void node_put(rd_alloc *a, ext *e) {
  e->next = a->spare;
  a->spare = e;
}

/* ---- red-black tree over free extents, keyed by (size, offset) ---- */

static int key_less(const ext *x, const ext *y) {
  return x->size < y->size || (x->size == y->size && x->off < y->off);
}

static void rot_left(rd_alloc *a, ext *x) {
  ext *nil = &a->nil, *y = x->right;
  x->right = y->left;
  if (y->left != nil)
    y->left->parent = x;
  y->parent = x->parent;
  if (x->parent == nil)
    a->root = y;
  else if (x == x->parent->left)
    x->parent->left = y;
  else
    x->parent->right = y;
  y->left = x;
  x->parent = y;
}

static void rot_right(rd_alloc *a, ext *x) {
  ext *nil = &a->nil, *y = x->left;
  x->left = y->right;
  if (y->right != nil)
    y->right->parent = x;
  y->parent = x->parent;
  if (x->parent == nil)
    a->root = y;
  else if (x == x->parent->right)
    x->parent->right = y;
  else
    x->parent->left = y;
  y->right = x;
  x->parent = y;
}

static void rb_insert(rd_alloc *a, ext *z) {
  ext *nil = &a->nil, *y = nil, *x = a->root;
  while (x != nil) {
    y = x;
    x = key_less(z, x) ? x->left : x->right;
  }
  z->parent = y;
  if (y == nil)
    a->root = z;
  else if (key_less(z, y))
    y->left = z;
  else
    y->right = z;
  z->left = z->right = nil;
  z->color = RB_RED;
  while (z->parent->color == RB_RED) {
    ext *g = z->parent->parent;
    if (z->parent == g->left) {
      y = g->right;
      if (y->color == RB_RED) {
        z->parent->color = RB_BLACK;
        y->color = RB_BLACK;
        g->color = RB_RED;
        z = g;
      } else {
        if (z == z->parent->right) {
          z = z->parent;
          rot_left(a, z);
        }
        z->parent->color = RB_BLACK;
        z->parent->parent->color = RB_RED;
        rot_right(a, z->parent->parent);
      }
    } else {
      y = g->left;
      if (y->color == RB_RED) {
        z->parent->color = RB_BLACK;
        y->color = RB_BLACK;
        g->color = RB_RED;
        z = g;
      } else {
        if (z == z->parent->left) {
          z = z->parent;
          rot_right(a, z);
        }
        z->parent->color = RB_BLACK;
        z->parent->parent->color = RB_RED;
        rot_left(a, z->parent->parent);
      }
    }
  }
  a->root->color = RB_BLACK;
}

static void transplant(rd_alloc *a, ext *u, ext *v) {
  if (u->parent == &a->nil)
    a->root = v;
  else if (u == u->parent->left)
    u->parent->left = v;
  else
    u->parent->right = v;
  v->parent = u->parent;
}

static void rb_delete_fixup(rd_alloc *a, ext *x) {
  while (x != a->root && x->color == RB_BLACK) {
    if (x == x->parent->left) {
      ext *w = x->parent->right;
      if (w->color == RB_RED) {
        w->color = RB_BLACK;
        x->parent->color = RB_RED;
        rot_left(a, x->parent);
        w = x->parent->right;
      }
      if (w->left->color == RB_BLACK && w->right->color == RB_BLACK) {
        w->color = RB_RED;
        x = x->parent;
      } else {
        if (w->right->color == RB_BLACK) {
          w->left->color = RB_BLACK;
          w->color = RB_RED;
          rot_right(a, w);
          w = x->parent->right;
        }
        w->color = x->parent->color;
        x->parent->color = RB_BLACK;
        w->right->color = RB_BLACK;
        rot_left(a, x->parent);
        x = a->root;
      }
    } else {
      ext *w = x->parent->left;
      if (w->color == RB_RED) {
        w->color = RB_BLACK;
        x->parent->color = RB_RED;
        rot_right(a, x->parent);
        w = x->parent->left;
      }
      if (w->right->color == RB_BLACK && w->left->color == RB_BLACK) {
        w->color = RB_RED;
        x = x->parent;
      } else {
        if (w->left->color == RB_BLACK) {
          w->right->color = RB_BLACK;
          w->color = RB_RED;
          rot_left(a, w);
          w = x->parent->left;
        }
        w->color = x->parent->color;
        x->parent->color = RB_BLACK;
        w->left->color = RB_BLACK;
        rot_right(a, x->parent);
        x = a->root;
      }
    }
  }
  x->color = RB_BLACK;
}

static void rb_delete(rd_alloc *a, ext *z) {
  ext *nil = &a->nil, *x, *y = z;
  uint8_t y_color = y->color;
  if (z->left == nil) {
    x = z->right;
    transplant(a, z, z->right);
  } else if (z->right == nil) {
    x = z->left;
    transplant(a, z, z->left);
  } else {
    y = z->right;
    while (y->left != nil)
      y = y->left;
    y_color = y->color;
    x = y->right;
    if (y->parent == z) {
      x->parent = y;
    } else {
      transplant(a, y, y->right);
      y->right = z->right;
      y->right->parent = y;
    }
    transplant(a, z, y);
    y->left = z->left;
    y->left->parent = y;
    y->color = z->color;
  }
  if (y_color == RB_BLACK)
    rb_delete_fixup(a, x);
  z->left = z->right = z->parent = NULL;
}

/* Smallest free extent of at least `size`; lowest offset among equal sizes. */
static ext *best_fit(const rd_alloc *a, uint64_t size) {
  const ext *nil = &a->nil;
  ext *x = a->root, *best = NULL;
  while (x != nil) {
    if (x->size >= size) {
      best = x;
      x = x->left;
    } else {
      x = x->right;
    }
  }
  return best;
}

static ext *tree_pred(const rd_alloc *a, const ext *x) {
  const ext *nil = &a->nil;
  if (x->left != nil) {
    x = x->left;
    while (x->right != nil)
      x = x->right;
    return (ext *)x;
  }
  const ext *y = x->parent;
  while (y != nil && x == y->left) {
    x = y;
    y = y->parent;
  }
  return y == nil ? NULL : (ext *)y;
}

static ext *tree_succ(const rd_alloc *a, const ext *x) {
  const ext *nil = &a->nil;
  if (x->right != nil) {
    x = x->right;
    while (x->left != nil)
      x = x->left;
    return (ext *)x;
  }
  const ext *y = x->parent;
  while (y != nil && x == y->right) {
    x = y;
    y = y->parent;
  }
  return y == nil ? NULL : (ext *)y;
}

/* Give free extent e the key (off, size).  When it stays between its tree
 * neighbours (the common case: the big tail extent shrinking or a neighbour
 * growing a little) it is updated in place, saving a delete and an insert. */
static void rekey(rd_alloc *a, ext *e, uint64_t off, uint64_t size) {
  ext probe = {.off = off, .size = size};
  const ext *lo = tree_pred(a, e), *hi = tree_succ(a, e);
  if ((lo == NULL || key_less(lo, &probe)) && (hi == NULL || key_less(&probe, hi))) {
    e->off = off;
    e->size = size;
    return;
  }
  rb_delete(a, e);
  e->off = off;
  e->size = size;
  rb_insert(a, e);
}

/* ---- public calls ---- */

int rd_alloc_new(rd_alloc **out, uint64_t capacity) {
  if (out == NULL)
    return RD_EINVAL;
  *out = NULL;
  rd_alloc *a = calloc(1, sizeof(*a));
  if (a == NULL)
    return RD_ENOMEM;
  a->capacity = capacity & ~(uint64_t)(RD_ALLOC_ALIGN - 1);
  a->nil.color = RB_BLACK;
  a->nil.left = a->nil.right = a->nil.parent = &a->nil;
  a->root = &a->nil;
  if (rd__u64map_init(&a->live, 1024) != 0) {
    free(a);
    return RD_ENOMEM;
  }
  if (a->capacity > 0) {
    ext *e = node_get(a);
    if (e == NULL) {
      rd_alloc_destroy(a);
      return RD_ENOMEM;
    }
    e->off = 0;
    e->size = a->capacity;
    e->is_free = 1;
    a->head = a->tail = e;
    rb_insert(a, e);
    a->num_free_extents = 1;
  }
  *out = a;
  return 0;
}

void rd_alloc_destroy(rd_alloc *a) {
  if (a == NULL)
    return;
  while (a->chunks != NULL) {
    ext_chunk *c = a->chunks;
    a->chunks = c->next;
    free(c);
  }
  rd__u64map_free(&a->live);
  free(a);
}

int rd_alloc_alloc(rd_alloc *a, uint64_t size, uint64_t *offset_out) {
  if (a == NULL || offset_out == NULL)
    return RD_EINVAL;
  if (size > a->capacity)
    return RD_ESTORE_FULL;
  size = size == 0 ? RD_ALLOC_ALIGN : ALIGN_UP(size); /* capacity is aligned: no overflow */
  ext *e = best_fit(a, size);
  if (e == NULL)
    return RD_ESTORE_FULL;
  /* Take everything that can fail before changing any state. */
  if (rd__u64map_reserve(&a->live, a->live.count + 1) != 0)
    return RD_ENOMEM;
  ext *used = e;
  if (e->size > size) {
    /* Split: the front becomes the allocation (so low, pre-faulted offsets
     * fill first) and the free node keeps the rest. */
    if ((used = node_get(a)) == NULL)
      return RD_ENOMEM;
    used->off = e->off;
    used->size = size;
    used->prev = e->prev;
    used->next = e;
    if (e->prev != NULL)
      e->prev->next = used;
    else
      a->head = used;
    e->prev = used;
    rekey(a, e, e->off + size, e->size - size);
  } else {
    rb_delete(a, e);
    a->num_free_extents--;
  }
  used->is_free = 0;
  rd__u64map_put(&a->live, used->off, used);
  a->used += size;
  a->num_allocs++;
  *offset_out = used->off;
  return 0;
}

static void unlink_ext(rd_alloc *a, ext *e) {
  if (e->prev != NULL)
    e->prev->next = e->next;
  else
    a->head = e->next;
  if (e->next != NULL)
    e->next->prev = e->prev;
  else
    a->tail = e->prev;
  node_put(a, e);
}

int rd_alloc_free(rd_alloc *a, uint64_t offset) {
  if (a == NULL)
    return RD_EINVAL;
  ext *e = rd__u64map_del(&a->live, offset);
  if (e == NULL)
    return RD_EINVAL;
  assert(!e->is_free && e->off == offset);
  a->used -= e->size;
  a->num_allocs--;
  ext *p = e->prev, *n = e->next;
  int pf = p != NULL && p->is_free, nf = n != NULL && n->is_free;
  if (pf && nf) {
    rb_delete(a, n);
    a->num_free_extents--;
    rekey(a, p, p->off, p->size + e->size + n->size);
    unlink_ext(a, e);
    unlink_ext(a, n);
  } else if (pf) {
    rekey(a, p, p->off, p->size + e->size);
    unlink_ext(a, e);
  } else if (nf) {
    rekey(a, n, e->off, e->size + n->size);
    unlink_ext(a, e);
  } else {
    e->is_free = 1;
    rb_insert(a, e);
    a->num_free_extents++;
  }
  return 0;
}

int rd_alloc_grow(rd_alloc *a, uint64_t capacity) {
  if (a == NULL)
    return RD_EINVAL;
  capacity &= ~(uint64_t)(RD_ALLOC_ALIGN - 1);
  if (capacity <= a->capacity)
    return capacity == a->capacity ? 0 : RD_EINVAL;
  uint64_t more = capacity - a->capacity;
  ext *t = a->tail;
  if (t != NULL && t->is_free) {
    rekey(a, t, t->off, t->size + more);
  } else {
    ext *e = node_get(a);
    if (e == NULL)
      return RD_ENOMEM;
    e->off = a->capacity;
    e->size = more;
    e->is_free = 1;
    e->prev = t;
    if (t != NULL)
      t->next = e;
    else
      a->head = e;
    a->tail = e;
    rb_insert(a, e);
    a->num_free_extents++;
  }
  a->capacity = capacity;
  return 0;
}

uint64_t rd_alloc_trim(rd_alloc *a, uint64_t floor) {
  if (a == NULL)
    return 0;
  floor = (floor + RD_ALLOC_ALIGN - 1) & ~(uint64_t)(RD_ALLOC_ALIGN - 1);
  ext *t = a->tail;
  if (t == NULL || !t->is_free || a->capacity <= floor)
    return a->capacity;
  uint64_t start = t->off;
  if (start < floor) {   /* keep the free tail's front, up to floor */
    rekey(a, t, start, floor - start);
  } else {
    rb_delete(a, t);
    a->num_free_extents--;
    unlink_ext(a, t);
  }
  a->capacity = start > floor ? start : floor;
  return a->capacity;
}

void rd_alloc_get_stats(const rd_alloc *a, rd_alloc_stats *out) {
  memset(out, 0, sizeof(*out));
  if (a == NULL)
    return;
  out->capacity = a->capacity;
  out->used = a->used;
  out->free = a->capacity - a->used;
  const ext *x = a->root;
  if (x != &a->nil) {
    while (x->right != &a->nil)
      x = x->right;
    out->largest_free = x->size;
  }
  out->num_allocs = a->num_allocs;
  out->num_free_extents = a->num_free_extents;
}

/* ---- invariant check (tests) ---- */

/* Returns the black height of the subtree, or -1 if it is broken. */
static int check_subtree(const rd_alloc *a, const ext *x, uint64_t *count) {
  if (x == &a->nil)
    return 1;
  if (!x->is_free)
    return -1;
  if (x->color == RB_RED && (x->left->color == RB_RED || x->right->color == RB_RED))
    return -1;
  if (x->left != &a->nil && (x->left->parent != x || !key_less(x->left, x)))
    return -1;
  if (x->right != &a->nil && (x->right->parent != x || !key_less(x, x->right)))
    return -1;
  int hl = check_subtree(a, x->left, count);
  int hr = check_subtree(a, x->right, count);
  if (hl < 0 || hr < 0 || hl != hr)
    return -1;
  (*count)++;
  return hl + (x->color == RB_BLACK);
}

int rd__alloc_check(const rd_alloc *a) {
  uint64_t expect_off = 0, used = 0, nalloc = 0, nfree = 0;
  const ext *prev = NULL;
  for (const ext *e = a->head; e != NULL; prev = e, e = e->next) {
    if (e->prev != prev || e->off != expect_off || e->size == 0 || e->size % RD_ALLOC_ALIGN)
      return -1;
    if (e->is_free) {
      if (prev != NULL && prev->is_free)
        return -1; /* two free neighbours: coalescing missed */
      nfree++;
    } else {
      if (rd__u64map_get(&a->live, e->off) != e)
        return -1;
      used += e->size;
      nalloc++;
    }
    expect_off += e->size;
  }
  if (prev != a->tail)
    return -1;
  if (expect_off != a->capacity || used != a->used || nalloc != a->num_allocs ||
      nalloc != a->live.count || nfree != a->num_free_extents)
    return -1;
  if (a->root->color != RB_BLACK || (a->root != &a->nil && a->root->parent != &a->nil))
    return -1;
  uint64_t in_tree = 0;
  if (check_subtree(a, a->root, &in_tree) < 0 || in_tree != nfree)
    return -1;
  return 0;
}
