/* scheduler/labels.h - node labels and label selectors (Ray's node labels
 * and label_selector).
 *
 * A node's labels are "key=value" pairs set when it starts (`raydist start
 * --labels`, rd_config.node_labels).  A task, actor or placement-group
 * bundle may carry a selector; it runs only on a node whose labels satisfy
 * every term of it.  Pure string work: no I/O, no allocation.
 *
 * Labels:   "key=value,key=value"   (at most RD_LABELS_MAX, each key once)
 *   key     1..127 bytes of [A-Za-z0-9._/-], beginning and ending with a
 *           letter or digit; keys beginning "raydist.io/" are reserved
 *   value   1..63 bytes of [A-Za-z0-9._-], beginning and ending with a
 *           letter or digit
 * Selector: terms joined by ',' (a ',' inside "in(...)" does not split):
 *   key=v         the node has label key with value v
 *   key=!v        it has no label key, or one with another value
 *   key=in(a,b)   it has label key with one of the values listed
 *   key=!in(a,b)  it has no label key, or one with none of those values
 * Spaces around terms, around '=' and around listed values are allowed.
 *
 * Alternatives: "sel;sel;..." (Ray's label_selector with its
 * fallback_strategy): selectors in order of preference, the first the
 * task's own, the rest its fallbacks.  A node satisfies the list when it
 * satisfies any of them; rd_labels_match_alt says which one first.
 */
#ifndef RD_SCHEDULER_LABELS_H
#define RD_SCHEDULER_LABELS_H

#include <stddef.h>

#define RD_LABELS_MAX 32           /* labels on one node */
#define RD_LABELS_LEN 512          /* a node's canonical labels, NUL included */
#define RD_LABEL_SEL_LEN 1024      /* a selector, NUL included */
#define RD_LABEL_SEL_MAX_TERMS 32
#define RD_LABEL_SEL_MAX_VALUES 32 /* values in one in(...) */
#define RD_LABEL_SEL_MAX_ALTS 8    /* a selector and its fallbacks */
#define RD_LABEL_ALTS_LEN 4096     /* alternatives joined, NUL included */

/* Checks spec ("key=value,...", NULL or "" for none) and writes it to out
 * (cap bytes) in canonical form: sorted by key, no spaces.  0, or
 * RD_EINVAL with why (a bad key or value, a key twice, a reserved key,
 * more than RD_LABELS_MAX, or longer than cap). */
int rd_labels_canon(const char *spec, char *out, size_t cap, char *why, size_t whylen);

/* rd_labels_canon, allowing keys beginning "raydist.io/": for the labels
 * the runtime sets itself (RD_LABEL_ACCEL). */
int rd_labels_canon_sys(const char *spec, char *out, size_t cap, char *why, size_t whylen);

/* The label a node with GPUs gets from the runtime: the model of its first
 * GPU, as rd_accel_type names it ("H100"; Ray's accelerator-type label). */
#define RD_LABEL_ACCEL "raydist.io/accelerator-type"
/* The labels of a node the autoscaler started: its node type (a name
 * from the autoscaling config) and the autoscaler's number for the launch. */
#define RD_LABEL_NODE_TYPE "raydist.io/node-type"
#define RD_LABEL_LAUNCH_ID "raydist.io/launch-id"

/* The accelerator type in a GPU's device name, as a label value: vendor
 * words dropped ("NVIDIA", "Tesla", "GeForce", "Quadro"), then the model,
 * cut where its variant begins: "NVIDIA H100 80GB HBM3" -> "H100",
 * "NVIDIA A100-SXM4-80GB" -> "A100", "Tesla V100-SXM2-16GB" -> "V100",
 * "NVIDIA GeForce RTX 4090" -> "RTX-4090", "NVIDIA L40S" -> "L40S".
 * 0, or -1 when nothing is left (out ""). */
int rd_accel_type(const char *device_name, char *out, size_t cap);

/* Checks a selector (NULL or "" selects every node): 0, or RD_EINVAL with
 * why.  Only selectors that pass may be given to rd_labels_match. */
int rd_label_sel_check(const char *sel, char *why, size_t whylen);

/* Checks alternatives "sel;sel;..." (a single selector is one; NULL or ""
 * selects every node): each non-empty and passing rd_label_sel_check, at
 * most RD_LABEL_SEL_MAX_ALTS of them, shorter than RD_LABEL_ALTS_LEN.
 * 0, or RD_EINVAL with why. */
int rd_label_alts_check(const char *alts, char *why, size_t whylen);

/* Joins a selector and its fallbacks ("sel;sel;...", NULL or "": none)
 * into alternatives for rd_label_alts_check, spaces around each ';'
 * dropped, written to out (cap bytes; "" when both are empty).  0, or
 * RD_EINVAL with why: either malformed, fallbacks without a selector (it
 * would match every node, so they could never be used), an empty
 * fallback, too many, or too long. */
int rd_label_alts_join(const char *sel, const char *fallbacks, char *out, size_t cap, char *why, size_t whylen);

/* The value of label key in labels (canonical; NULL: none) into out (len
 * bytes, cut to fit): 1, or 0 with out "" when there is no such label. */
int rd_labels_value(const char *labels, const char *key, char *out, size_t len);

/* 1 when labels (canonical, from rd_labels_canon; NULL means none) satisfy
 * every term of sel, or of any alternative of it (checked by
 * rd_label_alts_check; NULL or "" matches). */
int rd_labels_match(const char *labels, const char *sel);

/* The index of the first alternative of alts that labels satisfy (0 for
 * NULL or ""), or -1 when none does. */
int rd_labels_match_alt(const char *labels, const char *alts);

/* How many alternatives alts has (1 for NULL, "" or a single selector). */
int rd_label_alts_count(const char *alts);

/* 1 when labels satisfy alternative k of alts (counted from 0), or its
 * last one when it has k or fewer (NULL or "" matches). */
int rd_labels_match_nth(const char *labels, const char *alts, int k);

#endif /* RD_SCHEDULER_LABELS_H */
