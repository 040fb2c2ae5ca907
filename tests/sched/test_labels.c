/* tests/sched/test_labels.c - node labels and label selectors: canonical
 * labels (sorted, spaces dropped), every refusal with its reason, and the
 * four selector forms against labelled and unlabelled nodes. */
#include <string.h>

#include "../check.h"
#include "labels.h"
#include "raydist/error.h"

static void canon_ok(const char *spec, const char *want) {
  char out[RD_LABELS_LEN], why[200] = "";
  int r = rd_labels_canon(spec, out, sizeof(out), why, sizeof(why));
  if (r != 0 || strcmp(out, want) != 0) {
    fprintf(stderr, "labels '%s': %d (%s) '%s', want '%s'\n", spec ? spec : "(null)", r, why, out, want);
    exit(1);
  }
}

static void canon_bad(const char *spec, const char *why_has) {
  char out[RD_LABELS_LEN], why[200] = "";
  int r = rd_labels_canon(spec, out, sizeof(out), why, sizeof(why));
  printf("labels '%.40s': %s\n", spec, why);
  CHECK_EQ(r, RD_EINVAL);
  CHECK(strstr(why, why_has) != NULL);
}

static void sel_bad(const char *sel, const char *why_has) {
  char why[200] = "";
  int r = rd_label_sel_check(sel, why, sizeof(why));
  printf("selector '%.40s': %s\n", sel, why);
  CHECK_EQ(r, RD_EINVAL);
  CHECK(strstr(why, why_has) != NULL);
  CHECK_EQ(rd_labels_match("a=b", sel), 0);   /* never checked: matches nothing */
}

static int match(const char *labels, const char *sel) {
  char why[200] = "";
  if (rd_label_sel_check(sel, why, sizeof(why)) != 0) {
    fprintf(stderr, "selector '%s' refused: %s\n", sel, why);
    exit(1);
  }
  return rd_labels_match(labels, sel);
}

static void join_ok(const char *sel, const char *fb, const char *want) {
  char out[RD_LABEL_ALTS_LEN], why[200] = "";
  int r = rd_label_alts_join(sel, fb, out, sizeof(out), why, sizeof(why));
  if (r != 0 || strcmp(out, want) != 0) {
    fprintf(stderr, "join '%s' + '%s': %d (%s) '%s', want '%s'\n", sel ? sel : "(null)", fb ? fb : "(null)", r, why,
            out, want);
    exit(1);
  }
  CHECK_EQ(rd_label_alts_check(out, why, sizeof(why)), 0);
}

static void join_bad(const char *sel, const char *fb, const char *why_has) {
  char out[RD_LABEL_ALTS_LEN], why[200] = "";
  int r = rd_label_alts_join(sel, fb, out, sizeof(out), why, sizeof(why));
  printf("join '%.40s' + '%.40s': %s\n", sel ? sel : "(null)", fb ? fb : "(null)", why);
  CHECK_EQ(r, RD_EINVAL);
  CHECK(strstr(why, why_has) != NULL);
  CHECK_EQ(out[0], 0);
}

/* Selectors with fallbacks: joined and checked, and which one a node
 * satisfies first. */
