/* test_safetensors.c - the safetensors reader accepts the real weights file and
 * refuses broken copies of it with a clear error: truncated data, truncated
 * header, bad header JSON, offsets out of range, overlapping tensors, unknown or
 * wrong dtype (also through rd_engine_open, which must name the tensor). */
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine.h"
#include "raydist/error.h"
#include "safetensors.h"
#include "testutil.h"

static char tmpdir[256];
static unsigned char *orig;
static size_t orig_len, hdr_len;

static void write_file(const char *path, const void *b, size_t n) {
  FILE *f = fopen(path, "wb");
  CHECK(f && (n == 0 || fwrite(b, 1, n, f) == n));
  fclose(f);
}

/* Opens a broken variant; it must fail with want_rc and a message containing
 * want_msg. */
static void expect_fail(const char *what, const unsigned char *b, size_t n, int want_rc, const char *want_msg) {
  char path[512], err[512] = "";
  snprintf(path, sizeof path, "%s/bad.safetensors", tmpdir);
  write_file(path, b, n);
  rd_safetensors *st = NULL;
  int rc = rd_safetensors_open(path, &st, err, sizeof err);
  printf("%-28s -> %d %s\n", what, rc, err);
  CHECK(rc == want_rc && st == NULL);
  CHECK(strstr(err, want_msg) != NULL);
}

/* Copy of the file whose header has `from` replaced by `to` (padded with
 * spaces to the same length). */
static unsigned char *patched(const char *from, const char *to) {
  unsigned char *b = malloc(orig_len);
  memcpy(b, orig, orig_len);
  char *h = (char *)b + 8;
  char *p = memmem(h, hdr_len, from, strlen(from));
  CHECK(p != NULL);
  size_t fl = strlen(from), tl = strlen(to);
  CHECK(tl <= fl);
  memcpy(p, to, tl);
  memset(p + tl, ' ', fl - tl); /* JSON whitespace keeps it parseable */
  return b;
}

