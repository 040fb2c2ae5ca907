/* scheduler/labels.c - node labels and label selectors (see labels.h). */
#include "labels.h"

#include <stdio.h>
#include <string.h>

#include "raydist/error.h"

#define KEY_MAX 127
#define VALUE_MAX 63
#define RESERVED "raydist.io/"

static int is_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }
static int key_char(char c) { return is_alnum(c) || c == '.' || c == '_' || c == '-' || c == '/'; }
static int value_char(char c) { return is_alnum(c) || c == '.' || c == '_' || c == '-'; }
static const char *skip_sp(const char *p) {
  while (*p == ' ' || *p == '\t') p++;
  return p;
}

/* Checks a key or value of n bytes at s: 0, or RD_EINVAL with why. */
static int check_word(const char *s, size_t n, int key, char *why, size_t whylen) {
  const char *what = key ? "key" : "value";
  size_t max = key ? KEY_MAX : VALUE_MAX;
  if (n == 0) {
    snprintf(why, whylen, "an empty label %s", what);
    return RD_EINVAL;
  }
  if (n > max) {
    snprintf(why, whylen, "label %s '%.*s...' is longer than %zu bytes", what, 20, s, max);
    return RD_EINVAL;
  }
  for (size_t i = 0; i < n; i++)
    if (!(key ? key_char(s[i]) : value_char(s[i]))) {
      snprintf(why, whylen, "label %s '%.*s' has a character other than %s", what, (int)n, s,
               key ? "letters, digits, '.', '_', '-' and '/'" : "letters, digits, '.', '_' and '-'");
      return RD_EINVAL;
    }
  if (!is_alnum(s[0]) || !is_alnum(s[n - 1])) {
    snprintf(why, whylen, "label %s '%.*s' must begin and end with a letter or digit", what, (int)n, s);
    return RD_EINVAL;
  }
  return 0;
}

/* ------------------------------------------------------------- labels */

typedef struct {
  const char *k, *v;
  size_t kn, vn;
} kv;

static int canon(const char *spec, char *out, size_t cap, char *why, size_t whylen, int sys) {
  kv l[RD_LABELS_MAX];
  size_t n = 0;
  if (cap) out[0] = '\0';
  for (const char *p = spec; p && *(p = skip_sp(p));) {
    const char *ks = p;
    while (*p && *p != '=' && *p != ',' && *p != ' ' && *p != '\t') p++;
    size_t kn = (size_t)(p - ks);
    p = skip_sp(p);
    if (*p != '=') {
      snprintf(why, whylen, "label '%.*s' is not key=value", (int)kn, ks);
      return RD_EINVAL;
    }
    p = skip_sp(p + 1);
    const char *vs = p;
    while (*p && *p != ',' && *p != ' ' && *p != '\t') p++;
    size_t vn = (size_t)(p - vs);
    p = skip_sp(p);
    if (*p && *p != ',') {
      snprintf(why, whylen, "label '%.*s': unexpected '%c' after its value", (int)kn, ks, *p);
      return RD_EINVAL;
    }
    if (*p == ',') p++;
    int e = check_word(ks, kn, 1, why, whylen);
    if (!e) e = check_word(vs, vn, 0, why, whylen);
    if (e) return e;
    if (!sys && kn >= sizeof(RESERVED) - 1 && !memcmp(ks, RESERVED, sizeof(RESERVED) - 1)) {
      snprintf(why, whylen, "label key '%.*s': keys beginning '" RESERVED "' are reserved", (int)kn, ks);
      return RD_EINVAL;
    }
    if (n == RD_LABELS_MAX) {
      snprintf(why, whylen, "more than %d labels", RD_LABELS_MAX);
      return RD_EINVAL;
    }
    /* insert in key order */
    size_t i = n++;
    for (; i > 0; i--) {
      size_t m = l[i - 1].kn < kn ? l[i - 1].kn : kn;
      int c = memcmp(l[i - 1].k, ks, m);
      if (c == 0 && l[i - 1].kn == kn) {
        snprintf(why, whylen, "label key '%.*s' given twice", (int)kn, ks);
        return RD_EINVAL;
      }
      if (c < 0 || (c == 0 && l[i - 1].kn < kn)) break;
      l[i] = l[i - 1];
    }
    l[i] = (kv){ks, vs, kn, vn};
  }
  size_t len = 0;
  for (size_t i = 0; i < n; i++) {
    size_t need = (i ? 1 : 0) + l[i].kn + 1 + l[i].vn;
    if (len + need + 1 > cap) {
      snprintf(why, whylen, "labels longer than %zu bytes", cap ? cap - 1 : 0);
      if (cap) out[0] = '\0';
      return RD_EINVAL;
    }
    len += (size_t)snprintf(out + len, cap - len, "%s%.*s=%.*s", i ? "," : "", (int)l[i].kn, l[i].k, (int)l[i].vn,
                            l[i].v);
  }
  return 0;
}

