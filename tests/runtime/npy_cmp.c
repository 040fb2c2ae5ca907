/* tests/runtime/npy_cmp.c - compare two float32 .npy files of the same shape:
 * prints the largest absolute difference, exits 1 when it exceeds the
 * tolerance (argv[3], default 1e-5) or the headers differ. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float *load(const char *path, char *hdr, size_t hdrcap, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) { fprintf(stderr, "npy_cmp: cannot open %s\n", path); exit(2); }
  unsigned char pre[10];
  if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY\x01\x00", 8) != 0) { fprintf(stderr, "npy_cmp: %s is not .npy v1\n", path); exit(2); }
  size_t hl = (size_t)pre[8] | ((size_t)pre[9] << 8);
  if (hl >= hdrcap || fread(hdr, 1, hl, f) != hl) { fprintf(stderr, "npy_cmp: bad header in %s\n", path); exit(2); }
  hdr[hl] = 0;
  fseek(f, 0, SEEK_END);
  long end = ftell(f);
  size_t bytes = (size_t)end - 10 - hl;
  float *d = malloc(bytes ? bytes : 1);
  fseek(f, (long)(10 + hl), SEEK_SET);
  if (fread(d, 1, bytes, f) != bytes) { fprintf(stderr, "npy_cmp: short read %s\n", path); exit(2); }
  fclose(f);
  *n = bytes / 4;
  return d;
}

int main(int argc, char **argv) {
  if (argc < 3) { fprintf(stderr, "usage: npy_cmp A.npy B.npy [tol]\n"); return 2; }
  double tol = argc > 3 ? atof(argv[3]) : 1e-5;
  char ha[512], hb[512];
  size_t na, nb;
  float *a = load(argv[1], ha, sizeof(ha), &na), *b = load(argv[2], hb, sizeof(hb), &nb);
  if (strcmp(ha, hb) != 0 || na != nb || na == 0) {
    fprintf(stderr, "npy_cmp: shapes differ or empty\n%s\n%s\n", ha, hb);
    free(a);
    free(b);
    return 1;
  }
  double worst = 0;
  size_t zero_rows = 0;
  for (size_t i = 0; i < na; i++) {
    double d = fabs((double)a[i] - (double)b[i]);
    if (!(d <= worst)) worst = d;   /* NaN counts as worst */
  }
  for (size_t r = 0; r < na / 384; r++) {
    double s = 0;
    for (size_t k = 0; k < 384; k++) s += (double)a[r * 384 + k] * a[r * 384 + k];
    if (s < 0.5) zero_rows++;   /* every embedding has unit norm: a missing row would be zeros */
  }
  printf("npy_cmp: %zu values, max abs diff %.3g, rows without a unit norm %zu\n", na, worst, zero_rows);
  free(a);
  free(b);
  return worst <= tol && zero_rows == 0 ? 0 : 1;
}
