/* json.c - strict recursive-descent JSON reader (see json.h).
 *
 * Accepts RFC 8259 JSON only, to a depth of 64; it must never read past the
 * buffer it is given nor recurse without bound. */
#include "json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "raydist/error.h"

#define RD__JSON_MAX_DEPTH 64

typedef struct {
  const char *s;
  size_t len, pos;
  char *err;
  size_t errlen;
} jp;

static int jfail(jp *p, const char *what) {
  if (p->errlen) snprintf(p->err, p->errlen, "JSON: %s at byte %zu", what, p->pos);
  return RD_EINVAL;
}

static void jws(jp *p) {
  while (p->pos < p->len) {
    char c = p->s[p->pos];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') p->pos++;
    else break;
  }
}

static int hex4(jp *p, unsigned *v) {
  if (p->len - p->pos < 4) return jfail(p, "truncated \\u escape");
  unsigned x = 0;
  for (int k = 0; k < 4; k++) {
    char c = p->s[p->pos++];
    x <<= 4;
    if (c >= '0' && c <= '9') x |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') x |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') x |= (unsigned)(c - 'A' + 10);
    else return jfail(p, "bad \\u escape");
  }
  *v = x;
  return 0;
}

static size_t put_utf8(char *o, unsigned cp) {
  if (cp < 0x80) { o[0] = (char)cp; return 1; }
  if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
  if (cp < 0x10000) {
    o[0] = (char)(0xE0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[2] = (char)(0x80 | (cp & 0x3F)); return 3;
  }
  o[0] = (char)(0xF0 | (cp >> 18)); o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* Parses a string at p->pos (which is at the opening quote). */
static int jstring(jp *p, char **out, size_t *outlen) {
  p->pos++; /* '"' */
  size_t start = p->pos, end = start;
  while (end < p->len && p->s[end] != '"') {
    if (p->s[end] == '\\') end++;
    end++;
  }
  if (end >= p->len) return jfail(p, "unterminated string");
  char *o = malloc(end - start + 1); /* escapes only shrink */
  if (!o) return RD_ENOMEM;
  size_t n = 0;
  while (p->pos < end) {
    unsigned char c = (unsigned char)p->s[p->pos];
    if (c < 0x20) { free(o); return jfail(p, "control character in string"); }
    if (c != '\\') { o[n++] = (char)c; p->pos++; continue; }
    p->pos++;
    char e = p->s[p->pos++];
    switch (e) {
      case '"': o[n++] = '"'; break;
      case '\\': o[n++] = '\\'; break;
      case '/': o[n++] = '/'; break;
      case 'b': o[n++] = '\b'; break;
      case 'f': o[n++] = '\f'; break;
      case 'n': o[n++] = '\n'; break;
      case 'r': o[n++] = '\r'; break;
      case 't': o[n++] = '\t'; break;
      case 'u': {
        unsigned cp, lo;
        if (hex4(p, &cp)) { free(o); return RD_EINVAL; }
        if (cp >= 0xD800 && cp < 0xDC00 && p->len - p->pos >= 6 && p->s[p->pos] == '\\' &&
            p->s[p->pos + 1] == 'u') {
          p->pos += 2;
          if (hex4(p, &lo)) { free(o); return RD_EINVAL; }
          if (lo < 0xDC00 || lo > 0xDFFF) { free(o); return jfail(p, "bad surrogate pair"); }
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xD800 && cp <= 0xDFFF) {
          cp = 0xFFFD;
        }
        n += put_utf8(o + n, cp);
        break;
      }
      default: free(o); return jfail(p, "bad escape");
    }
  }
  p->pos = end + 1;
  o[n] = 0;
  *out = o;
  *outlen = n;
  return 0;
}

static int jnumber(jp *p, rd__json *v) {
  size_t start = p->pos;
  int neg = 0, isint = 1, overflow = 0;
  uint64_t acc = 0;
  if (p->s[p->pos] == '-') { neg = 1; p->pos++; }
  if (p->pos >= p->len || p->s[p->pos] < '0' || p->s[p->pos] > '9') return jfail(p, "bad number");
  if (p->s[p->pos] == '0' && p->pos + 1 < p->len && p->s[p->pos + 1] >= '0' && p->s[p->pos + 1] <= '9')
    return jfail(p, "leading zero in number");
  while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
    unsigned d = (unsigned)(p->s[p->pos] - '0');
    if (acc > (UINT64_MAX - d) / 10) overflow = 1;
    else acc = acc * 10 + d;
    p->pos++;
  }
  if (p->pos < p->len && p->s[p->pos] == '.') {
    isint = 0; p->pos++;
    if (p->pos >= p->len || p->s[p->pos] < '0' || p->s[p->pos] > '9') return jfail(p, "bad number");
    while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') p->pos++;
  }
  if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
    isint = 0; p->pos++;
    if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-')) p->pos++;
    if (p->pos >= p->len || p->s[p->pos] < '0' || p->s[p->pos] > '9') return jfail(p, "bad number");
    while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') p->pos++;
  }
  char buf[64];
  size_t n = p->pos - start;
  if (n >= sizeof buf) n = sizeof buf - 1;
  memcpy(buf, p->s + start, n);
  buf[n] = 0;
  v->type = RD__JSON_NUM;
  v->num = strtod(buf, NULL);
  if (isint && !overflow && acc <= (uint64_t)INT64_MAX) {
    v->is_int = 1;
    v->i = neg ? -(int64_t)acc : (int64_t)acc;
  }
  return 0;
}