int rd_labels_canon(const char *spec, char *out, size_t cap, char *why, size_t whylen) {
  return canon(spec, out, cap, why, whylen, 0);
}

int rd_labels_canon_sys(const char *spec, char *out, size_t cap, char *why, size_t whylen) {
  return canon(spec, out, cap, why, whylen, 1);
}

int rd_accel_type(const char *name, char *out, size_t cap) {
  static const char *const vendor[] = {"NVIDIA", "Tesla", "GeForce", "Quadro"};
  char tok[2][64];
  int nt = 0;
  if (cap) out[0] = '\0';
  for (const char *p = name; p && *p && nt < 2;) {
    while (*p == ' ') p++;
    size_t n = strcspn(p, " ");
    if (!n) break;
    int skip = 0;
    for (size_t i = 0; i < sizeof(vendor) / sizeof(*vendor); i++)
      skip |= strlen(vendor[i]) == n && !memcmp(p, vendor[i], n);
    if (!skip) {
      /* the model ends where its variant begins ("-SXM4-80GB") */
      size_t m = 0;
      while (m < n && m < sizeof(tok[0]) - 1 && is_alnum(p[m])) m++;
      if (m == 0) break;
      memcpy(tok[nt], p, m);
      tok[nt][m] = '\0';
      nt++;
      /* a model word followed by a number ("RTX 4090") takes it along; one
       * with digits of its own ("H100 80GB") is whole */
      int digits = 0;
      for (size_t i = 0; i < m; i++) digits |= tok[0][i] >= '0' && tok[0][i] <= '9';
      if (nt == 1 && (digits || m < n)) break;
      if (nt == 2) {   /* a number, or a model with digits ("RTX A6000") */
        int d1 = 0;
        for (size_t i = 0; tok[1][i]; i++) d1 |= tok[1][i] >= '0' && tok[1][i] <= '9';
        if (!d1) nt = 1;
      }
    }
    p += n;
  }
  if (nt == 0 || cap == 0) return -1;
  if (nt == 1) snprintf(out, cap, "%.63s", tok[0]);
  else snprintf(out, cap, "%.31s-%.31s", tok[0], tok[1]);
  return 0;
}

/* The value of key (kn bytes) in canonical labels: 1 with *v, *vn set. */
static int label_get(const char *labels, const char *key, size_t kn, const char **v, size_t *vn) {
  for (const char *p = labels; p && *p;) {
    const char *eq = strchr(p, '=');
    if (!eq) return 0;
    const char *end = strchr(eq, ',');
    if (!end) end = eq + strlen(eq);
    if ((size_t)(eq - p) == kn && !memcmp(p, key, kn)) {
      *v = eq + 1;
      *vn = (size_t)(end - eq - 1);
      return 1;
    }
    p = *end ? end + 1 : end;
  }
  return 0;
}

int rd_labels_value(const char *labels, const char *key, char *out, size_t len) {
  const char *v;
  size_t vn;
  int has = label_get(labels, key, strlen(key), &v, &vn);
  if (len) snprintf(out, len, "%.*s", has ? (int)vn : 0, has ? v : "");
  return has;
}

/* ---------------------------------------------------------- selectors */

typedef struct {
  const char *key;
  size_t kn;
  int neg, in;
  const char *vals;   /* the value, or the list inside in(...) */
  size_t vn;
} sel_term;

/* The next term at *pp: 1 (t filled, *pp past it), 0 at the end, or
 * RD_EINVAL with why. */
