#!/bin/sh
# examples_test.sh NAME BIN [BATCH_EMBED [NPY_CMP]]: an example end to end,
# checking what it claims.
#   elastic_service: a report line per second; the pool grew past one replica
#     under the high phase and shrank again in the low phase after it.
#   train_allreduce: the workers' weights stayed identical every epoch, the loss
#     fell, the held-out accuracy beats the majority-class baseline by 0.15
#     (a run gives about 0.86 against 0.52; the data and seed are fixed), and
#     the saved head has the documented header and size; the same with
#     --allreduce ring and three workers.
#   pipeline_parallel: 2 and 3 stages give bit for bit the .npy of batch_embed
#     --direct and of one Embedder actor (batch_embed --replicas 1) on the same
#     batches (the state between stages is the fp32 residual stream and each
#     stage runs the same passes as the unsplit engine, so no tolerance is
#     needed); the stages overlapped; --bench prints both rates.
#   seed_small_tasks: with 2 simulated GPUs, every result right, at most 4
#     tasks (1 / 0.25) at once on each GPU, and more than one at some point.
#   seed_trainer: a worker per simulated GPU, the loss falls every epoch and
#     the workers' weights are identical after every epoch.
#   seed_elastic: scale(1) -> scale(3) -> scale(1) seen in the lines, every
#     replica of the big phase served, every request routed to a least-loaded
#     replica and some routings contested (another replica had more).
#   hello_tasks: the squares, the chain, the 64 MiB sum and the streamed
#     squares it prints (it takes no options).
# All the others refuse bad options with status 2.  Timings are not asserted: the
# machine may be loaded.
set -u
name=$1; bin=$2; embed=${3:-}; npycmp=${4:-}   # batch_embed (--classify, reference outputs), npy_cmp
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" "$1" | tail -n 1; }   # field FILE KEY: last value of KEY=

case "$name" in
hello_tasks)
  # the printed results, the streamed items taken in order to the end
  "$bin" > "$tmp/out" 2>&1 || { cat "$tmp/out"; fail "hello_tasks exited non-zero"; }
  cat "$tmp/out"
  grep -qx "squares: 0 1 4 9 16 25 36 49 64 81" "$tmp/out" || fail "squares"
  grep -qx "square(square(3)) = 81" "$tmp/out" || fail "chain"
  grep -qx "sum of a 64 MiB object computed in a worker: 8556380160" "$tmp/out" || fail "64 MiB sum"
  grep -qx "streamed: 0 1 4 9 16 (5 items, RD_EEND)" "$tmp/out" || fail "stream"
  exit 0
  ;;
elastic_service)
  # low 8 s, high 8 s, low 8 s.  The low rate is half the default so that the
  # replicas go idle for scale_down_idle_ms even when a loaded machine makes
  # each call take a second or two.
  "$bin" --duration 24 --phase-seconds 8 --low-rate 0.5 > "$tmp/s.log" 2>&1 ||
    { cat "$tmp/s.log"; fail "the service run failed"; }
  cat "$tmp/s.log"
  n=$(grep -cE '^t=[0-9]+ rate=[0-9.]+ replicas=[0-9]+ inflight=[0-9]+ queue_wait_ms=[0-9.]+ p50_ms=[0-9.]+ p99_ms=[0-9.]+' "$tmp/s.log")
  [ "$n" -ge 23 ] || fail "expected a report line per second, got $n"
  grep '^summary: ' "$tmp/s.log" > "$tmp/sum" || fail "no summary line"
  req=$(field "$tmp/sum" requests); maxr=$(field "$tmp/sum" max_replicas_seen); fin=$(field "$tmp/sum" final_replicas)
  [ -n "$req" ] && [ "$req" -gt 0 ] || fail "no request served"
  [ "$(field "$tmp/sum" failed)" = 0 ] || fail "requests failed"
  [ "$maxr" -gt 1 ] || fail "the pool never scaled up (max_replicas_seen=$maxr)"
  [ "$fin" -lt "$maxr" ] || fail "the pool did not scale back down (final_replicas=$fin, max seen $maxr)"
  # in the per-second lines: the largest size first, a smaller one after it
  awk -v m="$maxr" '/^t=/ { split($3, a, "="); r = a[2]; if (r == m) up = 1; else if (up && r < m) down = 1 }
                    END { exit !(up && down) }' "$tmp/s.log" ||
    fail "the report lines do not show the pool growing to $maxr and shrinking after"
  "$bin" --duration 0 > "$tmp/b.log" 2>&1
  [ $? = 2 ] || { cat "$tmp/b.log"; fail "--duration 0 must be refused with status 2"; }
  "$bin" --max-replicas 3 --cpus-per-replica 64 > "$tmp/b.log" 2>&1
  [ $? = 2 ] && grep -q "do not fit" "$tmp/b.log" || { cat "$tmp/b.log"; fail "replicas that cannot be placed must be refused"; }
  ;;
