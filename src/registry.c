/* src/registry.c - remote functions by name.
 *
 * RD_REMOTE's constructors only append descriptors to a list (no allocation,
 * no I/O before main).  rd_init() builds the lookup table and reports
 * duplicate names; a worker finds what an owner asked for by name. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "log.h"

static rd_function *reg_head;
static rd_function **table;
static size_t table_mask;

void rd_function_register_(rd_function *f) {
  f->next_ = reg_head;
  reg_head = f;
}

static uint64_t hash_name(const char *s) {
  uint64_t h = 1469598103934665603ull;
  while (*s) h = (h ^ (uint8_t)*s++) * 1099511628211ull;
  return h;
}

int rd__registry_build(void) {
  size_t n = 0;
  for (rd_function *f = reg_head; f; f = f->next_) n++;
  size_t cap = 16;
  while (cap < n * 2) cap *= 2;
  rd_function **t = calloc(cap, sizeof(*t));
  if (!t) return RD_ENOMEM;
  for (rd_function *f = reg_head; f; f = f->next_) {
    if (!f->name || !*f->name || !f->fn) {
      free(t);
      rd__log(RD_LOG_ERROR, "a remote function descriptor has no name or no function");
      return RD_EINVAL;
    }
    size_t i = hash_name(f->name) & (cap - 1);
    while (t[i]) {
      if (!strcmp(t[i]->name, f->name)) {
        rd__log(RD_LOG_ERROR, "remote function '%s' is registered twice", f->name);
        free(t);
        return RD_EEXIST;
      }
      i = (i + 1) & (cap - 1);
    }
    t[i] = f;
  }
  free(table);
  table = t;
  table_mask = cap - 1;
  return 0;
}

void rd__registry_free(void) {
  free(table);
  table = NULL;
  table_mask = 0;
}

rd_function *rd_function_lookup(const char *name) {
  if (!name) return NULL;
  if (!table) {  /* before rd_init: walk the list */
    for (rd_function *f = reg_head; f; f = f->next_)
      if (!strcmp(f->name, name)) return f;
    return NULL;
  }
  for (size_t i = hash_name(name) & table_mask; table[i]; i = (i + 1) & table_mask)
    if (!strcmp(table[i]->name, name)) return table[i];
  return NULL;
}
