#!/bin/sh
# batch_embed_test.sh BIN NPY_CMP: the main job end to end on a small input.
# - the pool's embeddings equal the engine's direct output for the same items;
# - an interrupted run resumes and ends with the same file;
# - bad input (missing corpus, unwritable output, finished output) is refused clearly.
set -u
bin=$1; cmp=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$bin" --corpus wordnet --limit 600 --batch 32 --direct --out "$tmp/direct.npy" > "$tmp/d.log" 2>&1 || { cat "$tmp/d.log"; fail "direct run"; }
"$bin" --corpus wordnet --limit 600 --batch 32 --replicas 2 --out "$tmp/pool.npy" > "$tmp/p.log" 2>&1 || { cat "$tmp/p.log"; fail "pool run"; }
grep -q "^summary: items=600 " "$tmp/p.log" || { cat "$tmp/p.log"; fail "no summary"; }
grep -q "^replica pid=" "$tmp/p.log" || fail "no per-replica line"
"$cmp" "$tmp/direct.npy" "$tmp/pool.npy" 1e-5 || fail "pool output differs from the engine's"
[ "$(wc -l < "$tmp/pool.npy.rows.tsv")" = 601 ] || fail "rows file"
[ ! -e "$tmp/pool.npy.progress" ] || fail "progress file left after a complete run"
# interrupted after 5 batches, then resumed
"$bin" --corpus wordnet --limit 600 --batch 32 --replicas 2 --stop-after 5 --out "$tmp/resume.npy" > "$tmp/r1.log" 2>&1
[ $? = 130 ] || { cat "$tmp/r1.log"; fail "an interrupted run must exit 130"; }
[ -e "$tmp/resume.npy.progress" ] || fail "no progress file after an interrupt"
"$bin" --corpus wordnet --limit 600 --batch 32 --replicas 2 --out "$tmp/resume.npy" > "$tmp/r2.log" 2>&1 || { cat "$tmp/r2.log"; fail "resume"; }
grep -q "resuming" "$tmp/r2.log" || fail "did not resume"
grep -q "^summary: items=600 " "$tmp/r2.log" && fail "resumed run recomputed everything"
"$cmp" "$tmp/direct.npy" "$tmp/resume.npy" 1e-5 || fail "resumed output differs"
# bad input
"$bin" --corpus "$tmp/nope.txt" --out "$tmp/x.npy" > "$tmp/b1.log" 2>&1
[ $? = 2 ] && grep -q "cannot read the corpus" "$tmp/b1.log" || { cat "$tmp/b1.log"; fail "missing corpus"; }
printf 'one line\n' > "$tmp/c.txt"
"$bin" --corpus "$tmp/c.txt" --out "$tmp/no/such/dir/x.npy" > "$tmp/b2.log" 2>&1
[ $? = 2 ] && grep -q "cannot write" "$tmp/b2.log" || { cat "$tmp/b2.log"; fail "unwritable output"; }
"$bin" --corpus wordnet --limit 600 --batch 32 --out "$tmp/pool.npy" > "$tmp/b3.log" 2>&1
[ $? = 3 ] && grep -q "force" "$tmp/b3.log" || { cat "$tmp/b3.log"; fail "finished output must not be overwritten"; }
echo "batch_embed: ok"
