/* safetensors.c - validating, mmap-based safetensors reader (see safetensors.h).
 *
 * Everything in the header is untrusted: sizes are checked for overflow before
 * use, and no tensor pointer is handed out until the whole file has been
 * validated. */
#include "safetensors.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"
#include "raydist/error.h"

#define RD__ST_MAX_HEADER (100u << 20) /* the format's own limit is 100 MB */

struct rd_safetensors {
  void *map;
  size_t map_len;
  const unsigned char *data; /* start of the data section */
  uint64_t data_len;
  rd_st_tensor *t;
  size_t n;
};

static const struct { const char *name; size_t size; } dtypes[RD__ST_NDTYPES] = {
    [RD_ST_BOOL] = {"BOOL", 1}, [RD_ST_U8] = {"U8", 1},     [RD_ST_I8] = {"I8", 1},
    [RD_ST_I16] = {"I16", 2},   [RD_ST_U16] = {"U16", 2},   [RD_ST_F16] = {"F16", 2},
    [RD_ST_BF16] = {"BF16", 2}, [RD_ST_I32] = {"I32", 4},   [RD_ST_U32] = {"U32", 4},
    [RD_ST_F32] = {"F32", 4},   [RD_ST_I64] = {"I64", 8},   [RD_ST_U64] = {"U64", 8},
    [RD_ST_F64] = {"F64", 8},   [RD_ST_F8_E4M3] = {"F8_E4M3", 1},
    [RD_ST_F8_E5M2] = {"F8_E5M2", 1},
};

const char *rd_st_dtype_name(rd_st_dtype t) {
  return (unsigned)t < RD__ST_NDTYPES ? dtypes[t].name : "?";
}
size_t rd_st_dtype_size(rd_st_dtype t) {
  return (unsigned)t < RD__ST_NDTYPES ? dtypes[t].size : 0;
}

