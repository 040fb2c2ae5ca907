#!/bin/sh
# bench/jobs/follow_lag.sh [RAYDIST] [ROUNDS] [local] - how far behind a
# job `raydist job logs --follow` and `raydist job wait` are.
#
# Starts a one-node cluster in a private RAYDIST_TMPDIR and, from a
# directory with no session (so over --address, the tool link; with
# `local`, on the node's machine, reading its files), follows a job that
# prints a timestamp every 0.3 s (20 lines), then waits for a job that
# writes its end time and exits.  Prints the follower's mean lag behind
# each line and the wait's lag behind the end.  Give an older build's
# raydist as RAYDIST for a side-by-side figure.  Not a test.
R=${1:-build/runtime/raydist}
ROUNDS=${2:-2}
MODE=${3:-remote}
case $R in /*) ;; *) R=$PWD/$R ;; esac
for round in $(seq 1 "$ROUNDS"); do
  export RAYDIST_TMPDIR="$(mktemp -d /tmp/rdlag.XXXXXX)"
  "$R" start --head --node-ip 127.0.0.1 > /dev/null 2>&1 || { echo "cannot start a node"; exit 1; }
  S="$RAYDIST_TMPDIR/raydist-$(id -u)/node-127.0.0.1"
  ADDR=$(sed -n 's/^gcs=//p' "$S/cluster")
  TOK=$(cat "$S/token")
  mkdir -p "$RAYDIST_TMPDIR/elsewhere"
  if [ "$MODE" = local ]; then
    rj() { "$R" job "$@"; }
  else
    rj() { _s=$1; shift; RAYDIST_TMPDIR="$RAYDIST_TMPDIR/elsewhere" "$R" job "$_s" --address "$ADDR" --token "$TOK" "$@"; }
  fi
  ID=$(rj submit -- /bin/sh -c 'sleep 1; for i in $(seq 1 20); do date +%s.%N; sleep 0.3; done' |
       sed -n 's/^job \([0-9]*\) submitted.*/\1/p')
  rj logs "$ID" --follow | while read -r t; do echo "$t $(date +%s.%N)"; done |
    awk -v r="$round" -v m="$MODE" '{ s += $2 - $1; n++ } END { printf "round %d (%s): follow lag: mean %.0f ms over %d lines\n", r, m, 1000 * s / n, n }'
  ID=$(rj submit -- /bin/sh -c "sleep 1.5; date +%s.%N > $RAYDIST_TMPDIR/end" | sed -n 's/^job \([0-9]*\) submitted.*/\1/p')
  rj wait "$ID" > /dev/null
  T=$(date +%s.%N)
  awk -v a="$(cat "$RAYDIST_TMPDIR/end")" -v b="$T" -v r="$round" -v m="$MODE" 'BEGIN { printf "round %d (%s): wait lag: %.0f ms\n", r, m, 1000 * (b - a) }'
  "$R" stop > /dev/null
  rm -rf "$RAYDIST_TMPDIR"
done
