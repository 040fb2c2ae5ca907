/* wordpiece.h - BERT WordPiece tokenizer (uncased), in C.
 *
 * Reproduces the Hugging Face `tokenizers` pipeline used by sentence-transformers
 * for BERT models: BertNormalizer (clean text, pad CJK ideographs, NFD + strip
 * nonspacing marks, lower case), BertPreTokenizer (split on whitespace and
 * punctuation), WordPiece (greedy longest match, "##" continuations, [UNK] for
 * words over 100 characters), then [CLS] ... [SEP] with truncation.
 * Input is bytes: invalid UTF-8 sequences decode to U+FFFD, which the normalizer
 * removes, exactly as Python's bytes.decode("utf-8", "replace") followed by the
 * reference tokenizer does.  Encoding allocates nothing and stops reading once
 * the token budget is spent, so a very long input costs no more than a short one. */
#ifndef RD_GPU_WORDPIECE_H
#define RD_GPU_WORDPIECE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rd_wordpiece rd_wordpiece;

/* Loads vocab.txt (one token per line, id = line number).  On success *out owns
 * the vocabulary (release with rd_wordpiece_free).  Fails with RD_ENOENT/RD_EIO
 * /RD_EINVAL (e.g. no [CLS], [SEP] or [UNK]) and a message in err. */
int rd_wordpiece_load(const char *vocab_path, rd_wordpiece **out, char *err, size_t errlen)
    __attribute__((warn_unused_result));
void rd_wordpiece_free(rd_wordpiece *wp);

size_t rd_wordpiece_vocab_size(const rd_wordpiece *wp);
/* Id of a token string, or -1. */
int32_t rd_wordpiece_token_id(const rd_wordpiece *wp, const char *tok, size_t len);
/* Token string of an id (NUL-terminated, owned by wp), or NULL. */
const char *rd_wordpiece_token(const rd_wordpiece *wp, int32_t id);

/* Encodes len bytes of text (need not be NUL-terminated; may be empty or invalid
 * UTF-8) into at most max_tokens ids, [CLS] first and [SEP] last; writes the
 * count to *n_out.  max_tokens must be >= 2.  Thread-safe on a shared wp. */
int rd_wordpiece_encode(const rd_wordpiece *wp, const char *text, size_t len, size_t max_tokens,
                        int32_t *ids, size_t *n_out);

#ifdef __cplusplus
}
#endif
#endif