train_allreduce)
  "$bin" --save "$tmp/head.bin" > "$tmp/t.log" 2>&1 || { cat "$tmp/t.log"; fail "the training run failed"; }
  cat "$tmp/t.log"
  epochs=$(grep -c '^epoch=' "$tmp/t.log")
  [ "$epochs" -ge 20 ] || fail "expected at least 20 epoch lines, got $epochs"
  [ "$(grep '^epoch=' "$tmp/t.log" | grep -vc ' identical=yes$')" = 0 ] || fail "the workers' weights diverged"
  grep '^summary: ' "$tmp/t.log" > "$tmp/sum" || fail "no summary line"
  [ "$(field "$tmp/sum" weights_identical)" = yes ] || fail "summary: weights not identical"
  acc=$(field "$tmp/sum" test_acc); base=$(field "$tmp/sum" baseline)
  awk -v a="$acc" -v b="$base" 'BEGIN { exit !(b > 0.3 && a >= b + 0.15) }' ||
    fail "held-out accuracy $acc does not beat the baseline $base by 0.15"
  first=$(grep '^epoch=1 ' "$tmp/t.log" | sed 's/.* train_loss=\([^ ]*\).*/\1/')
  last=$(field "$tmp/sum" train_loss)
  awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < f / 2) }' || fail "the training loss did not fall ($first -> $last)"
  # the head file: "RDHEAD1\0", u32 version 1, dim, classes, flags, 32-byte names, W, b
  classes=$(field "$tmp/sum" classes)
  set -- $(od -An -t u4 -j 8 -N 16 "$tmp/head.bin")
  [ "$(head -c 7 "$tmp/head.bin")" = RDHEAD1 ] || fail "bad magic in the head file"
  [ "$1" = 1 ] && [ "$2" = 384 ] && [ "$3" = "$classes" ] && [ "$4" = 0 ] || fail "bad head header: $*"
  want=$((24 + 32 * classes + 4 * classes * (384 + 1)))
  size=$(wc -c < "$tmp/head.bin")
  [ "$size" = "$want" ] || fail "head file is $size bytes, the format says $want"
  grep -q "^saved: $tmp/head.bin bytes=$want " "$tmp/t.log" || fail "no saved line"
  # batch_embed --classify applies the saved head to every fortune: its labels
  # must mostly agree with the file each cookie came from (training data
  # included, so this checks the plumbing, not generalisation)
  if [ -n "${embed:-}" ]; then
    "$embed" --corpus fortunes --out "$tmp/f.npy" --classify "$tmp/head.bin" > "$tmp/c.log" 2>&1 ||
      { cat "$tmp/c.log"; fail "batch_embed --classify failed"; }
    grep -q "^classified: rows=" "$tmp/c.log" || fail "no classified line"
    rows=$(($(wc -l < "$tmp/f.npy.labels.tsv") - 1))
    grep '^summary: ' "$tmp/c.log" > "$tmp/csum"
    [ "$rows" = "$(field "$tmp/csum" items)" ] || fail "labels file has $rows rows"
    awk -F'\t' -v b="$base" 'NR > 1 { split($2, a, ":"); t++; if (a[1] == $3) ok++ }
      END { printf "classify agreement %.3f\n", ok / t; exit !(ok / t >= b + 0.2) }' "$tmp/f.npy.labels.tsv" ||
      fail "classified labels do not agree with the source files"
    "$embed" --corpus fortunes --out "$tmp/g.npy" --classify "$tmp/nothing.bin" > "$tmp/c2.log" 2>&1
    [ $? = 2 ] && grep -q "classifier head" "$tmp/c2.log" || { cat "$tmp/c2.log"; fail "a missing head must be refused"; }
    head -c 100 "$tmp/head.bin" > "$tmp/short.bin"
    "$embed" --corpus fortunes --out "$tmp/g.npy" --classify "$tmp/short.bin" > "$tmp/c3.log" 2>&1
    [ $? = 2 ] && grep -q "truncated" "$tmp/c3.log" || { cat "$tmp/c3.log"; fail "a truncated head must be refused"; }
  fi
  # the same training with the all-reduce among the workers (a collective
  # group, rd_allreduce): three workers, identical weights, the same quality
  "$bin" --allreduce ring --workers 3 > "$tmp/r.log" 2>&1 || { cat "$tmp/r.log"; fail "the ring training run failed"; }
  grep '^summary: ' "$tmp/r.log" > "$tmp/rsum" || { cat "$tmp/r.log"; fail "ring: no summary line"; }
  cat "$tmp/rsum"
  [ "$(field "$tmp/rsum" allreduce)" = ring ] || fail "ring: the summary does not say allreduce=ring"
  [ "$(grep '^epoch=' "$tmp/r.log" | grep -vc ' identical=yes$')" = 0 ] || fail "ring: the workers' weights diverged"
  racc=$(field "$tmp/rsum" test_acc)
  awk -v a="$racc" -v b="$base" 'BEGIN { exit !(a >= b + 0.15) }' || fail "ring: held-out accuracy $racc vs baseline $base"
  rfirst=$(grep '^epoch=1 ' "$tmp/r.log" | sed 's/.* train_loss=\([^ ]*\).*/\1/')
  rlast=$(field "$tmp/rsum" train_loss)
  awk -v f="$rfirst" -v l="$rlast" 'BEGIN { exit !(l < f / 2) }' || fail "ring: the loss did not fall ($rfirst -> $rlast)"
  "$bin" --allreduce tree > "$tmp/b.log" 2>&1
  [ $? = 2 ] || { cat "$tmp/b.log"; fail "--allreduce tree must be refused with status 2"; }
  "$bin" --workers 0 > "$tmp/b.log" 2>&1
  [ $? = 2 ] || { cat "$tmp/b.log"; fail "--workers 0 must be refused with status 2"; }
  "$bin" --fortunes "$tmp/none" > "$tmp/b.log" 2>&1
  [ $? = 2 ] && grep -q "fortunes are not installed" "$tmp/b.log" || { cat "$tmp/b.log"; fail "missing data"; }
  ;;
