/* runtime/common.c - resource strings and resource messages. */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "raydist/error.h"

int rd__res_parse_custom(rd_resources *r, const char *spec, char *err, int errlen) {
  if (!spec || !*spec) return 0;
  char buf[512];
  if (strlen(spec) >= sizeof(buf)) {
    if (err) snprintf(err, (size_t)errlen, "resource string too long");
    return RD_EINVAL;
  }
  strcpy(buf, spec);
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(tok, '=');
    if (!eq || eq == tok) {
      if (err) snprintf(err, (size_t)errlen, "resource '%s' is not name=amount", tok);
      return RD_EINVAL;
    }
    *eq = 0;
    char *end = NULL;
    double q = strtod(eq + 1, &end);
    int64_t fx;
    if (!end || *end || end == eq + 1 || rd_res_from_double(q, &fx) != 0) {
      if (err) snprintf(err, (size_t)errlen, "resource '%s' has a bad amount '%s'", tok, eq + 1);
      return RD_EINVAL;
    }
    if (strlen(tok) >= RD_RES_NAME_MAX) {
      if (err) snprintf(err, (size_t)errlen, "resource name '%s' is too long", tok);
      return RD_EINVAL;
    }
    if (rd_res_get_custom(r, tok) != 0) {
      if (err) snprintf(err, (size_t)errlen, "resource '%s' given twice", tok);
      return RD_EINVAL;
    }
    if (rd_res_set_custom(r, tok, fx) != 0) {
      if (err) snprintf(err, (size_t)errlen, "too many custom resources");
      return RD_EINVAL;
    }
  }
  return 0;
}

void rd__res_to_msg(const rd_resources *r, rd__res_msg *out) {
  rd__resources__init(&out->msg);
  out->msg.cpu = r->cpu;
  out->msg.gpu = r->gpu;
  out->msg.memory = r->memory;
  out->msg.n_custom = (size_t)r->ncustom;
  out->msg.custom = out->customp;
  for (int i = 0; i < r->ncustom; i++) {
    rd__custom__init(&out->custom[i]);
    out->custom[i].name = (char *)r->custom[i].name;
    out->custom[i].amount = r->custom[i].amount;
    out->customp[i] = &out->custom[i];
  }
}

int rd__res_from_msg(const Rd__Resources *m, rd_resources *out) {
  memset(out, 0, sizeof(*out));
  if (!m) return 0;
  if (m->n_custom > RD_RES_MAX_CUSTOM) return RD_EINVAL;
  out->cpu = m->cpu;
  out->gpu = m->gpu;
  out->memory = m->memory;
  for (size_t i = 0; i < m->n_custom; i++) {
    if (!m->custom[i]->name || strlen(m->custom[i]->name) >= RD_RES_NAME_MAX) return RD_EINVAL;
    strcpy(out->custom[i].name, m->custom[i]->name);
    out->custom[i].amount = m->custom[i]->amount;
  }
  out->ncustom = (int)m->n_custom;
  return rd_res_validate(out);
}
