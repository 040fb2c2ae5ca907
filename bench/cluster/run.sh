#!/bin/sh
# bench/cluster/run.sh [BUILD_DIR] - cross-node figures on one machine:
# starts a head on 127.0.0.1 and a node on 127.0.0.2 (only_b) with 2.6 GB
# stores, measures loopback TCP and the raw gRPC pull (bench/xfer) and then
# spillback tasks/s and 1 GiB object moves through the runtime
# (cluster_bench), all in one run, and stops the cluster.
set -eu
B=${1:-build}
[ $# -gt 0 ] && shift
R="$B/runtime/raydist"
export RAYDIST_TMPDIR="$(mktemp -d /tmp/rdbench.XXXXXX)"
ROOT="$RAYDIST_TMPDIR/raydist-$(id -u)"
trap '"$R" stop >/dev/null 2>&1; rm -rf "$RAYDIST_TMPDIR"' EXIT
"$R" start --head --port 0 --node-ip 127.0.0.1 --num-cpus 2 --object-store-memory 2600000000 >/dev/null
ADDR=$(sed -n 's/^gcs=//p' "$ROOT/node-127.0.0.1/cluster")
"$R" start --address "$ADDR" --node-ip 127.0.0.2 --num-cpus 2 --resources only_b=1 \
  --object-store-memory 2600000000 >/dev/null
if [ -x "$B/bench/xfer/xfer_bench" ]; then
  echo "== raw transfer (bench/xfer) =="
  "$B/bench/xfer/xfer_bench" || true
fi
echo "== through the runtime (bench/cluster) =="
RAYDIST_ADDRESS="$ADDR" RAYDIST_LOG_LEVEL=0 RAYDIST_LOG_TO_DRIVER=0 "$B/bench/cluster/cluster_bench" \
  --metrics "$(cat "$ROOT/node-127.0.0.1/metrics")" --token "$(cat "$ROOT/node-127.0.0.1/token")" "$@" 2>&1 |
  grep -v "^$" || true
"$R" status