static int sel_next(const char **pp, sel_term *t, char *why, size_t whylen) {
  const char *p = skip_sp(*pp);
  if (!*p) return 0;
  memset(t, 0, sizeof(*t));
  t->key = p;
  while (*p && *p != '=' && *p != ',' && *p != ' ' && *p != '\t' && *p != '!') p++;
  t->kn = (size_t)(p - t->key);
  p = skip_sp(p);
  if (*p != '=') {
    snprintf(why, whylen, "selector term '%.*s' is not key=value, key=!value, key=in(...) or key=!in(...)",
             (int)(strcspn(t->key, ",") > 60 ? 60 : strcspn(t->key, ",")), t->key);
    return RD_EINVAL;
  }
  int e = check_word(t->key, t->kn, 1, why, whylen);
  if (e) return e;
  p = skip_sp(p + 1);
  if (*p == '!') {
    t->neg = 1;
    p = skip_sp(p + 1);
  }
  const char *q = p[0] == 'i' && p[1] == 'n' ? skip_sp(p + 2) : NULL;
  if (q && *q == '(') {
    t->in = 1;
    t->vals = q + 1;
    const char *close = strchr(t->vals, ')');
    if (!close) {
      snprintf(why, whylen, "selector term for '%.*s': in( without its )", (int)t->kn, t->key);
      return RD_EINVAL;
    }
    t->vn = (size_t)(close - t->vals);
    /* each listed value */
    int nv = 0;
    for (const char *v = t->vals; v <= close;) {
      const char *vs = skip_sp(v), *ve = vs;
      while (ve < close && *ve != ',' && *ve != ' ' && *ve != '\t') ve++;
      e = check_word(vs, (size_t)(ve - vs), 0, why, whylen);
      if (e) return e;
      ve = skip_sp(ve);
      if (ve < close && *ve != ',') {
        snprintf(why, whylen, "selector term for '%.*s': unexpected '%c' in its in(...)", (int)t->kn, t->key, *ve);
        return RD_EINVAL;
      }
      if (++nv > RD_LABEL_SEL_MAX_VALUES) {
        snprintf(why, whylen, "selector term for '%.*s' lists more than %d values", (int)t->kn, t->key,
                 RD_LABEL_SEL_MAX_VALUES);
        return RD_EINVAL;
      }
      v = ve + 1;
    }
    p = close + 1;
  } else {
    t->vals = p;
    while (*p && *p != ',' && *p != ' ' && *p != '\t') p++;
    t->vn = (size_t)(p - t->vals);
    e = check_word(t->vals, t->vn, 0, why, whylen);
    if (e) return e;
  }
  p = skip_sp(p);
  if (*p && *p != ',') {
    snprintf(why, whylen, "selector term for '%.*s': unexpected '%c' after its value", (int)t->kn, t->key, *p);
    return RD_EINVAL;
  }
  if (*p == ',') {
    p++;
    if (!*skip_sp(p)) {
      snprintf(why, whylen, "selector ends with ','");
      return RD_EINVAL;
    }
  }
  *pp = p;
  return 1;
}

int rd_label_sel_check(const char *sel, char *why, size_t whylen) {
  if (!sel) return 0;
  if (strlen(sel) >= RD_LABEL_SEL_LEN) {
    snprintf(why, whylen, "label selector longer than %d bytes", RD_LABEL_SEL_LEN - 1);
    return RD_EINVAL;
  }
  sel_term t;
  int n = 0, r;
  const char *p = sel;
  while ((r = sel_next(&p, &t, why, whylen)) == 1)
    if (++n > RD_LABEL_SEL_MAX_TERMS) {
      snprintf(why, whylen, "label selector has more than %d terms", RD_LABEL_SEL_MAX_TERMS);
      return RD_EINVAL;
    }
  return r;
}

/* Is value v (vn bytes) among the in(...) list of t? */
static int listed(const sel_term *t, const char *v, size_t vn) {
  const char *end = t->vals + t->vn;
  for (const char *p = t->vals; p < end;) {
    const char *s = skip_sp(p), *e = s;
    while (e < end && *e != ',' && *e != ' ' && *e != '\t') e++;
    if ((size_t)(e - s) == vn && !memcmp(s, v, vn)) return 1;
    while (e < end && *e != ',') e++;
    p = e + 1;
  }
  return 0;
}

/* One selector (no ';'): every term holds on labels. */
static int match_one(const char *labels, const char *sel) {
  char why[8];
  sel_term t;
  const char *p = sel;
  int r;
  while ((r = sel_next(&p, &t, why, sizeof(why))) == 1) {
    const char *v;
    size_t vn;
    int has = label_get(labels, t.key, t.kn, &v, &vn);
    int hit = has && (t.in ? listed(&t, v, vn) : (vn == t.vn && !memcmp(v, t.vals, vn)));
    if (hit == t.neg) return 0;
  }
  return r == 0;   /* a malformed selector (never checked) matches nothing */
}

/* The next alternative at *pp, copied to buf (RD_LABEL_SEL_LEN bytes; one
 * longer is cut) and *pp moved past its ';' (NULL after the last): its
 * length as given, or -1 at the end. */
static long alt_next(const char **pp, char *buf) {
  const char *p = *pp;
  if (!p) return -1;
  size_t n = strcspn(p, ";");
  size_t k = n < RD_LABEL_SEL_LEN - 1 ? n : RD_LABEL_SEL_LEN - 1;
  memcpy(buf, p, k);
  buf[k] = '\0';
  *pp = p[n] ? p + n + 1 : NULL;
  return (long)n;
}

