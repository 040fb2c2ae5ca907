/* tests/runtime/json_test.c - the node's JSON reader (runtime/json.c): what
 * it reads, and every kind of malformed text refused with a reason, never
 * a crash (run under the sanitizers with the rest). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "json.h"

static rd_json *parse(const char *s) {
  char why[200];
  rd_json *j = rd_json_parse(s, strlen(s), why, sizeof(why));
  if (!j) printf("refused %s: %s\n", s, why);
  return j;
}

static void refused(const char *s, const char *reason) {
  char why[200] = "";
  rd_json *j = rd_json_parse(s, strlen(s), why, sizeof(why));
  if (j || !strstr(why, reason)) fprintf(stderr, "'%s': '%s', not '%s'\n", s, why, reason);
  CHECK(j == NULL);
  CHECK(strstr(why, reason) != NULL);
}

int main(void) {
  rd_json *j = parse(" {\"entrypoint\": \"echo hi\", \"runtime_env\": {\"env_vars\": {\"A\": \"1\", \"B\": \"x y\"}},"
                     " \"n\": -12.5e1, \"ok\": true, \"no\": false, \"nil\": null, \"list\": [1, [2], {}, []]} ");
  CHECK(j && j->type == RD_JSON_OBJECT);
  const rd_json *e = rd_json_get(j, "entrypoint");
  CHECK(e && e->type == RD_JSON_STRING && !strcmp(e->str, "echo hi"));
  const rd_json *ev = rd_json_get(rd_json_get(j, "runtime_env"), "env_vars");
  CHECK(ev && ev->type == RD_JSON_OBJECT && ev->child && !strcmp(ev->child->key, "A") && !strcmp(ev->child->str, "1"));
  CHECK(ev->child->next && !strcmp(ev->child->next->key, "B") && !strcmp(ev->child->next->str, "x y") && !ev->child->next->next);
  CHECK(rd_json_get(j, "n")->type == RD_JSON_NUMBER && rd_json_get(j, "n")->num == -125);
  CHECK(rd_json_get(j, "ok")->type == RD_JSON_TRUE && rd_json_get(j, "no")->type == RD_JSON_FALSE);
  CHECK(rd_json_get(j, "nil")->type == RD_JSON_NULL && rd_json_get(j, "missing") == NULL);
  const rd_json *l = rd_json_get(j, "list");
  CHECK(l->type == RD_JSON_ARRAY && l->child->num == 1 && l->child->next->type == RD_JSON_ARRAY);
  CHECK(l->child->next->child->num == 2 && l->child->next->next->type == RD_JSON_OBJECT);
  CHECK(l->child->next->next->next->type == RD_JSON_ARRAY && !l->child->next->next->next->child);
  CHECK(rd_json_get(l, "x") == NULL && rd_json_get(NULL, "x") == NULL);
  free(j);

  /* a name given twice: read (the first found), and told */
  j = parse("{\"a\": 1, \"b\": {\"x\": 1, \"x\": 2}, \"a\": 3}");
  CHECK(j && rd_json_get(j, "a")->num == 1 && !strcmp(rd_json_dup_key(j), "a"));
  CHECK(!strcmp(rd_json_dup_key(rd_json_get(j, "b")), "x") && rd_json_dup_key(rd_json_get(j, "a")) == NULL);
  free(j);
  j = parse("{\"a\": 1, \"b\": 2}");
  CHECK(j && rd_json_dup_key(j) == NULL);
  free(j);

  /* escapes, decoded to UTF-8 */
  j = parse("\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u00e9\\u20ac\\ud83d\\ude00\"");
  CHECK(j && j->type == RD_JSON_STRING);
  CHECK(!strcmp(j->str, "a\"b\\c/d\b\f\n\r\t\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"));
  free(j);
  j = parse("0");
  CHECK(j && j->num == 0);
  free(j);
  j = parse("[-0.5, 1E+2, 3e-1]");
  CHECK(j && j->child->num == -0.5 && j->child->next->num == 100 && fabs(j->child->next->next->num - 0.3) < 1e-12);
  free(j);

  /* 32 levels: the limit */
  char deep[200] = "";
  for (int i = 0; i < 32; i++) strcat(deep, "[");
  for (int i = 0; i < 32; i++) strcat(deep, "]");
  j = parse(deep);
  CHECK(j != NULL);
  free(j);
  char deeper[200] = "[";
  strcat(deeper, deep);
  strcat(deeper, "]");
  refused(deeper, "nested deeper than 32");

  refused("", "a value missing");
  refused("   ", "a value missing");
  refused("{", "quoted name");
  refused("{\"a\" 1}", "without ':'");
  refused("{\"a\": 1,}", "trailing comma");
  refused("[1,]", "trailing comma");
  refused("[1 2]", "without ',' or ']'");
  refused("{\"a\": 1 \"b\": 2}", "without ',' or '}'");
  refused("{a: 1}", "quoted name");
  refused("\"abc", "closing quote");
  refused("\"ab\\", "closing quote");
  refused("\"a\nb\"", "control byte");
  refused("\"\\x\"", "unknown escape");
  refused("\"\\u12\"", "four hex digits");
  refused("\"\\u0000\"", "\\u0000");
  refused("\"\\ud83d\"", "lone high surrogate");
  refused("\"\\ud83dx\"", "lone high surrogate");
  refused("\"\\ude00\"", "lone low surrogate");
  refused("\"caf\xc3\"", "not UTF-8");
  refused("\"\xff\"", "not UTF-8");
  refused("\"\xc0\xaf\"", "not UTF-8");            /* overlong '/' */
  refused("\"\xed\xa0\x80\"", "not UTF-8");        /* a surrogate */
  refused("\"\xf4\x90\x80\x80\"", "not UTF-8");    /* past U+10FFFF */
  j = parse("\"caf\xc3\xa9 \xf0\x9f\x98\x80\"");
  CHECK(j && !strcmp(j->str, "caf\xc3\xa9 \xf0\x9f\x98\x80"));
  free(j);
  refused("01", "leading zero");
  refused("1.", "after its point");
  refused("1e", "exponent");
  refused("-", "unexpected character");
  refused("+1", "unexpected character");
  refused("tru", "unknown word");
  refused("nul", "unknown word");
  refused("{} {}", "after the value");
  refused("// c\n{}", "unexpected character");
  /* a NUL byte in the text ends nothing: it is just malformed */
  char why[200];
  CHECK(rd_json_parse("{\"a\":\"b\0c\"}", 11, why, sizeof(why)) == NULL && strstr(why, "control byte"));
  CHECK(rd_json_parse("{}\0", 3, why, sizeof(why)) == NULL && strstr(why, "after the value"));
  CHECK(rd_json_parse(NULL, 0, why, sizeof(why)) == NULL);

  /* random bytes and cut-off texts: refused or read, never a crash */
  const char *good = "{\"entrypoint\": \"sh -c 'echo \\u00e9'\", \"runtime_env\": {\"env_vars\": {\"K\": \"V\"}}, \"x\": [1.5e3, true, null]}";
  size_t gl = strlen(good);
  for (size_t cut = 0; cut < gl; cut++) {
    rd_json *p = rd_json_parse(good, cut, why, sizeof(why));
    CHECK(p == NULL);
  }
  uint32_t seed = 12345;
  char buf[64];
  int read_ok = 0;
  for (int round = 0; round < 200000; round++) {
    memcpy(buf, good, 64 < gl ? 64 : gl);
    size_t n = 1 + (seed % 63);
    for (int k = 0; k < 3; k++) {
      seed = seed * 1103515245u + 12345u;
      buf[(seed >> 8) % n] = (char)(seed >> 16);
    }
    rd_json *p = rd_json_parse(buf, n, why, sizeof(why));
    read_ok += p != NULL;
    free(p);
  }
  printf("json_test: ok (%d of 200000 mangled texts still read)\n", read_ok);
  return 0;
}
