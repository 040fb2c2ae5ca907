#!/bin/sh
# bench/jobs/follow_lag.sh [RAYDIST] [ROUNDS] [local|ray] - how far behind a
# job `raydist job logs --follow` and `raydist job wait` are.
#
# Starts a one-node cluster in a private RAYDIST_TMPDIR and, from a
# directory with no session (so over --address, the tool link; with
# `local`, on the node's machine, reading its files), follows a job that
# prints a timestamp every 0.3 s (20 lines), then waits for a job that
# writes its end time and exits.  Prints the follower's mean lag behind
# each line and the wait's lag behind the end.  With `ray`, Ray's own
# `ray job logs --follow` follows, through the node's jobs API (the log
# tail's WebSocket; RAY=path of its `ray`, default .venv-raycli/bin/ray
# from tests/cluster/ray_cli_venv.sh); submit and wait are local.  With
# `ray-native`, the same job and the same `ray job logs --follow` on a real
# Ray head (`ray start --head` from that environment, dashboard on port
# 8265; the follow lag only).  Give an older build's raydist as RAYDIST for
# a side-by-side figure.  Not a test.
R=${1:-build/runtime/raydist}
ROUNDS=${2:-2}
MODE=${3:-remote}
case $R in /*) ;; *) R=$PWD/$R ;; esac
RAY=${RAY:-$PWD/.venv-raycli/bin/ray}
JOB='sleep 1; for i in $(seq 1 20); do date +%s.%N; sleep 0.3; done'   # a line every 0.3 s
case $MODE in ray*) [ -x "$RAY" ] || { echo "no Ray CLI at $RAY: run tests/cluster/ray_cli_venv.sh"; exit 1; } ;; esac
# follow_ray ADDRESS ID: Ray's CLI following job ID, each line with when it came
follow_ray() {
  PYTHONUNBUFFERED=1 "$RAY" job logs --address "$1" "$2" --follow 2>/dev/null | grep --line-buffered -E '^[0-9]+\.[0-9]+$'
}
lag() { while read -r t; do echo "$t $(date +%s.%N)"; done |
  awk -v r="$1" -v m="$MODE" '{ s += $2 - $1; n++ } END { printf "round %d (%s): follow lag: mean %.0f ms over %d lines\n", r, m, 1000 * s / n, n }'; }
if [ "$MODE" = ray-native ]; then
  export RAY_USAGE_STATS_ENABLED=0
  "$RAY" start --head --num-cpus 2 --dashboard-port 8265 --disable-usage-stats > /dev/null 2>&1 || { echo "cannot start Ray"; exit 1; }
  for round in $(seq 1 "$ROUNDS"); do
    ID=$("$RAY" job submit --address http://127.0.0.1:8265 --no-wait -- sh -c "$JOB" 2>&1 |
         sed -n "s/.*Job '\([A-Za-z0-9_]*\)' submitted successfully.*/\1/p")
    follow_ray http://127.0.0.1:8265 "$ID" | lag "$round"
  done
  "$RAY" stop > /dev/null 2>&1
  exit 0
fi
for round in $(seq 1 "$ROUNDS"); do
  export RAYDIST_TMPDIR="$(mktemp -d /tmp/rdlag.XXXXXX)"
  "$R" start --head --node-ip 127.0.0.1 > /dev/null 2>&1 || { echo "cannot start a node"; exit 1; }
  S="$RAYDIST_TMPDIR/raydist-$(id -u)/node-127.0.0.1"
  ADDR=$(sed -n 's/^gcs=//p' "$S/cluster")
  TOK=$(cat "$S/token")
  mkdir -p "$RAYDIST_TMPDIR/elsewhere"
  if [ "$MODE" = local ]; then
    rj() { "$R" job "$@"; }
  elif [ "$MODE" = ray ]; then   # submit and wait here; follow with Ray's CLI over HTTP
    M=$(cat "$S/metrics")
    rj() {
      case $1 in
        logs) RAY_JOB_HEADERS="{\"Authorization\": \"Bearer $TOK\"}" follow_ray "http://$M" "$2" ;;
        *) "$R" job "$@" ;;
      esac
    }
  else
    rj() { _s=$1; shift; RAYDIST_TMPDIR="$RAYDIST_TMPDIR/elsewhere" "$R" job "$_s" --address "$ADDR" --token "$TOK" "$@"; }
  fi
  ID=$(rj submit -- /bin/sh -c "$JOB" | sed -n 's/^job \([0-9]*\) submitted.*/\1/p')
  rj logs "$ID" --follow | lag "$round"
  ID=$(rj submit -- /bin/sh -c "sleep 1.5; date +%s.%N > $RAYDIST_TMPDIR/end" | sed -n 's/^job \([0-9]*\) submitted.*/\1/p')
  rj wait "$ID" > /dev/null
  T=$(date +%s.%N)
  awk -v a="$(cat "$RAYDIST_TMPDIR/end")" -v b="$T" -v r="$round" -v m="$MODE" 'BEGIN { printf "round %d (%s): wait lag: %.0f ms\n", r, m, 1000 * (b - a) }'
  "$R" stop > /dev/null
  rm -rf "$RAYDIST_TMPDIR"
done
