/* wordpiece.c - BERT WordPiece tokenizer (see wordpiece.h).
 *
 * One pass over the input bytes: decode UTF-8, normalize each code point with
 * the generated tables in unicode_tables.h, cut words at whitespace and
 * punctuation, and run greedy longest-match WordPiece on each word as soon as it
 * ends.  It must never allocate while encoding nor read past len bytes. */
#include "wordpiece.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "raydist/error.h"
#include "unicode_tables.h"

#define RD__WP_MAX_WORD_CHARS 100 /* longer words become [UNK], as upstream */
#define RD__WP_WORD_CAP 128       /* code points buffered per word */

typedef struct {
  uint32_t off;  /* into arena */
  uint32_t len;
  int32_t id;    /* -1 = empty slot */
} wp_slot;

struct rd_wordpiece {
  char *arena;          /* all tokens, NUL-separated */
  size_t arena_len;
  uint32_t *tok_off;    /* id -> offset into arena */
  size_t n;             /* vocabulary size */
  wp_slot *slots;
  size_t mask;
  int32_t cls, sep, unk;
  uint8_t ascii_flags[128];
};

static uint64_t fnv1a(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  return h;
}

int32_t rd_wordpiece_token_id(const rd_wordpiece *wp, const char *tok, size_t len) {
  size_t i = (size_t)fnv1a(tok, len) & wp->mask;
  for (;;) {
    const wp_slot *s = &wp->slots[i];
    if (s->id < 0) return -1;
    if (s->len == len && memcmp(wp->arena + s->off, tok, len) == 0) return s->id;
    i = (i + 1) & wp->mask;
  }
}

const char *rd_wordpiece_token(const rd_wordpiece *wp, int32_t id) {
  if (id < 0 || (size_t)id >= wp->n) return NULL;
  return wp->arena + wp->tok_off[id];
}

size_t rd_wordpiece_vocab_size(const rd_wordpiece *wp) { return wp->n; }

void rd_wordpiece_free(rd_wordpiece *wp) {
  if (!wp) return;
  free(wp->arena);
  free(wp->tok_off);
  free(wp->slots);
  free(wp);
}

static uint8_t uc_flags(uint32_t cp) {
  size_t lo = 0, hi = sizeof rd__uc_range_start / sizeof rd__uc_range_start[0];
  while (hi - lo > 1) {
    size_t mid = (lo + hi) / 2;
    if (rd__uc_range_start[mid] <= cp) lo = mid;
    else hi = mid;
  }
  return rd__uc_range_flags[lo];
}