pipeline_parallel)
  [ -n "$embed" ] && [ -n "$npycmp" ] || fail "pipeline_parallel needs batch_embed and npy_cmp"
  "$embed" --corpus wordnet --limit 300 --batch 24 --direct --out "$tmp/direct.npy" > "$tmp/d.log" 2>&1 ||
    { cat "$tmp/d.log"; fail "batch_embed --direct"; }
  "$embed" --corpus wordnet --limit 300 --batch 24 --replicas 1 --out "$tmp/one.npy" > "$tmp/o.log" 2>&1 ||
    { cat "$tmp/o.log"; fail "batch_embed --replicas 1"; }
  "$bin" --corpus wordnet --limit 300 --batch 24 --out "$tmp/p2.npy" --bench > "$tmp/p2.log" 2>&1 ||
    { cat "$tmp/p2.log"; fail "the 2-stage run failed"; }
  cat "$tmp/p2.log"
  "$bin" --corpus wordnet --limit 300 --batch 24 --split 2,4 --cpus-per-stage 0.5 --out "$tmp/p3.npy" > "$tmp/p3.log" 2>&1 ||
    { cat "$tmp/p3.log"; fail "the 3-stage run failed"; }
  cat "$tmp/p3.log"
  for p in p2 p3; do
    "$npycmp" "$tmp/direct.npy" "$tmp/$p.npy" 0 || fail "$p differs from the engine's direct output"
    "$npycmp" "$tmp/one.npy" "$tmp/$p.npy" 0 || fail "$p differs from one Embedder actor's output"
    cmp -s "$tmp/direct.npy.rows.tsv" "$tmp/$p.npy.rows.tsv" || fail "$p rows file differs"
    grep -q '^summary: items=300 ' "$tmp/$p.log" || fail "$p: no summary"
    ov=$(sed -n 's/^overlap: batches_overlapped=\([0-9]*\) .*/\1/p' "$tmp/$p.log")
    [ -n "$ov" ] && [ "$ov" -gt 0 ] || fail "$p: the stages never overlapped"
  done
  [ "$(grep -c '^stage [0-9]: layers=' "$tmp/p3.log")" = 3 ] || fail "3 stage lines expected"
  grep -q '^bench: .* pipeline_items_per_s=[0-9.]* .* single_actor_items_per_s=[0-9.]* ' "$tmp/p2.log" || fail "no bench line"
  grep -q '^bench: single actor vs pipeline max_abs_diff=0 batches_differing=0 identical=yes' "$tmp/p2.log" ||
    fail "--bench: the single actor's output differs"
  for bad in "--split 0" "--split 3,3" "--split 6" "--split a" "--batch 0" "--cpus-per-stage 5"; do
    "$bin" --corpus wordnet --limit 10 --out "$tmp/b.npy" $bad > "$tmp/b.log" 2>&1
    [ $? = 2 ] || { cat "$tmp/b.log"; fail "$bad must be refused with status 2"; }
  done
  "$bin" --corpus "$tmp/none.txt" --out "$tmp/b.npy" > "$tmp/b.log" 2>&1
  [ $? = 2 ] && grep -q "cannot read the corpus" "$tmp/b.log" || { cat "$tmp/b.log"; fail "missing corpus"; }
  "$bin" --corpus wordnet --out "$tmp/no/dir/b.npy" > "$tmp/b.log" 2>&1
  [ $? = 2 ] && grep -q "cannot write" "$tmp/b.log" || { cat "$tmp/b.log"; fail "unwritable output"; }
  "$bin" --corpus wordnet --out "$tmp/b.npy" --model "$tmp" > "$tmp/b.log" 2>&1
  [ $? = 2 ] && grep -q "fetch_model" "$tmp/b.log" || { cat "$tmp/b.log"; fail "missing model"; }
  ;;
