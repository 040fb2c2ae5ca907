/* runtime/json.c - a strict JSON reader (see json.h).
 *
 * Two passes over the text: the first checks it and counts the nodes and
 * string bytes, so that the second fills one allocation sized exactly
 * (nodes first, then the decoded strings); no realloc, no partial tree to
 * free on an error. */
#include "json.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct jp {
  const char *s, *end, *p;
  int fill;                 /* second pass: write the nodes and strings */
  size_t nodes, bytes;      /* first pass: counted; second: used */
  rd_json *node;            /* second pass: the nodes */
  char *text;               /* second pass: the strings */
  const char *err;
} jp;

size_t rd_json_utf8_need(unsigned char c) {
  return c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
}

size_t rd_json_utf8_len(const unsigned char *s, size_t n) {
  unsigned char c = s[0];
  size_t k = rd_json_utf8_need(c);
  if (!k || k > n) return 0;
  for (size_t i = 1; i < k; i++)
    if ((s[i] & 0xc0) != 0x80) return 0;
  if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f) || (c == 0xf0 && s[1] < 0x90) ||
      (c == 0xf4 && s[1] > 0x8f))
    return 0;   /* overlong, a surrogate, past U+10FFFF */
  return k;
}

static void ws(jp *j) {
  while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

static int fail(jp *j, const char *what) {
  if (!j->err) j->err = what;
  return -1;
}

static int hex4(const char *p, unsigned *out) {
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p[i];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
    else return -1;
  }
  *out = v;
  return 0;
}

static void put(jp *j, char **w, char c) {
  if (j->fill) *(*w)++ = c;
  j->bytes += !j->fill;
}

/* A string at j->p (its '"'): decoded into the text area (second pass);
 * *out its start there. */
static int string(jp *j, const char **out) {
  char *w = j->fill ? j->text : NULL, *start = w;
  j->p++;
  for (;;) {
    if (j->p >= j->end) return fail(j, "a string without its closing quote");
    unsigned char c = (unsigned char)*j->p;
    if (c == '"') break;
    if (c < 0x20) return fail(j, "a control byte in a string (escape it)");
    if (c >= 0x80) {   /* JSON text is UTF-8 */
      size_t k = rd_json_utf8_len((const unsigned char *)j->p, (size_t)(j->end - j->p));
      if (!k) return fail(j, "a string that is not UTF-8");
      for (size_t i = 0; i < k; i++) put(j, &w, j->p[i]);
      j->p += k;
      continue;
    }
    if (c != '\\') {
      put(j, &w, (char)c);
      j->p++;
      continue;
    }
    if (j->end - j->p < 2) return fail(j, "a string without its closing quote");
    char e = j->p[1];
    j->p += 2;
    const char *simple = strchr("\"\\/bfnrt", e);
    if (e && simple) {
      static const char to[] = "\"\\/\b\f\n\r\t";
      put(j, &w, to[simple - "\"\\/bfnrt"]);
      continue;
    }
    if (e != 'u') return fail(j, "an unknown escape in a string");
    unsigned u;
    if (j->end - j->p < 4 || hex4(j->p, &u) != 0) return fail(j, "a \\u escape without four hex digits");
    j->p += 4;
    if (u >= 0xdc00 && u <= 0xdfff) return fail(j, "a lone low surrogate in a string");
    if (u >= 0xd800 && u <= 0xdbff) {   /* a pair: \ud83d\ude00 */
      unsigned lo;
      if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u' || hex4(j->p + 2, &lo) != 0 || lo < 0xdc00 ||
          lo > 0xdfff)
        return fail(j, "a lone high surrogate in a string");
      j->p += 6;
      u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
    }
    if (u == 0) return fail(j, "\\u0000 in a string");
    if (u < 0x80) {
      put(j, &w, (char)u);
    } else if (u < 0x800) {
      put(j, &w, (char)(0xc0 | (u >> 6)));
      put(j, &w, (char)(0x80 | (u & 0x3f)));
    } else if (u < 0x10000) {
      put(j, &w, (char)(0xe0 | (u >> 12)));
      put(j, &w, (char)(0x80 | ((u >> 6) & 0x3f)));
      put(j, &w, (char)(0x80 | (u & 0x3f)));
    } else {
      put(j, &w, (char)(0xf0 | (u >> 18)));
      put(j, &w, (char)(0x80 | ((u >> 12) & 0x3f)));
      put(j, &w, (char)(0x80 | ((u >> 6) & 0x3f)));
      put(j, &w, (char)(0x80 | (u & 0x3f)));
    }
  }
  j->p++;
  put(j, &w, '\0');
  if (j->fill) {
    *out = start;
    j->text = w;
  }
  return 0;
}

