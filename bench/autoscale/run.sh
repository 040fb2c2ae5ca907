#!/bin/sh
# bench/autoscale/run.sh [BUILD_DIR] [autoscale_bench args] - the autoscaler
# growing and shrinking a cluster on this machine: a head (2 CPUs, no job
# resource) whose autoscaler starts nodes of type `job` (1 CPU, job=1, at
# most 4, on 127.0.0.101..) when tasks that need job=1 wait, and lets them
# go after 5 s idle.  autoscale_bench times a cold and a warm run; this
# script then times the way back to the head alone.
set -eu
B=${1:-build}
[ $# -gt 0 ] && shift
R="$(cd "$(dirname "$B/runtime/raydist")" && pwd)/raydist"
export RAYDIST_TMPDIR="$(mktemp -d /tmp/rdas.XXXXXX)"
ROOT="$RAYDIST_TMPDIR/raydist-$(id -u)"
trap '"$R" stop >/dev/null 2>&1; rm -rf "$RAYDIST_TMPDIR"' EXIT
cat > "$RAYDIST_TMPDIR/autoscale.conf" <<CONF
idle_timeout_s = 5
interval_ms = 250
[type job]
resources = CPU=1, job=1
max_workers = 4
launch = "$R" start --address "\$RAYDIST_ADDRESS" --node-ip 127.0.0.\$((100 + RAYDIST_LAUNCH_ID)) --num-cpus 1 --resources job=1 --object-store-memory 100000000
CONF
"$R" start --head --port 0 --node-ip 127.0.0.1 --num-cpus 2 --object-store-memory 200000000 \
  --autoscaling-config "$RAYDIST_TMPDIR/autoscale.conf" >/dev/null
ADDR=$(sed -n 's/^gcs=//p' "$ROOT/node-127.0.0.1/cluster")
RAYDIST_ADDRESS="$ADDR" RAYDIST_LOG_LEVEL=0 "$B/bench/autoscale/autoscale_bench" "$@"
t0=$(date +%s.%N)
while "$R" status | grep -q "^  type job: [1-9]"; do sleep 0.2; done
t1=$(date +%s.%N)
echo "scale-down: every job node gone $(awk "BEGIN {printf \"%.1f\", $t1 - $t0}") s after the last result (idle_timeout_s 5)"
"$R" status | sed -n '/^autoscaler:/,/^$/p'
