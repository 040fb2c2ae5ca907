#!/bin/sh
# examples_test.sh NAME BIN: an example end to end, checking what it claims.
#   elastic_service: a report line per second; the pool grew past one replica
#     under the high phase and shrank again in the low phase after it.
#   train_allreduce: the workers' weights stayed identical every epoch, the loss
#     fell, the held-out accuracy beats the majority-class baseline by 0.15
#     (a run gives about 0.86 against 0.52; the data and seed are fixed), and
#     the saved head has the documented header and size.
# Both refuse bad options with status 2.  Timings are not asserted: the
# machine may be loaded.
set -u
name=$1; bin=$2; embed=${3:-}   # 3rd: batch_embed, to check --classify
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" "$1" | tail -n 1; }   # field FILE KEY: last value of KEY=

case "$name" in
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
  "$bin" --workers 0 > "$tmp/b.log" 2>&1
  [ $? = 2 ] || { cat "$tmp/b.log"; fail "--workers 0 must be refused with status 2"; }
  "$bin" --fortunes "$tmp/none" > "$tmp/b.log" 2>&1
  [ $? = 2 ] && grep -q "fortunes are not installed" "$tmp/b.log" || { cat "$tmp/b.log"; fail "missing data"; }
  ;;
*)
  fail "unknown example $name"
  ;;
esac
echo "$name: ok"
