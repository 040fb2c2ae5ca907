/* runtime/json.h - a strict JSON reader for request bodies the node
 * accepts (the jobs HTTP API, job_http.c).
 *
 * RFC 8259 values into a tree: objects, arrays, strings (escapes decoded
 * to UTF-8), numbers (as doubles), true, false, null.  Strict: no
 * comments, trailing commas, leading zeros, control bytes in strings,
 * lone surrogates, "\u0000" (strings go to argv and the environment),
 * nesting past RD_JSON_DEPTH, or anything after the value but white space.
 * The whole tree is one allocation, freed with free(). */
#ifndef RD_JSON_H
#define RD_JSON_H

#include <stddef.h>

#define RD_JSON_DEPTH 32

enum { RD_JSON_NULL, RD_JSON_FALSE, RD_JSON_TRUE, RD_JSON_NUMBER, RD_JSON_STRING, RD_JSON_ARRAY, RD_JSON_OBJECT };

typedef struct rd_json {
  int type;
  const char *key;          /* a member of an object: its name (NUL-terminated) */
  const char *str;          /* RD_JSON_STRING: the text, NUL-terminated (no NUL inside) */
  double num;               /* RD_JSON_NUMBER */
  struct rd_json *child;    /* an array's elements, an object's members, in order */
  struct rd_json *next;     /* the next element or member */
} rd_json;

/* Parses the len bytes at s: the root (free() it), or NULL with why (its
 * byte offset included) when malformed or out of memory. */
rd_json *rd_json_parse(const char *s, size_t len, char *why, size_t whylen);

/* The length of the valid UTF-8 sequence of two to four bytes at s (n
 * bytes there), or 0 when there is none (an ASCII byte, a stray or
 * missing continuation, an overlong form, a surrogate, past U+10FFFF). */
size_t rd_json_utf8_len(const unsigned char *s, size_t n);
/* How many bytes a UTF-8 sequence that lead byte c starts has (2 to 4), or
 * 0 when c starts none (ASCII, a continuation, C0, C1, F5-FF). */
size_t rd_json_utf8_need(unsigned char c);

/* A name given twice among an object's members (the first such), or NULL
 * (also when obj is no object).  rd_json_get finds the first of them:
 * readers that refuse ambiguous input ask this. */
const char *rd_json_dup_key(const rd_json *obj);

/* An object's member named key, or NULL (also when obj is no object). */
const rd_json *rd_json_get(const rd_json *obj, const char *key);

#endif