static int number(jp *j, double *out) {
  const char *p = j->p;
  if (p < j->end && *p == '-') p++;
  if (p >= j->end || *p < '0' || *p > '9') return fail(j, "an unexpected character");
  if (*p == '0' && p + 1 < j->end && p[1] >= '0' && p[1] <= '9') return fail(j, "a number with a leading zero");
  while (p < j->end && *p >= '0' && *p <= '9') p++;
  if (p < j->end && *p == '.') {
    p++;
    if (p >= j->end || *p < '0' || *p > '9') return fail(j, "a number without digits after its point");
    while (p < j->end && *p >= '0' && *p <= '9') p++;
  }
  if (p < j->end && (*p == 'e' || *p == 'E')) {
    p++;
    if (p < j->end && (*p == '+' || *p == '-')) p++;
    if (p >= j->end || *p < '0' || *p > '9') return fail(j, "a number without digits in its exponent");
    while (p < j->end && *p >= '0' && *p <= '9') p++;
  }
  if (j->fill) {
    char buf[64];
    size_t n = (size_t)(p - j->p);
    if (n >= sizeof(buf)) n = sizeof(buf) - 1;   /* digits past 63 change nothing a double holds */
    memcpy(buf, j->p, n);
    buf[n] = 0;
    *out = strtod(buf, NULL);
  }
  j->p = p;
  return 0;
}

static int value(jp *j, rd_json **out, int depth);

/* The elements of an array, or the members of an object ('[' or '{' at j->p). */
static int items(jp *j, rd_json *n, int object, int depth) {
  if (depth >= RD_JSON_DEPTH) return fail(j, "nested deeper than 32");
  char close = object ? '}' : ']';
  j->p++;
  ws(j);
  if (j->p < j->end && *j->p == close) {
    j->p++;
    return 0;
  }
  rd_json **tail = n ? &n->child : NULL;
  for (;;) {
    const char *key = NULL;
    if (object) {
      ws(j);
      if (j->p >= j->end || *j->p != '"') return fail(j, "an object member without a quoted name");
      if (string(j, &key) != 0) return -1;
      ws(j);
      if (j->p >= j->end || *j->p != ':') return fail(j, "a member name without ':'");
      j->p++;
    }
    rd_json *v = NULL;
    if (value(j, &v, depth + 1) != 0) return -1;
    if (v) {
      v->key = key;
      *tail = v;
      tail = &v->next;
    }
    ws(j);
    if (j->p < j->end && *j->p == ',') {
      j->p++;
      ws(j);
      if (j->p < j->end && *j->p == close) return fail(j, "a trailing comma");
      continue;
    }
    if (j->p < j->end && *j->p == close) {
      j->p++;
      return 0;
    }
    return fail(j, object ? "an object without ',' or '}'" : "an array without ',' or ']'");
  }
}

static int value(jp *j, rd_json **out, int depth) {
  ws(j);
  if (j->p >= j->end) return fail(j, "a value missing");
  rd_json *n = NULL;
  if (j->fill) {
    n = j->node++;
    memset(n, 0, sizeof(*n));
    *out = n;
  }
  j->nodes += !j->fill;
  char c = *j->p;
  static const struct { const char *word; int type; } words[] = {
      {"null", RD_JSON_NULL}, {"false", RD_JSON_FALSE}, {"true", RD_JSON_TRUE}};
  for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
    size_t k = strlen(words[i].word);
    if (c == words[i].word[0]) {
      if ((size_t)(j->end - j->p) < k || memcmp(j->p, words[i].word, k) != 0) return fail(j, "an unknown word");
      j->p += k;
      if (n) n->type = words[i].type;
      return 0;
    }
  }
  if (c == '"') {
    const char *str = NULL;
    if (string(j, &str) != 0) return -1;
    if (n) {
      n->type = RD_JSON_STRING;
      n->str = str;
    }
    return 0;
  }
  if (c == '[' || c == '{') {
    if (n) n->type = c == '{' ? RD_JSON_OBJECT : RD_JSON_ARRAY;
    return items(j, n, c == '{', depth);
  }
  double d = 0;
  if (number(j, &d) != 0) return -1;
  if (n) {
    n->type = RD_JSON_NUMBER;
    n->num = d;
  }
  return 0;
}

rd_json *rd_json_parse(const char *s, size_t len, char *why, size_t whylen) {
  jp j = {.s = s, .end = s + len, .p = s};
  rd_json *root = NULL;
  if (!s) j.err = "no text";
  if (!j.err && value(&j, &root, 0) == 0) {
    ws(&j);
    if (j.p != j.end) fail(&j, "something after the value");
  }
  if (j.err) {
    snprintf(why, whylen, "malformed JSON at byte %zu: %s", (size_t)(j.p - s), j.err);
    return NULL;
  }
  rd_json *mem = malloc(j.nodes * sizeof(rd_json) + j.bytes + 1);
  if (!mem) {
    snprintf(why, whylen, "out of memory");
    return NULL;
  }
  jp f = {.s = s, .end = s + len, .p = s, .fill = 1, .node = mem, .text = (char *)(mem + j.nodes)};
  (void)value(&f, &root, 0);   /* checked above: the same walk */
  return root;
}

const rd_json *rd_json_get(const rd_json *obj, const char *key) {
  if (!obj || obj->type != RD_JSON_OBJECT) return NULL;
  for (const rd_json *m = obj->child; m; m = m->next)
    if (!strcmp(m->key, key)) return m;
  return NULL;
}

const char *rd_json_dup_key(const rd_json *obj) {
  if (!obj || obj->type != RD_JSON_OBJECT) return NULL;
  for (const rd_json *m = obj->child; m; m = m->next)
    for (const rd_json *k = m->next; k; k = k->next)
      if (!strcmp(m->key, k->key)) return m->key;
  return NULL;
}