int main(void) {
  const char *dir = rd_test_model_dir();
  char path[4096], err[512] = "";
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  rd_safetensors *st = NULL;
  int rc = rd_safetensors_open(path, &st, err, sizeof err);
  if (rc) { fprintf(stderr, "open real file: %s\n", err); return 1; }
  CHECK(rd_safetensors_count(st) == 104);
  const rd_st_tensor *t = rd_safetensors_find(st, "embeddings.word_embeddings.weight");
  CHECK(t && t->dtype == RD_ST_F32 && t->ndim == 2 && t->shape[0] == 30522 && t->shape[1] == 384);
  const float *w;
  int64_t shape[2] = {30522, 384}, wrong[2] = {384, 30522};
  CHECK(rd_safetensors_get_f32(st, "embeddings.word_embeddings.weight", 2, shape, &w, err, sizeof err) == 0);
  CHECK(rd_safetensors_get_f32(st, "embeddings.word_embeddings.weight", 2, wrong, &w, err, sizeof err) == RD_EINVAL);
  CHECK(strstr(err, "wrong shape"));
  CHECK(rd_safetensors_get_f32(st, "embeddings.position_ids", 2, (int64_t[]){1, 512}, &w, err, sizeof err) == RD_EINVAL);
  CHECK(strstr(err, "wrong dtype I64"));
  CHECK(rd_safetensors_get_f32(st, "no.such.tensor", 1, shape, &w, err, sizeof err) == RD_ENOENT);
  rd_safetensors_close(st);

  snprintf(tmpdir, sizeof tmpdir, "/tmp/rd_st_test_XXXXXX");
  CHECK(mkdtemp(tmpdir));
  FILE *f = fopen(path, "rb");
  CHECK(f);
  fseek(f, 0, SEEK_END);
  orig_len = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  orig = malloc(orig_len);
  CHECK(fread(orig, 1, orig_len, f) == orig_len);
  fclose(f);
  memcpy(&hdr_len, orig, 8);

  expect_fail("empty file", NULL, 0, RD_EINVAL, "truncated");
  snprintf(err, sizeof err, "%s/none.safetensors", tmpdir);
  CHECK(rd_safetensors_open(err, &st, err, sizeof err) == RD_ENOENT && strstr(err, "cannot open"));
  expect_fail("truncated data", orig, orig_len - 1000, RD_EINVAL, "truncated");
  expect_fail("truncated header", orig, 8 + hdr_len / 2, RD_EINVAL, "truncated");
  expect_fail("4 bytes", orig, 4, RD_EINVAL, "truncated");
  unsigned char *b = malloc(orig_len);
  memcpy(b, orig, orig_len);
  memset(b + 8 + 100, '#', 10);
  expect_fail("bad header JSON", b, orig_len, RD_EINVAL, "bad header");
  memcpy(b, orig, orig_len);
  b[8] = '[';
  expect_fail("header not an object", b, orig_len, RD_EINVAL, "not a JSON object");
  uint64_t huge = 1ull << 40;
  memcpy(b, &huge, 8);
  expect_fail("header length too large", b, orig_len, RD_EINVAL, "header length");
  free(b);

  b = patched("\"data_offsets\":[87906304,90265600]", "\"data_offsets\":[87906304,99999999]");
  expect_fail("offsets out of range", b, orig_len, RD_EINVAL, "span");
  free(b);
  b = patched("\"data_offsets\":[90267136,90856960]", "\"data_offsets\":[90267136,99856960]");
  expect_fail("end beyond file", b, orig_len, RD_EINVAL, "span");
  free(b);
  /* same span size, moved past the end of the data */
  b = patched("\"data_offsets\":[90267136,90856960]", "\"data_offsets\":[90567136,91156960]");
  expect_fail("tensor past end of data", b, orig_len, RD_EINVAL, "truncated");
  free(b);
  b = patched("\"data_offsets\":[90267136,90856960]", "\"data_offsets\":[90265600,90855424]");
  expect_fail("overlapping tensors", b, orig_len, RD_EINVAL, "overlap");
  free(b);
  b = patched("\"dtype\":\"F32\",\"shape\":[384],\"data_offsets\":[4096,5632]",
              "\"dtype\":\"Q4\",\"shape\":[384],\"data_offsets\":[4096,5632]");
  expect_fail("unknown dtype", b, orig_len, RD_EINVAL, "unknown dtype 'Q4'");
  free(b);
  b = patched("\"dtype\":\"F32\",\"shape\":[384],\"data_offsets\":[4096,5632]",
              "\"dtype\":\"F16\",\"shape\":[384],\"data_offsets\":[4096,5632]");
  expect_fail("dtype/size mismatch", b, orig_len, RD_EINVAL, "need 768 bytes");
  free(b);
  b = patched("\"shape\":[30522,384]", "\"shape\":[30522,-4]");
  expect_fail("negative dimension", b, orig_len, RD_EINVAL, "bad shape");
  free(b);

  /* wrong dtype with a consistent file: the reader accepts it, the engine
   * refuses to open and names the tensor */
  char mdir[512];
  snprintf(mdir, sizeof mdir, "%s/model", tmpdir);
  CHECK(mkdir(mdir, 0700) == 0);
  b = patched("\"dtype\":\"F32\",\"shape\":[384],\"data_offsets\":[4096,5632]",
              "\"dtype\":\"I32\",\"shape\":[384],\"data_offsets\":[4096,5632]");
  char p2[1024], src[4096];
  snprintf(p2, sizeof p2, "%s/model.safetensors", mdir);
  write_file(p2, b, orig_len);
  free(b);
  for (int k = 0; k < 2; k++) {
    const char *name = k ? "vocab.txt" : "config.json";
    snprintf(src, sizeof src, "%s/%s", dir, name);
    snprintf(p2, sizeof p2, "%s/%s", mdir, name);
    CHECK(symlink(src, p2) == 0);
  }
  rd_engine_config cfg;
  rd_engine_config_init(&cfg);
  cfg.model_dir = mdir;
  cfg.errbuf = err;
  cfg.errbuf_len = sizeof err;
  rd_engine *e = NULL;
  rc = rd_engine_open(&cfg, &e);
  printf("%-28s -> %d %s\n", "engine, wrong dtype", rc, err);
  CHECK(rc == RD_EINVAL && e == NULL && strstr(err, "embeddings.LayerNorm.bias") && strstr(err, "wrong dtype I32"));
  /* truncated weights through the engine */
  snprintf(p2, sizeof p2, "%s/model.safetensors", mdir);
  write_file(p2, orig, orig_len / 2);
  rc = rd_engine_open(&cfg, &e);
  printf("%-28s -> %d %s\n", "engine, truncated weights", rc, err);
  CHECK(rc == RD_EINVAL && e == NULL && strstr(err, "truncated"));
  /* missing weights */
  unlink(p2);
  rc = rd_engine_open(&cfg, &e);
  printf("%-28s -> %d %s\n", "engine, missing weights", rc, err);
  CHECK(rc == RD_ENOENT && e == NULL && strstr(err, "fetch_model.sh"));

  for (int k = 0; k < 2; k++) {
    snprintf(p2, sizeof p2, "%s/%s", mdir, k ? "vocab.txt" : "config.json");
    unlink(p2);
  }
  rmdir(mdir);
  snprintf(p2, sizeof p2, "%s/bad.safetensors", tmpdir);
  unlink(p2);
  rmdir(tmpdir);
  free(orig);
  printf("safetensors: all checks passed\n");
  return 0;
}
