/* examples/corpus.h - the text corpora the examples read: every gloss of
 * WordNet, every cookie of fortunes-min, or a file with one item per line,
 * each item trimmed and named (for the rows file of an output).  Examples
 * only; not part of libraydist. */
#ifndef RD_EXAMPLES_CORPUS_H
#define RD_EXAMPLES_CORPUS_H

#include <stddef.h>
#include <stdint.h>

typedef struct ex_item {
  char *text;
  size_t len;
  char *id;      /* "noun:00001740" (WordNet offset), "fortunes:12" (file:k), "line:7" */
} ex_item;

typedef struct ex_corpus {
  ex_item *items;
  size_t n, cap;
} ex_corpus;

/* Load `spec` into *c (zeroed by the caller): "wordnet", "fortunes" (from
 * fortunes_dir, NULL for /usr/share/games/fortunes) or the path of a text
 * file.  Exits with status 2 and a message naming the cause when the data is
 * missing, unreadable or empty. */
void ex_corpus_load(ex_corpus *c, const char *spec, const char *fortunes_dir);
void ex_corpus_free(ex_corpus *c);

/* Items first .. first+n-1, counted round the corpus, in the texts wire
 * format of embedder.h (malloc'd, *size bytes). */
uint8_t *ex_corpus_encode(const ex_corpus *c, size_t first, size_t n, size_t *size);

#endif