static int jvalue(jp *p, rd__json *v, int depth);

static int jcontainer(jp *p, rd__json *v, int depth, int is_obj) {
  char close = is_obj ? '}' : ']';
  v->type = is_obj ? RD__JSON_OBJ : RD__JSON_ARR;
  p->pos++;
  jws(p);
  if (p->pos < p->len && p->s[p->pos] == close) { p->pos++; return 0; }
  rd__json **tail = &v->child;
  for (;;) {
    rd__json *c = calloc(1, sizeof *c);
    if (!c) return RD_ENOMEM;
    *tail = c;
    tail = &c->next;
    v->len++;
    jws(p);
    if (is_obj) {
      size_t kl;
      if (p->pos >= p->len || p->s[p->pos] != '"') return jfail(p, "expected member name");
      int rc = jstring(p, &c->key, &kl);
      if (rc) return rc;
      jws(p);
      if (p->pos >= p->len || p->s[p->pos] != ':') return jfail(p, "expected ':'");
      p->pos++;
    }
    int rc = jvalue(p, c, depth + 1);
    if (rc) return rc;
    jws(p);
    if (p->pos >= p->len) return jfail(p, "unterminated container");
    if (p->s[p->pos] == ',') { p->pos++; continue; }
    if (p->s[p->pos] == close) { p->pos++; return 0; }
    return jfail(p, is_obj ? "expected ',' or '}'" : "expected ',' or ']'");
  }
}

static int jlit(jp *p, const char *lit) {
  size_t n = strlen(lit);
  if (p->len - p->pos < n || memcmp(p->s + p->pos, lit, n) != 0) return jfail(p, "bad literal");
  p->pos += n;
  return 0;
}

static int jvalue(jp *p, rd__json *v, int depth) {
  if (depth > RD__JSON_MAX_DEPTH) return jfail(p, "nested too deeply");
  jws(p);
  if (p->pos >= p->len) return jfail(p, "unexpected end");
  char c = p->s[p->pos];
  switch (c) {
    case '{': return jcontainer(p, v, depth, 1);
    case '[': return jcontainer(p, v, depth, 0);
    case '"': v->type = RD__JSON_STR; return jstring(p, &v->str, &v->len);
    case 't': v->type = RD__JSON_BOOL; v->b = 1; return jlit(p, "true");
    case 'f': v->type = RD__JSON_BOOL; v->b = 0; return jlit(p, "false");
    case 'n': v->type = RD__JSON_NULL; return jlit(p, "null");
    default: return jnumber(p, v);
  }
}

void rd__json_free(rd__json *j) {
  while (j) {
    rd__json *next = j->next;
    rd__json_free(j->child);
    free(j->key);
    free(j->str);
    free(j);
    j = next;
  }
}

int rd__json_parse(const char *s, size_t len, rd__json **out, char *err, size_t errlen) {
  jp p = {s, len, 0, err, errlen};
  *out = NULL;
  rd__json *v = calloc(1, sizeof *v);
  if (!v) return RD_ENOMEM;
  int rc = jvalue(&p, v, 0);
  if (!rc) {
    jws(&p);
    /* safetensors pads its header with spaces; anything else is garbage */
    if (p.pos != p.len) rc = jfail(&p, "trailing characters after the value");
  }
  if (rc) {
    if (rc == RD_ENOMEM && errlen) snprintf(err, errlen, "JSON: out of memory");
    rd__json_free(v);
    return rc;
  }
  *out = v;
  return 0;
}

const rd__json *rd__json_get(const rd__json *obj, const char *key) {
  if (!obj || obj->type != RD__JSON_OBJ) return NULL;
  for (const rd__json *c = obj->child; c; c = c->next)
    if (strcmp(c->key, key) == 0) return c;
  return NULL;
}

int rd__json_get_int(const rd__json *obj, const char *key, int64_t *v) {
  const rd__json *m = rd__json_get(obj, key);
  if (!m || m->type != RD__JSON_NUM || !m->is_int) return RD_EINVAL;
  *v = m->i;
  return 0;
}