int rd_wordpiece_load(const char *vocab_path, rd_wordpiece **out, char *err, size_t errlen) {
  *out = NULL;
  FILE *f = fopen(vocab_path, "rb");
  if (!f) {
    int e = errno;
    if (errlen) snprintf(err, errlen, "%s: cannot open: %s", vocab_path, strerror(e));
    return e == ENOENT ? RD_ENOENT : RD_EIO;
  }
  rd_wordpiece *wp = calloc(1, sizeof *wp);
  if (!wp) { fclose(f); return RD_ENOMEM; }
  fseek(f, 0, SEEK_END);
  long sz = ftell(f);
  fseek(f, 0, SEEK_SET);
  if (sz <= 0 || sz > (256l << 20)) {
    fclose(f);
    rd_wordpiece_free(wp);
    if (errlen) snprintf(err, errlen, "%s: empty or oversized vocabulary", vocab_path);
    return RD_EINVAL;
  }
  wp->arena = malloc((size_t)sz + 1);
  if (!wp->arena) { fclose(f); rd_wordpiece_free(wp); return RD_ENOMEM; }
  size_t got = fread(wp->arena, 1, (size_t)sz, f);
  fclose(f);
  if (got != (size_t)sz) {
    rd_wordpiece_free(wp);
    if (errlen) snprintf(err, errlen, "%s: short read", vocab_path);
    return RD_EIO;
  }
  wp->arena[sz] = '\n';
  wp->arena_len = (size_t)sz;
  size_t lines = 0;
  for (size_t i = 0; i < (size_t)sz; i++) lines += wp->arena[i] == '\n';
  if (wp->arena[sz - 1] != '\n') lines++;
  wp->tok_off = malloc(lines * sizeof *wp->tok_off);
  size_t cap = 1;
  while (cap < lines * 2) cap <<= 1;
  wp->slots = malloc(cap * sizeof *wp->slots);
  if (!wp->tok_off || !wp->slots) { rd_wordpiece_free(wp); return RD_ENOMEM; }
  for (size_t i = 0; i < cap; i++) wp->slots[i].id = -1;
  wp->mask = cap - 1;
  size_t start = 0;
  for (size_t i = 0; i <= (size_t)sz && wp->n < lines; i++) {
    if (wp->arena[i] != '\n') continue;
    size_t end = i;
    if (end > start && wp->arena[end - 1] == '\r') end--;
    wp->arena[end] = 0;
    wp->arena[i] = 0;
    int32_t id = (int32_t)wp->n++;
    wp->tok_off[id] = (uint32_t)start;
    size_t len = end - start, h = (size_t)fnv1a(wp->arena + start, len) & wp->mask;
    for (;;) {
      wp_slot *s = &wp->slots[h];
      if (s->id < 0) { s->off = (uint32_t)start; s->len = (uint32_t)len; s->id = id; break; }
      if (s->len == len && memcmp(wp->arena + s->off, wp->arena + start, len) == 0) {
        s->id = id; /* a later duplicate wins, as in the reference loader */
        break;
      }
      h = (h + 1) & wp->mask;
    }
    start = i + 1;
  }
  wp->cls = rd_wordpiece_token_id(wp, "[CLS]", 5);
  wp->sep = rd_wordpiece_token_id(wp, "[SEP]", 5);
  wp->unk = rd_wordpiece_token_id(wp, "[UNK]", 5);
  if (wp->cls < 0 || wp->sep < 0 || wp->unk < 0) {
    rd_wordpiece_free(wp);
    if (errlen) snprintf(err, errlen, "%s: vocabulary lacks [CLS], [SEP] or [UNK]", vocab_path);
    return RD_EINVAL;
  }
  for (uint32_t c = 0; c < 128; c++) wp->ascii_flags[c] = uc_flags(c);
  *out = wp;
  return 0;
}

/* Decodes one code point at s[*i] (i < n) the way CPython's strict UTF-8
 * decoder does; an ill-formed sequence yields U+FFFD and consumes only its
 * maximal valid prefix (at least one byte). */
static uint32_t utf8_next(const unsigned char *s, size_t n, size_t *i) {
  unsigned c = s[*i];
  if (c < 0x80) { (*i)++; return c; }
  int need;
  uint32_t cp;
  unsigned lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) { need = 1; cp = c & 0x1F; }
  else if (c >= 0xE0 && c <= 0xEF) {
    need = 2; cp = c & 0x0F;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F; /* no surrogates */
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 3; cp = c & 0x07;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else { (*i)++; return 0xFFFD; }
  size_t j = *i + 1;
  for (int k = 0; k < need; k++, j++) {
    if (j >= n) { *i = j; return 0xFFFD; }
    unsigned b = s[j];
    if (b < lo || b > hi) { *i = j; return 0xFFFD; }
    lo = 0x80; hi = 0xBF;
    cp = (cp << 6) | (b & 0x3F);
  }
  *i = j;
  return cp;
}