static void alternatives(void) {
  join_ok(NULL, NULL, "");
  join_ok("", " ", "");
  join_ok("zone=a", NULL, "zone=a");
  join_ok(" zone=a ", "zone=b ; market=in(spot,od) ", "zone=a;zone=b;market=in(spot,od)");
  join_ok("zone=a", "zone=a", "zone=a;zone=a");
  join_bad(NULL, "zone=b", "without a label_selector");
  join_bad("zone=a;zone=b", NULL, "has a ';'");
  join_bad("zone=a", "zone=b;", "empty selector");
  join_bad("zone=a", "zone=b; ;zone=c", "empty selector");
  join_bad("zone=a", "zone=", "label selector 2 ('zone='): an empty label value");
  join_bad("zone", "zone=b", "label selector 1 ('zone')");
  join_bad("zone", NULL, "is not key=value");   /* alone: the selector's own reason */
  join_bad("a=1", "a=2;a=3;a=4;a=5;a=6;a=7;a=8;a=9", "more than 8 label selectors");
  join_ok("a=1", "a=2;a=3;a=4;a=5;a=6;a=7;a=8", "a=1;a=2;a=3;a=4;a=5;a=6;a=7;a=8");
  char big[1100];
  memset(big, 'a', sizeof(big));
  memcpy(big, "k=", 2);
  big[sizeof(big) - 1] = '\0';
  join_bad("a=1", big, "longer than 1023 bytes");
  char out[64], why[200];
  CHECK_EQ(rd_label_alts_join("zone=abcdefghijklmnop", "zone=abcdefghijklmnopqrstuvwxyz;zone=abcdefghijkl", out,
                              sizeof(out), why, sizeof(why)), RD_EINVAL);
  CHECK(strstr(why, "longer than 63 bytes") != NULL);
  CHECK_EQ(rd_label_alts_check("zone=a;;zone=b", why, sizeof(why)), RD_EINVAL);
  CHECK(strstr(why, "is empty") != NULL);
  CHECK_EQ(rd_label_alts_check(";", why, sizeof(why)), RD_EINVAL);
  CHECK_EQ(rd_label_sel_check("zone=a;zone=b", why, sizeof(why)), RD_EINVAL);   /* one selector has no ';' */

  const char *w = "market=spot,zone=west", *e = "market=od,zone=east";
  const char *alts = "zone=north;zone=east;market=in(spot,od)";
  CHECK_EQ(rd_labels_match_alt(w, alts), 2);
  CHECK_EQ(rd_labels_match_alt(e, alts), 1);
  CHECK_EQ(rd_labels_match_alt("zone=north", alts), 0);
  CHECK_EQ(rd_labels_match_alt(NULL, alts), -1);
  CHECK_EQ(rd_labels_match_alt("", ""), 0);
  CHECK_EQ(rd_labels_match_alt(NULL, NULL), 0);
  CHECK_EQ(rd_labels_match_alt(w, "zone=west"), 0);
  CHECK_EQ(rd_labels_match_alt(w, "zone=east"), -1);
  CHECK_EQ(rd_labels_match(w, alts), 1);
  CHECK_EQ(rd_labels_match("zone=south", alts), 0);
  CHECK_EQ(rd_labels_match(e, "zone=!east;market=!od"), 0);
  char v[8];
  CHECK_EQ(rd_labels_value(w, "zone", v, sizeof(v)), 1);
  CHECK(!strcmp(v, "west"));
  CHECK_EQ(rd_labels_value(w, "zon", v, sizeof(v)), 0);   /* a key's prefix is not the key */
  CHECK_EQ(v[0], 0);
  CHECK_EQ(rd_labels_value(NULL, "zone", v, sizeof(v)), 0);
}

