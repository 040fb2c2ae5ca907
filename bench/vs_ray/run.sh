#!/bin/sh
# run.sh - libraydist against Ray on this machine, in one run: the physical
# references (memcpy, Unix-socket round trip), libraydist's microbench and
# vs_ray_extra, Ray's microbenchmark workloads (ray_perf.py, same shapes and
# timing method), the time to start a cluster and run a first task on both
# sides, and, when examples/batch_embed is built, batch inference against a
# Ray Data pipeline.  Ray (ray[data], pinned) is installed into .venv-ray on
# the first run (venv.sh).  Writes results/vs_ray/<timestamp>/ (raw outputs,
# results.json, results.md) and prints the tables.  Exits non-zero when
# either side fails.  A benchmark: it checks nothing else.
#
# usage: bench/vs_ray/run.sh       (every setting below can be overridden)
#   BUILD=build  DURATION=2  TRIALS=3  FIRST_TASK_RUNS=5
#   CORPUS=wordnet  LIMIT=20000  REPLICAS=2  CPUS_PER_REPLICA=1
#   THREADS_PER_REPLICA=1  BATCH=64  SKIP_BATCH=0
#   FILTER=SUBSTR (only the metrics whose name contains it; for a quick try)
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$ROOT/bench/vs_ray
BUILD=${BUILD:-$ROOT/build}
DURATION=${DURATION:-2}
TRIALS=${TRIALS:-3}
FIRST_TASK_RUNS=${FIRST_TASK_RUNS:-5}
CORPUS=${CORPUS:-wordnet}
LIMIT=${LIMIT:-20000}
REPLICAS=${REPLICAS:-2}
CPUS_PER_REPLICA=${CPUS_PER_REPLICA:-1}
THREADS_PER_REPLICA=${THREADS_PER_REPLICA:-1}
BATCH=${BATCH:-64}
SKIP_BATCH=${SKIP_BATCH:-0}
FILTER=${FILTER:-}
# libraydist's embedded cluster uses every online CPU; Ray gets the same.
NCPU=$(nproc)
STAMP=$(date +%Y%m%d-%H%M%S)
OUT=$ROOT/results/vs_ray/$STAMP
mkdir -p "$OUT"
fail=0
say() { echo "== $*"; }
now() { date +%s.%N; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

say "results in $OUT"
LOAD0=$(loadavg)

# ---- build the C side
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$OUT/build.log" 2>&1 || fail=1
fi
cmake --build "$BUILD" -j"$NCPU" --target microbench sockping first_task vs_ray_extra >>"$OUT/build.log" 2>&1 || {
  echo "run.sh: the C build failed (see $OUT/build.log)" >&2; exit 1; }
B=$BUILD/bench

# ---- the Ray environment (idempotent)
PY=$("$HERE/venv.sh") || { echo "run.sh: could not install Ray into .venv-ray" >&2; exit 1; }
RAY_VERSION=$("$PY" -c "import ray; print(ray.__version__)")

# ---- physical references
say "references: Unix-socket round trip"
"$B/vs_ray/sockping" --duration "$DURATION" --trials "$TRIALS" --json "$OUT/sockping.json" || fail=1
"$B/vs_ray/sockping" --duration "$DURATION" --trials "$TRIALS" --pin 0 --json "$OUT/sockping_same_cpu.json" || fail=1

# ---- libraydist
say "libraydist: microbench (memcpy reference included)"
"$B/microbench" --duration "$DURATION" --trials "$TRIALS" ${FILTER:+--filter "$FILTER"} --json "$OUT/c_microbench.json" 2>&1 |
  tee "$OUT/c_microbench.txt"
grep -q "per second" "$OUT/c_microbench.txt" || { echo "run.sh: microbench failed" >&2; fail=1; }
say "libraydist: vs_ray_extra"
"$B/vs_ray/vs_ray_extra" --duration "$DURATION" --trials "$TRIALS" ${FILTER:+--filter "$FILTER"} --json "$OUT/c_extra.json" 2>&1 |
  tee "$OUT/c_extra.txt"
[ -s "$OUT/c_extra.json" ] || { echo "run.sh: vs_ray_extra failed" >&2; fail=1; }

# ---- Ray
say "Ray $RAY_VERSION: ray_perf.py"
"$PY" "$HERE/ray_perf.py" --duration "$DURATION" --trials "$TRIALS" --num-cpus "$NCPU" \
  ${FILTER:+--filter "$FILTER"} --json "$OUT/ray_perf.json" >"$OUT/ray_perf.log" 2>&1
rc=$?
grep -E "per second|latency" "$OUT/ray_perf.log"
[ $rc = 0 ] && [ -s "$OUT/ray_perf.json" ] || { echo "run.sh: ray_perf.py failed (see $OUT/ray_perf.log)" >&2; fail=1; }

# ---- time to start a cluster and run a first task: a fresh process per run,
# the first run of each side untimed (page cache), then FIRST_TASK_RUNS runs.
say "first task: libraydist and Ray, $FIRST_TASK_RUNS runs each after one untimed run"
first_task() {   # side, file, command...
  side=$1 file=$2
  shift 2
  : >"$OUT/$file"
  i=0
  while [ $i -le "$FIRST_TASK_RUNS" ]; do
    t0=$(now)
    line=$("$@" 2>>"$OUT/$file.log" | grep "^first_task ") || { echo "run.sh: $side first task failed" >&2; fail=1; return; }
    t1=$(now)
    if [ $i -gt 0 ]; then
      echo "$line" >>"$OUT/$file"
      echo "process wall_s=$(awk "BEGIN { print $t1 - $t0 }")" >>"$OUT/$file"
    fi
    i=$((i + 1))
  done
  cat "$OUT/$file"
}
first_task libraydist c_first_task.txt "$B/vs_ray/first_task"
first_task Ray ray_first_task.txt "$PY" "$HERE/ray_first_task.py" "$NCPU"

# ---- batch inference
BATCH_META=null
BATCH_SKIPPED=null
EMBED=$BUILD/examples/batch_embed
if [ "$SKIP_BATCH" = 1 ]; then
  BATCH_SKIPPED='"skipped (SKIP_BATCH=1)"'
elif [ ! -x "$EMBED" ]; then
  echo "batch_embed not built yet: skipping the batch-inference table"
  BATCH_SKIPPED='"batch_embed not built yet"'
else
  say "batch inference: $CORPUS, $LIMIT items, $REPLICAS replicas x $CPUS_PER_REPLICA CPU, batch $BATCH"
  BATCH_META="{\"corpus\": \"$CORPUS\", \"limit\": $LIMIT, \"replicas\": $REPLICAS, \"cpus_per_replica\": $CPUS_PER_REPLICA, \"threads_per_replica\": $THREADS_PER_REPLICA, \"batch\": $BATCH}"
  "$EMBED" --corpus "$CORPUS" --out "$OUT/c_batch.npy" --replicas "$REPLICAS" --cpus-per-replica "$CPUS_PER_REPLICA" \
    --threads-per-replica "$THREADS_PER_REPLICA" --batch "$BATCH" --limit "$LIMIT" --force \
    >"$OUT/c_batch.txt" 2>"$OUT/c_batch.log" || { echo "run.sh: batch_embed failed (see $OUT/c_batch.log)" >&2; fail=1; }
  grep -E "^summary:" "$OUT/c_batch.txt"
  HF_HUB_OFFLINE=1 "$PY" "$HERE/ray_batch.py" --corpus "$CORPUS" --out "$OUT/ray_batch.npy" --replicas "$REPLICAS" \
    --cpus-per-replica "$CPUS_PER_REPLICA" --threads-per-replica "$THREADS_PER_REPLICA" --batch "$BATCH" \
    --limit "$LIMIT" --num-cpus "$NCPU" >"$OUT/ray_batch.txt" 2>"$OUT/ray_batch.log" ||
    { echo "run.sh: ray_batch.py failed (see $OUT/ray_batch.log)" >&2; fail=1; }
  grep -E "^summary:" "$OUT/ray_batch.txt"
  # the same rows on both sides: embeddings agree to float tolerance
  "$PY" - "$OUT/c_batch.npy" "$OUT/ray_batch.npy" <<'PY' | tee "$OUT/batch_agreement.txt"
import sys
import numpy as np
try:
    a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
except Exception as e:  # a side failed: already reported
    print("batch agreement: not compared (%s)" % e)
    sys.exit(0)
n = min(len(a), len(b))
cos = (a[:n] * b[:n]).sum(1) / (np.linalg.norm(a[:n], axis=1) * np.linalg.norm(b[:n], axis=1) + 1e-12)
print("batch agreement: rows %d vs %d, cosine min %.5f mean %.5f" % (len(a), len(b), cos.min(), cos.mean()))
PY
  rm -f "$OUT/c_batch.npy" "$OUT/c_batch.npy.rows.tsv" "$OUT/ray_batch.npy"
fi

# ---- tables
cat >"$OUT/meta.json" <<EOF
{"date": "$(date -u +%Y-%m-%dT%H:%M:%SZ)", "host": "$(hostname)", "cpus": $NCPU,
 "cpu_model": "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//; s/"//g')",
 "kernel": "$(uname -r)", "duration": $DURATION, "trials": $TRIALS, "first_task_runs": $FIRST_TASK_RUNS,
 "ray_version": "$RAY_VERSION", "loadavg_start": "$LOAD0", "loadavg_end": "$(loadavg)",
 "git_commit": "$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)",
 "batch": $BATCH_META, "batch_skipped": $BATCH_SKIPPED}
EOF
echo
python3 "$HERE/compare.py" "$OUT" || fail=1
echo
echo "results: $OUT/results.md, $OUT/results.json"
exit $fail