static size_t utf8_put(char *o, uint32_t cp) {
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

static int is_cjk(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

/* NFD, drop Mn, lower-case: writes up to 18 code points to o, returns count. */
static size_t fold(uint32_t cp, uint32_t *o) {
  if (cp < 0x80) {
    o[0] = (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
    return 1;
  }
  if (cp >= 0xAC00 && cp <= 0xD7A3) { /* Hangul syllable: algorithmic NFD */
    uint32_t s = cp - 0xAC00, t = s % 28;
    o[0] = 0x1100 + s / 588;
    o[1] = 0x1161 + (s % 588) / 28;
    if (!t) return 2;
    o[2] = 0x11A7 + t;
    return 3;
  }
  size_t lo = 0, hi = sizeof rd__uc_map_cp / sizeof rd__uc_map_cp[0];
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (rd__uc_map_cp[mid] < cp) lo = mid + 1;
    else hi = mid;
  }
  if (lo < sizeof rd__uc_map_cp / sizeof rd__uc_map_cp[0] && rd__uc_map_cp[lo] == cp) {
    size_t n = rd__uc_map_len[lo];
    for (size_t k = 0; k < n; k++) o[k] = rd__uc_pool[rd__uc_map_off[lo] + k];
    return n;
  }
  o[0] = cp;
  return 1;
}

typedef struct {
  const rd_wordpiece *wp;
  int32_t *ids;
  size_t n, limit; /* limit = max_tokens - 1 (room for [SEP]) */
  int full;
  uint32_t word[RD__WP_WORD_CAP];
  size_t wlen;     /* chars seen in the current word (may exceed the buffer) */
} enc;

static void emit(enc *e, int32_t id) {
  if (e->n < e->limit) e->ids[e->n++] = id;
  if (e->n >= e->limit) e->full = 1;
}

static void end_word(enc *e) {
  size_t n = e->wlen;
  e->wlen = 0;
  if (!n || e->full) return;
  if (n > RD__WP_MAX_WORD_CHARS) { emit(e, e->wp->unk); return; }
  char bytes[RD__WP_MAX_WORD_CHARS * 4], key[2 + RD__WP_MAX_WORD_CHARS * 4];
  uint16_t off[RD__WP_MAX_WORD_CHARS + 1];
  size_t bl = 0;
  for (size_t i = 0; i < n; i++) {
    off[i] = (uint16_t)bl;
    bl += utf8_put(bytes + bl, e->word[i]);
  }
  off[n] = (uint16_t)bl;
  key[0] = key[1] = '#';
  int32_t pieces[RD__WP_MAX_WORD_CHARS];
  size_t np = 0, start = 0;
  while (start < n) {
    int32_t cur = -1;
    size_t end = n;
    for (; end > start; end--) {
      size_t kl = off[end] - off[start];
      if (start == 0) {
        cur = rd_wordpiece_token_id(e->wp, bytes, kl);
      } else {
        memcpy(key + 2, bytes + off[start], kl);
        cur = rd_wordpiece_token_id(e->wp, key, kl + 2);
      }
      if (cur >= 0) break;
    }
    if (cur < 0) { emit(e, e->wp->unk); return; }
    pieces[np++] = cur;
    start = end;
  }
  for (size_t i = 0; i < np; i++) emit(e, pieces[i]);
}

static void push_char(enc *e, uint32_t cp) {
  if (e->wlen < RD__WP_WORD_CAP) e->word[e->wlen] = cp;
  if (e->wlen <= RD__WP_MAX_WORD_CHARS) e->wlen++;
  else e->wlen = RD__WP_MAX_WORD_CHARS + 1; /* already [UNK]; stop counting */
}

static uint8_t flags_of(const rd_wordpiece *wp, uint32_t cp) {
  return cp < 128 ? wp->ascii_flags[cp] : uc_flags(cp);
}

int rd_wordpiece_encode(const rd_wordpiece *wp, const char *text, size_t len, size_t max_tokens,
                        int32_t *ids, size_t *n_out) {
  if (!wp || !ids || !n_out || max_tokens < 2 || (!text && len)) return RD_EINVAL;
  enc e = {.wp = wp, .ids = ids, .limit = max_tokens - 1};
  ids[e.n++] = wp->cls;
  if (e.n >= e.limit) e.full = 1;
  const unsigned char *s = (const unsigned char *)text;
  size_t i = 0;
  uint32_t folded[24];
  while (i < len && !e.full) {
    uint32_t cp = utf8_next(s, len, &i);
    uint8_t f = flags_of(wp, cp);
    if (f & RD__UC_CTRL) continue; /* clean_text drops it without a split */
    if (f & RD__UC_WS) { end_word(&e); continue; }
    int cjk = is_cjk(cp);
    if (cjk) end_word(&e);
    size_t nf = fold(cp, folded);
    for (size_t k = 0; k < nf; k++) {
      uint32_t d = folded[k];
      uint8_t fd = flags_of(wp, d);
      if (fd & RD__UC_WS) {
        end_word(&e);
      } else if (fd & RD__UC_PUNCT) {
        end_word(&e);
        push_char(&e, d);
        end_word(&e);
      } else {
        push_char(&e, d);
      }
    }
    if (cjk) end_word(&e);
  }
  end_word(&e);
  ids[e.n++] = wp->sep;
  *n_out = e.n;
  return 0;
}