static int fail(char *err, size_t errlen, int rc, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int fail(char *err, size_t errlen, int rc, const char *path, const char *fmt, ...) {
  if (errlen) {
    int n = snprintf(err, errlen, "%s: ", path);
    if (n >= 0 && (size_t)n < errlen) {
      va_list ap;
      va_start(ap, fmt);
      vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
      va_end(ap);
    }
  }
  return rc;
}

static int cmp_begin(const void *a, const void *b) {
  const rd_st_tensor *x = a, *y = b;
  return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

static int cmp_name(const void *a, const void *b) {
  const rd_st_tensor *x = a, *y = b;
  return strcmp(x->name, y->name);
}

static void st_free(rd_safetensors *st) {
  if (!st) return;
  for (size_t i = 0; i < st->n; i++) free((char *)st->t[i].name);
  free(st->t);
  if (st->map && st->map != MAP_FAILED) munmap(st->map, st->map_len);
  free(st);
}

void rd_safetensors_close(rd_safetensors *st) { st_free(st); }

int rd_safetensors_open(const char *path, rd_safetensors **out, char *err, size_t errlen) {
  *out = NULL;
  if (!path) return fail(err, errlen, RD_EINVAL, "(null)", "no path given");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    return fail(err, errlen, e == ENOENT ? RD_ENOENT : RD_EIO, path, "cannot open: %s", strerror(e));
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    close(fd);
    return fail(err, errlen, RD_EIO, path, "not a regular file");
  }
  size_t size = (size_t)sb.st_size;
  if (size < 8) {
    close(fd);
    return fail(err, errlen, RD_EINVAL, path, "truncated: %zu bytes, less than the 8-byte header length", size);
  }
  rd_safetensors *st = calloc(1, sizeof *st);
  if (!st) { close(fd); return RD_ENOMEM; }
  st->map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (st->map == MAP_FAILED) {
    int e = errno;
    st_free(st);
    return fail(err, errlen, RD_EIO, path, "mmap failed: %s", strerror(e));
  }
  st->map_len = size;
  const unsigned char *b = st->map;
  uint64_t hlen = 0;
  for (int k = 7; k >= 0; k--) hlen = (hlen << 8) | b[k];
  if (hlen > RD__ST_MAX_HEADER || hlen > size - 8) {
    st_free(st);
    return fail(err, errlen, RD_EINVAL, path,
                "truncated or corrupt: header length %llu but the file has %zu bytes after it",
                (unsigned long long)hlen, size - 8);
  }
  if (hlen < 2 || b[8] != '{') {
    st_free(st);
    return fail(err, errlen, RD_EINVAL, path, "header is not a JSON object");
  }
  st->data = b + 8 + hlen;
  st->data_len = size - 8 - hlen;

  rd__json *root = NULL;
  char jerr[160];
  int rc = rd__json_parse((const char *)b + 8, (size_t)hlen, &root, jerr, sizeof jerr);
  if (rc) {
    st_free(st);
    return fail(err, errlen, rc, path, "bad header: %s", jerr);
  }
  if (root->type != RD__JSON_OBJ) {
    rd__json_free(root);
    st_free(st);
    return fail(err, errlen, RD_EINVAL, path, "header is not a JSON object");
  }
  st->t = calloc(root->len ? root->len : 1, sizeof *st->t);
  if (!st->t) { rd__json_free(root); st_free(st); return RD_ENOMEM; }

  rc = 0;
  for (const rd__json *m = root->child; m && !rc; m = m->next) {
    if (strcmp(m->key, "__metadata__") == 0) {
      if (m->type != RD__JSON_OBJ) rc = fail(err, errlen, RD_EINVAL, path, "__metadata__ is not an object");
      continue;
    }
    rd_st_tensor *t = &st->t[st->n];
    t->name = strdup(m->key);
    if (!t->name) { rc = RD_ENOMEM; break; }
    st->n++;
    if (m->type != RD__JSON_OBJ) { rc = fail(err, errlen, RD_EINVAL, path, "tensor '%s': entry is not an object", m->key); break; }
    const rd__json *dt = rd__json_get(m, "dtype"), *sh = rd__json_get(m, "shape"),
                   *off = rd__json_get(m, "data_offsets");
    if (!dt || dt->type != RD__JSON_STR || !sh || sh->type != RD__JSON_ARR || !off ||
        off->type != RD__JSON_ARR) {
      rc = fail(err, errlen, RD_EINVAL, path, "tensor '%s': needs string dtype, array shape and array data_offsets", m->key);
      break;
    }
    int found = -1;
    for (int k = 0; k < RD__ST_NDTYPES; k++)
      if (strcmp(dt->str, dtypes[k].name) == 0) found = k;
    if (found < 0) { rc = fail(err, errlen, RD_EINVAL, path, "tensor '%s': unknown dtype '%s'", m->key, dt->str); break; }
    t->dtype = (rd_st_dtype)found;
    if (sh->len > RD_ST_MAX_DIMS) { rc = fail(err, errlen, RD_EINVAL, path, "tensor '%s': %zu dimensions (at most %d)", m->key, sh->len, RD_ST_MAX_DIMS); break; }
    uint64_t count = 1;
    int bad = 0;
    for (const rd__json *d = sh->child; d; d = d->next) {
      if (d->type != RD__JSON_NUM || !d->is_int || d->i < 0) { bad = 1; break; }
      t->shape[t->ndim++] = d->i;
      if (d->i != 0 && count > UINT64_MAX / (uint64_t)d->i) { bad = 1; break; }
      count *= (uint64_t)d->i;
    }
    if (bad) { rc = fail(err, errlen, RD_EINVAL, path, "tensor '%s': bad shape", m->key); break; }
    if (off->len != 2 || off->child->type != RD__JSON_NUM || !off->child->is_int ||
        off->child->next->type != RD__JSON_NUM || !off->child->next->is_int ||
        off->child->i < 0 || off->child->next->i < off->child->i) {
      rc = fail(err, errlen, RD_EINVAL, path, "tensor '%s': data_offsets must be [begin, end] with 0 <= begin <= end", m->key);
      break;
    }
    t->begin = (uint64_t)off->child->i;
    t->end = (uint64_t)off->child->next->i;
    uint64_t esz = dtypes[t->dtype].size;
    if (count > UINT64_MAX / esz || count * esz != t->end - t->begin) {
      rc = fail(err, errlen, RD_EINVAL, path,
                "tensor '%s': shape and dtype %s need %llu bytes but data_offsets span %llu", m->key,
                dt->str, (unsigned long long)(count * esz), (unsigned long long)(t->end - t->begin));
      break;
    }
    if (t->end > st->data_len) {
      rc = fail(err, errlen, RD_EINVAL, path,
                "truncated: tensor '%s' ends at data byte %llu but the file holds only %llu data bytes",
                m->key, (unsigned long long)t->end, (unsigned long long)st->data_len);
      break;
    }
    t->data = st->data + t->begin;
  }
  rd__json_free(root);
  if (rc) { st_free(st); return rc; }

  /* spans must not overlap; sort by offset to check, then by name for lookup */
  qsort(st->t, st->n, sizeof *st->t, cmp_begin);
  for (size_t i = 1; i < st->n; i++) {
    if (st->t[i].begin < st->t[i - 1].end) {
      rc = fail(err, errlen, RD_EINVAL, path, "tensors '%s' and '%s' overlap", st->t[i - 1].name, st->t[i].name);
      st_free(st);
      return rc;
    }
  }
  qsort(st->t, st->n, sizeof *st->t, cmp_name);
  for (size_t i = 1; i < st->n; i++) {
    if (strcmp(st->t[i].name, st->t[i - 1].name) == 0) {
      rc = fail(err, errlen, RD_EINVAL, path, "tensor '%s' appears twice", st->t[i].name);
      st_free(st);
      return rc;
    }
  }
  *out = st;
  return 0;
}

size_t rd_safetensors_count(const rd_safetensors *st) { return st->n; }

const rd_st_tensor *rd_safetensors_at(const rd_safetensors *st, size_t i) {
  return i < st->n ? &st->t[i] : NULL;
}

const rd_st_tensor *rd_safetensors_find(const rd_safetensors *st, const char *name) {
  rd_st_tensor key = {.name = name};
  return bsearch(&key, st->t, st->n, sizeof *st->t, cmp_name);
}

int rd_safetensors_get_f32(const rd_safetensors *st, const char *name, int ndim,
                           const int64_t *shape, const float **data, char *err, size_t errlen) {
  const rd_st_tensor *t = rd_safetensors_find(st, name);
  if (!t) return fail(err, errlen, RD_ENOENT, name, "tensor missing from the weights file");
  if (t->dtype != RD_ST_F32)
    return fail(err, errlen, RD_EINVAL, name, "wrong dtype %s (the engine needs F32)", rd_st_dtype_name(t->dtype));
  int same = t->ndim == ndim;
  for (int k = 0; same && k < ndim; k++) same = t->shape[k] == shape[k];
  if (!same) {
    char want[96] = "", got[96] = "";
    size_t wl = 0, gl = 0;
    for (int k = 0; k < ndim && wl < sizeof want; k++)
      wl += (size_t)snprintf(want + wl, sizeof want - wl, "%s%lld", k ? "," : "", (long long)shape[k]);
    for (int k = 0; k < t->ndim && gl < sizeof got; k++)
      gl += (size_t)snprintf(got + gl, sizeof got - gl, "%s%lld", k ? "," : "", (long long)t->shape[k]);
    return fail(err, errlen, RD_EINVAL, name, "wrong shape [%s], expected [%s]", got, want);
  }
  if (((uintptr_t)t->data & 3) != 0)
    return fail(err, errlen, RD_EINVAL, name, "data is not 4-byte aligned");
  *data = t->data;
  return 0;
}
