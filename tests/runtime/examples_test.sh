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
name=$1; bin=$2
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
