#!/bin/sh
# bench/cluster/actor_hops.sh [BUILD_DIR] [actor_hops args] - actor calls
# from node c of a three-node cluster on this machine (head 127.0.0.1,
# b 127.0.0.2 with only_b, c 127.0.0.3 with only_c) to an actor on c, one
# on b recorded on c, and a detached one on b recorded on the head
# (bench/cluster/actor_hops.c); stops the cluster.  Give another build's
# directory as BUILD_DIR for a side-by-side figure.
set -eu
B=${1:-build}
[ $# -gt 0 ] && shift
R="$B/runtime/raydist"
export RAYDIST_TMPDIR="$(mktemp -d /tmp/rdhops.XXXXXX)"
ROOT="$RAYDIST_TMPDIR/raydist-$(id -u)"
trap '"$R" stop >/dev/null 2>&1; rm -rf "$RAYDIST_TMPDIR"' EXIT
"$R" start --head --port 0 --node-ip 127.0.0.1 --num-cpus 1 >/dev/null
ADDR=$(sed -n 's/^gcs=//p' "$ROOT/node-127.0.0.1/cluster")
"$R" start --address "$ADDR" --node-ip 127.0.0.2 --num-cpus 1 --resources only_b=1 >/dev/null
"$R" start --address "$ADDR" --node-ip 127.0.0.3 --num-cpus 1 --resources only_c=1 >/dev/null
RAYDIST_ADDRESS="$ADDR" RAYDIST_NODE_IP=127.0.0.3 RAYDIST_LOG_LEVEL=0 "$B/bench/cluster/actor_hops" "$@"
