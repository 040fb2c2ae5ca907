/* json.h - a small, strict JSON reader for the engine's model files.
 *
 * Reads the safetensors header and config.json into a tree.  It is internal to
 * gpu/ (rd__ prefix), bounded in depth, and never trusts its input: every
 * failure is an RD_EINVAL or RD_ENOMEM with a message naming the byte offset. */
#ifndef RD_GPU_JSON_H
#define RD_GPU_JSON_H

#include <stddef.h>
#include <stdint.h>

typedef enum rd__json_type {
  RD__JSON_NULL, RD__JSON_BOOL, RD__JSON_NUM, RD__JSON_STR, RD__JSON_ARR, RD__JSON_OBJ
} rd__json_type;

typedef struct rd__json rd__json;
struct rd__json {
  rd__json_type type;
  char *key;        /* member name when the parent is an object, else NULL */
  char *str;        /* RD__JSON_STR: NUL-terminated UTF-8 (may hold NULs; see len) */
  size_t len;       /* string length, or number of children */
  double num;       /* RD__JSON_NUM */
  int is_int;       /* number written as an integer that fits int64 */
  int64_t i;        /* its value when is_int */
  int b;            /* RD__JSON_BOOL */
  rd__json *child;  /* first child (array element or object member) */
  rd__json *next;   /* next sibling */
};

/* Parses len bytes at s.  On success *out owns the tree (release with
 * rd__json_free).  On failure returns RD_EINVAL/RD_ENOMEM and writes a message
 * to err (errlen bytes, may be 0). */
int rd__json_parse(const char *s, size_t len, rd__json **out, char *err, size_t errlen);
void rd__json_free(rd__json *j);
/* Member of an object by name, or NULL. */
const rd__json *rd__json_get(const rd__json *obj, const char *key);
/* Integer member of an object; returns 0 and sets *v, or RD_EINVAL. */
int rd__json_get_int(const rd__json *obj, const char *key, int64_t *v);

#endif
