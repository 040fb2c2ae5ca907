#!/bin/sh
# bench/jobs/hold_handover.sh [RAYDIST] [JOBS] [raydist|ray-native] - how
# soon a job waiting for its entrypoint resources starts once the job
# holding them ends.
#
# Starts a one-node cluster (2 CPUs, one GPU: accounting only, no device
# needed) in a private RAYDIST_TMPDIR and submits JOBS jobs at once, each
# holding the GPU (`raydist job submit --num-gpus 1`) and printing the time
# it started and, 0.3 s later, the time it ends: one runs, the others wait
# PENDING and run one after the other.  Prints the gap between one job's
# last line and the next one's first (the handover: the keeper's exit, the
# node's release, the next keeper's start of its program), its mean,
# median and largest, and how long the submits took.  With `ray-native`,
# the same jobs on a real Ray head (`ray start --head --num-gpus 1` from
# .venv-raycli, tests/cluster/ray_cli_venv.sh; RAY=path of its `ray`),
# submitted with `ray job submit --entrypoint-num-gpus 1 --no-wait`.  Not
# a test.
R=${1:-build/runtime/raydist}
JOBS=${2:-10}
MODE=${3:-raydist}
case $R in /*) ;; *) R=$PWD/$R ;; esac
RAY=${RAY:-$PWD/.venv-raycli/bin/ray}
JOB='date +%s.%N; sleep 0.3; date +%s.%N'
T=$(mktemp -d /tmp/rdhold.XXXXXX)
now() { date +%s.%N; }
# gaps FILE...: each file a job's two lines, in the order the jobs ran
gaps() {
  for f in "$@"; do grep -E '^[0-9]+\.[0-9]+$' "$f" | tr '\n' ' '; echo; done | sort -n |
    awk -v m="$MODE" -v j="$JOBS" 'NF >= 2 { if (n) g[n] = $1 - last; n++; last = $2 }
      END {
        k = n - 1
        if (k < 1) { print m ": fewer than two jobs ran"; exit }
        for (i = 1; i <= k; i++) for (x = i + 1; x <= k; x++) if (g[x] < g[i]) { t = g[i]; g[i] = g[x]; g[x] = t }
        for (i = 1; i <= k; i++) s += g[i]
        printf "%s: %d jobs holding the one GPU in turn: handover mean %.0f ms, median %.0f ms, max %.0f ms\n",
               m, n, 1000 * s / k, 1000 * g[int((k + 1) / 2)], 1000 * g[k]
      }'
}
if [ "$MODE" = ray-native ]; then
  [ -x "$RAY" ] || { echo "no Ray CLI at $RAY: run tests/cluster/ray_cli_venv.sh"; exit 1; }
  export RAY_USAGE_STATS_ENABLED=0
  "$RAY" start --head --num-cpus 2 --num-gpus 1 --dashboard-port 8265 --disable-usage-stats > /dev/null 2>&1 ||
    { echo "cannot start Ray"; exit 1; }
  A=http://127.0.0.1:8265
  t0=$(now)
  for i in $(seq 1 "$JOBS"); do
    "$RAY" job submit --address $A --submission-id "hold-$i" --entrypoint-num-gpus 1 --no-wait -- sh -c "$JOB" > /dev/null 2>&1
  done
  t1=$(now)
  for i in $(seq 1 "$JOBS"); do
    for _w in $(seq 1 600); do
      "$RAY" job status --address $A "hold-$i" 2>/dev/null | grep -Eq "succeeded|failed|stopped" && break
      sleep 0.5
    done
    "$RAY" job logs --address $A "hold-$i" > "$T/$i" 2>/dev/null
  done
  "$RAY" stop > /dev/null 2>&1
else
  export RAYDIST_TMPDIR="$T"
  "$R" start --head --node-ip 127.0.0.1 --num-cpus 2 --num-gpus 1 > /dev/null 2>&1 || { echo "cannot start a node"; exit 1; }
  t0=$(now)
  for i in $(seq 1 "$JOBS"); do "$R" job submit --num-gpus 1 -- /bin/sh -c "$JOB" > /dev/null; done
  t1=$(now)
  for i in $(seq 1 "$JOBS"); do
    "$R" job wait "$i" --timeout 600 > /dev/null
    "$R" job logs "$i" > "$T/$i"
  done
  "$R" stop > /dev/null
fi
awk -v a="$t0" -v b="$t1" -v j="$JOBS" -v m="$MODE" 'BEGIN { printf "%s: %d submits took %.0f ms each\n", m, j, 1000 * (b - a) / j }'
gaps $(for i in $(seq 1 "$JOBS"); do echo "$T/$i"; done)
rm -rf "$T"
