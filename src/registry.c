/* src/registry.c - remote functions, actor classes and actor methods by name.
 *
 * The registration macros' constructors only append descriptors to lists (no
 * allocation, no I/O before main).  rd_init() builds the lookup tables and
 * reports duplicate names; a worker finds what an owner asked for by name,
 * never by pointer. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "log.h"

static rd_function *fn_head;
static rd_actor_class *cls_head;
static rd_actor_method *meth_head;

void rd_function_register_(rd_function *f) {
  f->next_ = fn_head;
  fn_head = f;
}

void rd_actor_class_register_(rd_actor_class *c) {
  c->next_ = cls_head;
  cls_head = c;
}

void rd_actor_method_register_(rd_actor_method *m) {
  m->next_ = meth_head;
  meth_head = m;
}

/* An open-addressing table from name to descriptor. */
typedef struct name_table {
  const char **names;
  void **vals;
  size_t mask;
} name_table;

static name_table fn_table, cls_table, meth_table;

static uint64_t hash_name(const char *s) {
  uint64_t h = 1469598103934665603ull;
  while (*s) h = (h ^ (uint8_t)*s++) * 1099511628211ull;
  return h;
}

static void table_free(name_table *t) {
  free(t->names);
  free(t->vals);
  memset(t, 0, sizeof(*t));
}

/* 0, RD_ENOMEM, RD_EEXIST (duplicate, logged) or RD_EINVAL (no name). */
static int table_put(name_table *t, const char *name, void *val, const char *what) {
  if (!name || !*name || !val) {
    rd__log(RD_LOG_ERROR, "a %s descriptor has no name or no function", what);
    return RD_EINVAL;
  }
  size_t i = hash_name(name) & t->mask;
  while (t->names[i]) {
    if (!strcmp(t->names[i], name)) {
      rd__log(RD_LOG_ERROR, "%s '%s' is registered twice", what, name);
      return RD_EEXIST;
    }
    i = (i + 1) & t->mask;
  }
  t->names[i] = name;
  t->vals[i] = val;
  return 0;
}

static int table_init(name_table *t, size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap *= 2;
  t->names = calloc(cap, sizeof(*t->names));
  t->vals = calloc(cap, sizeof(*t->vals));
  t->mask = cap - 1;
  if (!t->names || !t->vals) {
    table_free(t);
    return RD_ENOMEM;
  }
  return 0;
}

static void *table_get(const name_table *t, const char *name) {
  if (!t->names || !name) return NULL;
  for (size_t i = hash_name(name) & t->mask; t->names[i]; i = (i + 1) & t->mask)
    if (!strcmp(t->names[i], name)) return t->vals[i];
  return NULL;
}

int rd__registry_build(void) {
  size_t nf = 0, nc = 0, nm = 0;
  for (rd_function *f = fn_head; f; f = f->next_) nf++;
  for (rd_actor_class *c = cls_head; c; c = c->next_) nc++;
  for (rd_actor_method *m = meth_head; m; m = m->next_) nm++;
  rd__registry_free();
  int r = table_init(&fn_table, nf);
  if (r == 0) r = table_init(&cls_table, nc);
  if (r == 0) r = table_init(&meth_table, nm);
  for (rd_function *f = fn_head; r == 0 && f; f = f->next_)
    r = table_put(&fn_table, f->name, f->fn ? (void *)f : NULL, "remote function");
  for (rd_actor_class *c = cls_head; r == 0 && c; c = c->next_)
    r = table_put(&cls_table, c->name, c->init ? (void *)c : NULL, "actor class");
  for (rd_actor_method *m = meth_head; r == 0 && m; m = m->next_) {
    r = table_put(&meth_table, m->name, m->fn ? (void *)m : NULL, "actor method");
    if (r == 0 && !table_get(&cls_table, m->class_name)) {
      rd__log(RD_LOG_ERROR, "actor method '%s' names no registered class '%s'", m->name, m->class_name);
      r = RD_EINVAL;
    }
  }
  if (r != 0) rd__registry_free();
  return r;
}

void rd__registry_free(void) {
  table_free(&fn_table);
  table_free(&cls_table);
  table_free(&meth_table);
}

rd_function *rd_function_lookup(const char *name) {
  if (!name) return NULL;
  if (!fn_table.names) {  /* before rd_init: walk the list */
    for (rd_function *f = fn_head; f; f = f->next_)
      if (!strcmp(f->name, name)) return f;
    return NULL;
  }
  return table_get(&fn_table, name);
}

rd_actor_class *rd_actor_class_lookup(const char *name) {
  if (!name) return NULL;
  if (!cls_table.names) {
    for (rd_actor_class *c = cls_head; c; c = c->next_)
      if (!strcmp(c->name, name)) return c;
    return NULL;
  }
  return table_get(&cls_table, name);
}

rd_actor_method *rd_actor_method_lookup(const char *name) {
  if (!name) return NULL;
  if (!meth_table.names) {
    for (rd_actor_method *m = meth_head; m; m = m->next_)
      if (!strcmp(m->name, name)) return m;
    return NULL;
  }
  return table_get(&meth_table, name);
}

int rd__class_has_grouped_methods(const char *cls) {
  for (rd_actor_method *m = meth_head; m; m = m->next_)
    if (m->concurrency_group && *m->concurrency_group && cls && !strcmp(m->class_name, cls)) return 1;
  return 0;
}