seed_small_tasks)
  "$bin" --gpus 2 --tasks 120 --task-ms 40 > "$tmp/s.log" 2>&1 || { cat "$tmp/s.log"; fail "the run failed"; }
  cat "$tmp/s.log"
  grep '^summary: ' "$tmp/s.log" > "$tmp/sum" || fail "no summary line"
  [ "$(field "$tmp/sum" correct)" = 120 ] && [ "$(field "$tmp/sum" wrong)" = 0 ] && [ "$(field "$tmp/sum" failed)" = 0 ] ||
    fail "not every result is right"
  [ "$(field "$tmp/sum" bad_grants)" = 0 ] || fail "a task was not granted exactly 0.25 of one GPU"
  [ "$(grep -c '^gpu [01]: tasks=' "$tmp/s.log")" = 2 ] || fail "a line per GPU expected"
  awk '/^gpu / { split($4, a, "="); if (a[2] > 4) bad = 1; if (a[2] > 1) shared = 1 }
       END { exit !(shared && !bad) }' "$tmp/s.log" || fail "per-GPU concurrency must stay in 2..4"
  "$bin" --gpus 0 > "$tmp/b.log" 2>&1
  [ $? = 2 ] && grep -q "simulate" "$tmp/b.log" || { cat "$tmp/b.log"; fail "no GPU must be refused with a hint"; }
  "$bin" --gpus-per-task 0 > "$tmp/b.log" 2>&1
  [ $? = 2 ] || { cat "$tmp/b.log"; fail "--gpus-per-task 0 must be refused"; }
  ;;