int rd_label_alts_check(const char *alts, char *why, size_t whylen) {
  if (!alts || !*alts) return 0;
  if (strlen(alts) >= RD_LABEL_ALTS_LEN) {
    snprintf(why, whylen, "label selector and fallbacks longer than %d bytes", RD_LABEL_ALTS_LEN - 1);
    return RD_EINVAL;
  }
  char one[RD_LABEL_SEL_LEN];
  int n = 0, single = !strchr(alts, ';');
  long len;
  for (const char *p = alts; (len = alt_next(&p, one)) >= 0;) {
    if (++n > RD_LABEL_SEL_MAX_ALTS) {
      snprintf(why, whylen, "more than %d label selectors (a selector and %d fallbacks)", RD_LABEL_SEL_MAX_ALTS,
               RD_LABEL_SEL_MAX_ALTS - 1);
      return RD_EINVAL;
    }
    if (!*skip_sp(one)) {
      snprintf(why, whylen, "label selector %d of '%.60s' is empty", n, alts);
      return RD_EINVAL;
    }
    if (len >= RD_LABEL_SEL_LEN) {
      snprintf(why, whylen, "label selector %d is longer than %d bytes", n, RD_LABEL_SEL_LEN - 1);
      return RD_EINVAL;
    }
    char w[200];
    if (rd_label_sel_check(one, w, sizeof(w)) != 0) {
      if (single) snprintf(why, whylen, "%s", w);
      else snprintf(why, whylen, "label selector %d ('%.60s'): %s", n, one, w);
      return RD_EINVAL;
    }
  }
  return 0;
}

/* Appends s (n bytes, spaces around it dropped) to out at *len, after a
 * ';' unless first: 0, 1 when nothing is left of it, -1 when out is full. */
static int alts_put(char *out, size_t cap, size_t *len, const char *s, size_t n) {
  while (n && (*s == ' ' || *s == '\t')) s++, n--;
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
  if (n == 0) return 1;
  if (*len + n + 2 > cap) return -1;
  if (*len) out[(*len)++] = ';';
  memcpy(out + *len, s, n);
  *len += n;
  out[*len] = '\0';
  return 0;
}

int rd_label_alts_join(const char *sel, const char *fallbacks, char *out, size_t cap, char *why, size_t whylen) {
  if (cap) out[0] = '\0';
  int has_sel = sel && *skip_sp(sel), has_fb = fallbacks && *skip_sp(fallbacks);
  if (has_sel && strchr(sel, ';')) {
    snprintf(why, whylen, "label_selector '%.60s' has a ';': give the fallbacks in fallback_label_selectors", sel);
    return RD_EINVAL;
  }
  if (has_fb && !has_sel) {
    snprintf(why, whylen, "fallback_label_selectors without a label_selector (every node would match it, so no "
             "fallback could ever be used)");
    return RD_EINVAL;
  }
  if (!has_sel) return 0;
  size_t len = 0;
  int r = alts_put(out, cap, &len, sel, strlen(sel));
  for (const char *p = has_fb ? fallbacks : NULL; p && r == 0;) {
    size_t n = strcspn(p, ";");
    if ((r = alts_put(out, cap, &len, p, n)) == 1)
      snprintf(why, whylen, "fallback_label_selectors '%.60s' has an empty selector", fallbacks);
    p = p[n] ? p + n + 1 : NULL;
  }
  if (r < 0) snprintf(why, whylen, "label selector and fallbacks longer than %zu bytes", cap ? cap - 1 : 0);
  if (r == 0) r = rd_label_alts_check(out, why, whylen);
  if (r != 0) {
    if (cap) out[0] = '\0';
    return RD_EINVAL;
  }
  return 0;
}

int rd_labels_match_alt(const char *labels, const char *alts) {
  if (!alts || !*alts) return 0;
  if (!strchr(alts, ';')) return match_one(labels, alts) ? 0 : -1;
  char one[RD_LABEL_SEL_LEN];
  int i = 0;
  for (const char *p = alts; alt_next(&p, one) >= 0; i++)
    if (match_one(labels, one)) return i;
  return -1;
}

int rd_labels_match(const char *labels, const char *sel) { return rd_labels_match_alt(labels, sel) >= 0; }

int rd_label_alts_count(const char *alts) {
  int n = 1;
  for (const char *p = alts; p && (p = strchr(p, ';')); p++) n++;
  return n;
}

int rd_labels_match_nth(const char *labels, const char *alts, int k) {
  if (!alts || !*alts) return 1;
  if (!strchr(alts, ';')) return match_one(labels, alts);
  char one[RD_LABEL_SEL_LEN];
  const char *p = alts;
  for (int i = 0; alt_next(&p, one) >= 0; i++)
    if (i == k || !p) return match_one(labels, one);   /* the k-th, or the last when there are fewer */
  return 0;
}
