/* examples/corpus.c - the corpora of corpus.h.  Loading is all or nothing:
 * missing data ends the program with status 2 and a hint, never a crash. */
#include "corpus.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "embedder.h"

static void corpus_add(ex_corpus *c, const char *text, size_t len, const char *id) {
  while (len && (text[len - 1] == '\n' || text[len - 1] == ' ' || text[len - 1] == '\r')) len--;
  while (len && (*text == ' ' || *text == '\n')) text++, len--;
  if (!len) return;
  if (c->n == c->cap) {
    c->cap = c->cap ? c->cap * 2 : 4096;
    c->items = realloc(c->items, c->cap * sizeof(ex_item));
    if (!c->items) ex_die(1, "out of memory reading the corpus");
  }
  ex_item *it = &c->items[c->n++];
  it->text = strndup(text, len);
  it->len = len;
  it->id = strdup(id);
  if (!it->text || !it->id) ex_die(1, "out of memory reading the corpus");
}

/* WordNet: the gloss after "| " on each synset line of data.<pos>. */
static void load_wordnet(ex_corpus *c) {
  static const char *pos[] = {"noun", "verb", "adj", "adv"};
  int found = 0;
  for (int p = 0; p < 4; p++) {
    char path[256];
    snprintf(path, sizeof(path), "/usr/share/wordnet/data.%s", pos[p]);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    found++;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) > 0) {
      if (line[0] == ' ') continue;   /* license header */
      char *bar = strstr(line, "| ");
      if (!bar) continue;
      char id[64];
      snprintf(id, sizeof(id), "%s:%.8s", pos[p], line);
      corpus_add(c, bar + 2, (size_t)(line + n - (bar + 2)), id);
    }
    free(line);
    fclose(f);
  }
  if (!found) ex_die(2, "WordNet is not installed (/usr/share/wordnet/data.*): apt-get install wordnet-base");
}

/* fortunes: every cookie of every fortune file, named file:k. */
typedef struct fortune_ctx {
  ex_corpus *c;
  const char *file;
} fortune_ctx;

static void add_cookie(void *ctx, int k, const char *text, size_t len) {
  fortune_ctx *fc = ctx;
  char id[600];
  snprintf(id, sizeof(id), "%s:%d", fc->file, k);
  corpus_add(fc->c, text, len, id);
}

static void load_fortunes(ex_corpus *c, const char *dir) {
  char **names;
  int nn = ex_fortune_files(dir, &names);
  for (int i = 0; i < nn; i++) {
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
    fortune_ctx fc = {c, names[i]};
    ex_fortune_cookies(path, 0, add_cookie, &fc);
    free(names[i]);
  }
  free(names);
  if (!c->n) ex_die(2, "no fortunes found in %s", dir);
}

static void load_file(ex_corpus *c, const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) ex_die(2, "cannot read the corpus %s: %s", path, strerror(errno));
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  size_t k = 0;
  while ((n = getline(&line, &cap, f)) > 0) {
    char id[32];
    snprintf(id, sizeof(id), "line:%zu", ++k);
    corpus_add(c, line, (size_t)n, id);
  }
  int bad = ferror(f);
  free(line);
  fclose(f);
  if (bad) ex_die(2, "cannot read the corpus %s: read error", path);
  if (!c->n) ex_die(2, "the corpus %s has no non-empty line", path);
}

void ex_corpus_load(ex_corpus *c, const char *spec, const char *fortunes_dir) {
  if (!strcmp(spec, "wordnet")) load_wordnet(c);
  else if (!strcmp(spec, "fortunes")) load_fortunes(c, fortunes_dir ? fortunes_dir : "/usr/share/games/fortunes");
  else load_file(c, spec);
}

void ex_corpus_free(ex_corpus *c) {
  for (size_t i = 0; i < c->n; i++) free(c->items[i].text), free(c->items[i].id);
  free(c->items);
  memset(c, 0, sizeof(*c));
}

uint8_t *ex_corpus_encode(const ex_corpus *c, size_t first, size_t n, size_t *size) {
  const char **texts = malloc((n ? n : 1) * sizeof(char *));
  size_t *lens = malloc((n ? n : 1) * sizeof(size_t));
  if (!texts || !lens) ex_die(1, "out of memory");
  for (size_t i = 0; i < n; i++) {
    const ex_item *it = &c->items[(first + i) % c->n];
    texts[i] = it->text;
    lens[i] = it->len;
  }
  uint8_t *p = ex_texts_encode(texts, lens, n, size);
  free(texts);
  free(lens);
  return p;
}