seed_trainer)
  "$bin" --gpus 2 --epochs 6 > "$tmp/t.log" 2>&1 || { cat "$tmp/t.log"; fail "the training run failed"; }
  cat "$tmp/t.log"
  grep -q '^seed_trainer: workers=2 each holding 1 GPU' "$tmp/t.log" || fail "expected a worker per GPU"
  [ "$(grep -c '^worker [01]: pid=' "$tmp/t.log")" = 2 ] || fail "expected two workers"
  [ "$(grep -c '^epoch=' "$tmp/t.log")" = 6 ] || fail "expected 6 epoch lines"
  [ "$(grep '^epoch=' "$tmp/t.log" | grep -vc ' identical=yes$')" = 0 ] || fail "the workers' weights diverged"
  grep '^epoch=' "$tmp/t.log" | sed 's/.* train_loss=\([^ ]*\).*/\1/' |
    awk 'NR > 1 && $1 >= prev { bad = 1 } { prev = $1 } END { exit bad }' || fail "the training loss did not fall every epoch"
  grep '^summary: ' "$tmp/t.log" > "$tmp/sum" || fail "no summary line"
  [ "$(field "$tmp/sum" weights_identical)" = yes ] || fail "summary: weights not identical"
  "$bin" --gpus 2 --workers 3 > "$tmp/b.log" 2>&1
  [ $? = 2 ] || { cat "$tmp/b.log"; fail "--workers other than the GPUs must be refused"; }
  "$bin" --gpus 0 --workers 0 > "$tmp/b.log" 2>&1
  [ $? = 2 ] || { cat "$tmp/b.log"; fail "--workers 0 must be refused"; }
  ;;
seed_elastic)
  "$bin" --schedule 1:4:3,3:30:5,1:3:3 > "$tmp/e.log" 2>&1 || { cat "$tmp/e.log"; fail "the service run failed"; }
  cat "$tmp/e.log"
  [ "$(grep -c '^scale: ' "$tmp/e.log")" = 3 ] || fail "three scale operations expected"
  grep -q '^scale: 1 -> 3 replicas' "$tmp/e.log" && grep -q '^scale: 3 -> 1 replicas' "$tmp/e.log" || fail "no scale up and down"
  n=$(grep -cE '^t=[0-9]+ rate=[0-9.]+ replicas=[0-9]+ outstanding=\[[0-9r,]*\] p50_ms=[0-9.]+ p99_ms=[0-9.]+' "$tmp/e.log")
  [ "$n" -ge 10 ] || fail "expected a report line per second, got $n"
  awk '/^t=/ { split($3, a, "="); r = a[2]; if (r == 3) up = 1; else if (up && r == 1) down = 1 }
       END { exit !(up && down) }' "$tmp/e.log" || fail "the lines do not show 3 replicas, then 1"
  grep '^summary: ' "$tmp/e.log" > "$tmp/sum" || fail "no summary line"
  req=$(field "$tmp/sum" requests)
  [ "$req" -gt 0 ] && [ "$(field "$tmp/sum" routed)" = "$req" ] && [ "$(field "$tmp/sum" least_loaded)" = "$req" ] ||
    fail "every request must be answered and routed to a least-loaded replica"
  [ "$(field "$tmp/sum" contested)" -gt 0 ] || fail "least-loaded routing never mattered (no contested routing)"
  [ "$(grep -c '^replica [0-9]*: served=[1-9]' "$tmp/e.log")" = 3 ] || fail "every replica must have served"
  "$bin" --schedule 1:0:3 > "$tmp/b.log" 2>&1
  [ $? = 2 ] || { cat "$tmp/b.log"; fail "a zero rate must be refused"; }
  "$bin" --schedule 8:5:1 --cpus-per-replica 1 > "$tmp/b.log" 2>&1
  [ $? = 2 ] && grep -q "do not fit" "$tmp/b.log" || { cat "$tmp/b.log"; fail "replicas that cannot be placed must be refused"; }
  ;;
*)
  fail "unknown example $name"
  ;;
esac
echo "$name: ok"