int main(void) {
  alternatives();
  canon_ok(NULL, "");
  canon_ok("", "");
  canon_ok("  ", "");
  canon_ok("zone=b,region=us-west1", "region=us-west1,zone=b");
  canon_ok(" gpu = A100 , example.com/tier=gold,a=1", "a=1,example.com/tier=gold,gpu=A100");
  canon_ok("k=v,", "k=v");
  canon_bad("k", "not key=value");
  canon_bad("k=", "empty label value");
  canon_bad("=v", "empty label key");
  canon_bad("k=v=w", "character other than");
  canon_bad("k=a b", "unexpected 'b'");
  canon_bad("-k=v", "begin and end");
  canon_bad("k=v.", "begin and end");
  canon_bad("k=v,k=w", "given twice");
  canon_bad("raydist.io/node=1", "reserved");
  canon_bad("k=\xc3\xa9", "character other than");
  char many[2048] = "";
  for (int i = 0; i < RD_LABELS_MAX + 1; i++) snprintf(many + strlen(many), sizeof(many) - strlen(many), "k%d=v,", i);
  canon_bad(many, "more than 32 labels");
  char longv[200];
  memset(longv, 'x', sizeof(longv));
  memcpy(longv, "k=", 2);
  longv[2 + 64] = '\0';
  canon_bad(longv, "longer than 63 bytes");
  /* 32 labels of 60-byte values do not fit 512 bytes */
  many[0] = '\0';
  for (int i = 0; i < 20; i++)
    snprintf(many + strlen(many), sizeof(many) - strlen(many), "k%02d=%s,", i,
             "vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv");
  canon_bad(many, "longer than 511 bytes");

  sel_bad("k", "is not key=value");
  sel_bad("k!=v", "is not key=value");
  sel_bad("k=", "empty label value");
  sel_bad("k=in(a,b", "without its )");
  sel_bad("k=in()", "empty label value");
  sel_bad("k=in(a,)", "empty label value");
  sel_bad("k=in(a b)", "unexpected 'b'");
  sel_bad("k=v x", "unexpected 'x'");
  sel_bad("k=v,", "ends with ','");
  sel_bad("k=in(a)x", "unexpected 'x'");
  sel_bad("k=v;w", "character other than");
  char terms[2048] = "";
  for (int i = 0; i < RD_LABEL_SEL_MAX_TERMS + 1; i++)
    snprintf(terms + strlen(terms), sizeof(terms) - strlen(terms), "%sk%d=v", i ? "," : "", i);
  sel_bad(terms, "more than 32 terms");
  char big[1100];
  memset(big, 'a', sizeof(big));
  big[sizeof(big) - 1] = '\0';
  sel_bad(big, "longer than 1023 bytes");
  char why[64];
  CHECK_EQ(rd_label_sel_check(NULL, why, sizeof(why)), 0);
  CHECK_EQ(rd_label_sel_check("", why, sizeof(why)), 0);

  const char *gpu = "market=spot,region=us-west1,zone=b";
  CHECK_EQ(match(gpu, ""), 1);
  CHECK_EQ(match(NULL, ""), 1);
  CHECK_EQ(match(gpu, "region=us-west1"), 1);
  CHECK_EQ(match(gpu, "region=us-west"), 0);    /* a prefix is not the value */
  CHECK_EQ(match(gpu, "region=us-west10"), 0);
  CHECK_EQ(match(gpu, "reg=us-west1"), 0);      /* nor a key's prefix */
  CHECK_EQ(match(gpu, " region = us-west1 , zone = b "), 1);
  CHECK_EQ(match(gpu, "region=us-west1,zone=a"), 0);
  CHECK_EQ(match(gpu, "market=!spot"), 0);
  CHECK_EQ(match(gpu, "market=! on-demand"), 1);
  CHECK_EQ(match(gpu, "tier=!gold"), 1);        /* no such label: != holds */
  CHECK_EQ(match(gpu, "tier=gold"), 0);
  CHECK_EQ(match(gpu, "zone=in(a,b,c)"), 1);
  CHECK_EQ(match(gpu, "zone=in( a , c )"), 0);
  CHECK_EQ(match(gpu, "zone=in (b)"), 1);
  CHECK_EQ(match(gpu, "tier=in(gold)"), 0);     /* in needs the label */
  CHECK_EQ(match(gpu, "zone=!in(a,c)"), 1);
  CHECK_EQ(match(gpu, "zone=!in(a,b)"), 0);
  CHECK_EQ(match(gpu, "tier=!in(gold,silver)"), 1);
  CHECK_EQ(match(gpu, "zone=in(a,b),zone=!in(b)"), 0);
  CHECK_EQ(match(gpu, "zone=inb"), 0);          /* a value that begins "in" */
  CHECK_EQ(match("zone=inb", "zone=inb"), 1);
  CHECK_EQ(match("zone=in", "zone=in"), 1);
  CHECK_EQ(match(NULL, "tier=!gold"), 1);
  CHECK_EQ(match("", "tier=gold"), 0);
  CHECK_EQ(match("a=1,example.com/tier=gold", "example.com/tier=in(silver,gold),a=1"), 1);
  /* the runtime's own label: reserved for users, allowed for the runtime */
  char out[RD_LABELS_LEN], why2[200];
  CHECK_EQ(rd_labels_canon_sys("zone=a," RD_LABEL_ACCEL "=H100", out, sizeof(out), why2, sizeof(why2)), 0);
  CHECK(!strcmp(out, "raydist.io/accelerator-type=H100,zone=a"));
  CHECK_EQ(match(out, RD_LABEL_ACCEL "=in(H100,H200)"), 1);
  static const char *const names[][2] = {
      {"NVIDIA H100 80GB HBM3", "H100"}, {"NVIDIA A100-SXM4-80GB", "A100"}, {"Tesla V100-SXM2-16GB", "V100"},
      {"NVIDIA GeForce RTX 4090", "RTX-4090"}, {"NVIDIA L40S", "L40S"}, {"NVIDIA H200", "H200"},
      {"NVIDIA RTX A6000", "RTX-A6000"}, {"Quadro RTX 8000", "RTX-8000"}, {"NVIDIA GH200 480GB", "GH200"},
      {"Tesla T4", "T4"}, {"NVIDIA H100 PCIe", "H100"}};
  for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++) {
    char t[64];
    CHECK_EQ(rd_accel_type(names[i][0], t, sizeof(t)), 0);
    if (strcmp(t, names[i][1])) {
      fprintf(stderr, "'%s' -> '%s', want '%s'\n", names[i][0], t, names[i][1]);
      exit(1);
    }
    char one[128];   /* a valid label value */
    snprintf(one, sizeof(one), "k=%s", t);
    CHECK_EQ(rd_labels_canon(one, out, sizeof(out), why2, sizeof(why2)), 0);
  }
  char t[64];
  CHECK_EQ(rd_accel_type("NVIDIA", t, sizeof(t)), -1);
  CHECK_EQ(rd_accel_type("", t, sizeof(t)), -1);
  CHECK_EQ(rd_accel_type(NULL, t, sizeof(t)), -1);
  CHECK_EQ(rd_accel_type("-weird-", t, sizeof(t)), -1);
  printf("ok\n");
  return 0;
}
