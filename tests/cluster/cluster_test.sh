#!/bin/sh
# tests/cluster/cluster_test.sh RAYDIST TEST_BIN CASE [BATCH_EMBED NPY_CMP]
#
# Starts a real three-node cluster on this machine - a head on 127.0.0.1 and
# nodes on 127.0.0.2 (custom resource only_b) and 127.0.0.3 (only_c), each a
# separate `raydist node` process with its own store and workers, the GCS a
# process of its own - runs one driver case against it through
# RAYDIST_ADDRESS, then checks `raydist status` and that `raydist stop` leaves
# no process and no session behind.  A private RAYDIST_TMPDIR keeps it away
# from any other cluster on the machine.  RD_KEEP_TMP=DIR keeps a copy of that
# directory (logs, sanitizer reports) for a look after the run.
set -u
WATCHDOG=
R=$1
T=$2
CASE=$3
export RAYDIST_TMPDIR="$(mktemp -d /tmp/rdcl.XXXXXX)"
export RAYDIST_HEARTBEAT_TIMEOUT_MS=2000
export RAYDIST_GCS_HANG_MS=4000   # the GCS keeper replaces a silent server sooner than in production (10 s)
# sanitizer builds: every process's report lands here and fails the test
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}log_path=$RAYDIST_TMPDIR/san"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}log_path=$RAYDIST_TMPDIR/san:print_stacktrace=1"
ROOT="$RAYDIST_TMPDIR/raydist-$(id -u)"
fail() {
  echo "FAIL: $*" >&2
  for f in "$ROOT"/node-*/*.log; do echo "== $f" >&2; tail -n 30 "$f" >&2; done
  for f in "$ROOT"/node-*/logs/*.err; do [ -s "$f" ] && { echo "== $f" >&2; tail -n 10 "$f" | cut -c1-300 >&2; }; done
  # the background drivers' own output (hold_start), whatever step failed
  for f in "$RAYDIST_TMPDIR"/hold*.log; do [ -s "$f" ] && { echo "== $f" >&2; tail -n 30 "$f" | cut -c1-300 >&2; }; done
  # a sanitizer's report, which may be why (a process it stopped)
  for f in "$RAYDIST_TMPDIR"/san.*; do [ -s "$f" ] && { echo "== $f" >&2; head -n 60 "$f" >&2; }; done
  exit 1
}
# proc_start PID: its start time (field 22 of /proc/PID/stat), empty when no
# such process.  still_runs PID START: that very process runs (not a zombie,
# not another process given the pid later: pids wrap at 32768 here, and a
# test running beside this one may be given a stopped process's pid).
proc_start() { sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | awk '{print $20}'; }
still_runs() {
  _now=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | awk '{print $1 ":" $20}')
  [ -n "$_now" ] && [ -n "$2" ] && [ "${_now#*:}" = "$2" ] && [ "${_now%%:*}" != Z ]
}
# metric IP NAME: the value of a sample without labels on that node's /metrics
metric() {
  python3 - "$(cat "$ROOT/node-$1/metrics")" "$2" <<'PY'
import sys, urllib.request
for l in urllib.request.urlopen("http://" + sys.argv[1] + "/metrics", timeout=10).read().decode().splitlines():
    if l.startswith(sys.argv[2] + " "):
        print(int(float(l.split()[1])))
PY
}
# hold_start CASE: a driver running CASE in the background, holding what it
# made until $RAYDIST_TMPDIR/done appears (HOLD: its shell pid; PID: its pid,
# which it writes to $RAYDIST_TMPDIR/ready once ready)
hold_start() {
  RD_READY="$RAYDIST_TMPDIR/ready" RD_DONE="$RAYDIST_TMPDIR/done" "$T" "$1" > "$RAYDIST_TMPDIR/hold.log" 2>&1 &
  HOLD=$!
  for _i in $(seq 1 200); do [ -s "$RAYDIST_TMPDIR/ready" ] && break; sleep 0.1; done
  [ -s "$RAYDIST_TMPDIR/ready" ] || { kill $HOLD; cat "$RAYDIST_TMPDIR/hold.log"; fail "the holding driver never got ready"; }
  PID=$(cat "$RAYDIST_TMPDIR/ready")
}
# listed_until TRIES REGEX ARGS...: runs `raydist ARGS...` into $L until a
# line of its answer matches REGEX, every 0.1 s, at most TRIES times (the
# test fails when the command does); 1 when none matched
listed_until() {
  _tries=$1 _re=$2
  shift 2
  for _i in $(seq 1 "$_tries"); do
    "$R" "$@" > "$L" || { cat "$L"; fail "raydist $*"; }
    grep -Eq "$_re" "$L" && return 0
    sleep 0.1
  done
  return 1
}
# sd_targets: the targets of the head's Prometheus file_sd file, sorted, one
# per line ("ip:port node"); nothing when it is missing or malformed
sd_targets() {
  python3 - "$ROOT/node-127.0.0.1/prom_metrics_service_discovery.json" <<'PY' 2>/dev/null
import json, sys
for g in json.load(open(sys.argv[1])):
    assert g["labels"]["raydist_head"] in ("true", "false")
    for t in g["targets"]:
        print(t, g["labels"]["raydist_node"])
PY
}
# sd_wait N: wait up to 5 s for N targets in it
sd_wait() {
  for _i in $(seq 1 50); do [ "$(sd_targets | wc -l)" = "$1" ] && return 0; sleep 0.1; done
  sd_targets; return 1
}
# (the copy is taken before the stop, which removes the node sessions and their logs)
cleanup() { kill "$WATCHDOG" 2>/dev/null; [ -n "${RD_KEEP_TMP:-}" ] && cp -r "$RAYDIST_TMPDIR" "$RD_KEEP_TMP"; "$R" stop >/dev/null 2>&1; rm -rf "$RAYDIST_TMPDIR"; }
trap cleanup EXIT
trap 'exit 1' INT TERM
# CTest's timeout kills only this shell: end the cluster ourselves first
# (sh runs traps only once the foreground command ends, so the watchdog stops
# the cluster itself: a hung driver then sees its node die and exits)
( sleep 200 && echo "FAIL: $CASE: over 200 s, stopping the cluster" >&2 && "$R" stop && kill -TERM $$ ) >/dev/null 2>&1 &
WATCHDOG=$!

# hung_peer: a small libuv pool in every node, as a user may set it
[ "$CASE" = hung_peer ] && export UV_THREADPOOL_SIZE=2
# code_gc: the GCS drops code unused for 1 s (600 s by default); INFO logs to check
HEAD_OPTS=
# burst_claim: a reservation refused as stale is tried again only after 600 s
[ "$CASE" = burst_claim ] && export RAYDIST_PG_RETRY_MS=600000
# job_gc: a job's idle workers stop 0.3 s after its last driver, and the sweep runs every 0.3 s
[ "$CASE" = job_gc ] && export RAYDIST_JOB_QUIET_MS=300 RAYDIST_NODE_GC_MS=300 RAYDIST_LOG_LEVEL=2 &&
  HEAD_OPTS="--log-level 2"
# jobs_http: solo=1, which only the head has (a job asking it waits there)
[ "$CASE" = jobs_http ] && HEAD_OPTS="--resources solo=1"
# a get that cannot fit fails within the create's wait: no fallback region to take it
[ "$CASE" = get_many_remote ] && HEAD_OPTS="--object-store-fallback 0"
# job_resources: two GPUs (accounting only: no device is needed) and big=1 on the head
[ "$CASE" = job_resources ] && HEAD_OPTS="--num-gpus 2 --resources big=1"
# log_rotation: logs rotated at 100 KB, two kept; the workers' lines in
# the node's log (log_rotation) or in their own files (worker_log_rotation)
[ "$CASE" = log_rotation ] && export RAYDIST_LOG_TO_STDERR=1
case "$CASE" in log_rotation | worker_log_rotation) export RAYDIST_ROTATION_MAX_BYTES=100000 RAYDIST_ROTATION_BACKUP_COUNT=2 ;; esac
# the last 3 exited workers (and their files) kept
[ "$CASE" = worker_files_pruned ] && export RAYDIST_WORKERS_EXITED_KEPT=3
# and the nodes their own copies after 1 s
[ "$CASE" = code_gc ] && export RAYDIST_GCS_CODE_TTL_S=1 RAYDIST_CODE_CACHE_TTL_S=1 RAYDIST_LOG_LEVEL=2 &&
  HEAD_OPTS="--log-level 2"
# autoscaler: nodes of type big (big=1, at most two) start when requests
# wait for them and go once idle 3 s (their own timeout; the global one is
# 60 s); one of type warm is kept; one of type never never joins
if [ "$CASE" = autoscaler ]; then
  AS_CONF="$RAYDIST_TMPDIR/autoscale.conf"
  cat > "$AS_CONF" <<EOF
# the autoscaler test's config
idle_timeout_s = 60
interval_ms = 300
launch_timeout_s = 60
upscaling_speed = 1.5

[type big]
resources = CPU=1, big=1
labels = tier=big
max_workers = 2
idle_timeout_s = 3
launch = "$R" start --address "\$RAYDIST_ADDRESS" --node-ip 127.0.0.\$((100 + RAYDIST_LAUNCH_ID)) --num-cpus 1 --resources big=1 --labels tier=big --object-store-memory 100000000
terminate = echo "\$RAYDIST_NODE_TYPE \$RAYDIST_LAUNCH_ID \$RAYDIST_NODE_IP \$RAYDIST_NODE_INDEX" >> "$RAYDIST_TMPDIR/terminated"

[type warm]
resources = CPU=1,warm=1
min_workers = 1
max_workers = 1
launch = "$R" start --address "\$RAYDIST_ADDRESS" --node-ip 127.0.0.19 --num-cpus 1 --resources warm=1 --object-store-memory 100000000

# a kind whose launches never join (a job waits for one for ever)
[type never]
resources = CPU=1, never=1
max_workers = 1
launch = true
EOF
  HEAD_OPTS="--autoscaling-config $AS_CONF"
  # a bad config stops nothing from starting: refused first, with the line
  # (each case: the file's lines, '|' for a newline, then the reason)
  OK='[type x]|resources = CPU=1|launch = true'
  while IFS='~' read -r body want; do
    printf '%s\n' "$body" | tr '|' '\n' > "$RAYDIST_TMPDIR/bad.conf"
    if "$R" start --head --port 0 --node-ip 127.0.0.1 --autoscaling-config "$RAYDIST_TMPDIR/bad.conf" 2>"$RAYDIST_TMPDIR/err"; then
      fail "a head started with a bad autoscaling config: $body"
    fi
    grep -qF "$want" "$RAYDIST_TMPDIR/err" || { cat "$RAYDIST_TMPDIR/err"; fail "no reason '$want' for: $body"; }
    [ -d "$ROOT/node-127.0.0.1" ] && fail "a refused head left a session behind"
  done <<EOF
$OK|max_workers = lots~bad.conf:4: max_workers: 0..1000
colour = red|$OK~bad.conf:1: unknown setting 'colour'
$OK|colour = red~bad.conf:4: unknown node type setting 'colour'
[type x]|resources = CPU=1~[type x] needs resources and launch
$OK|min_workers = 3|max_workers = 1~min_workers 3 is above max_workers 1
[type x]|resources = CPU=-1|launch = true~resources: '-1' for CPU is not a number >= 0
[type x]|resources = CPU=0|launch = true~bad.conf:2: resources: a node with nothing to offer
[type -x]|resources = CPU=1|launch = true~node type name '-x'
$OK|$OK~node type 'x' given twice
idle_timeout_s = 5~no [type NAME] section
[node x]~a section is [type NAME]
$OK|labels = raydist.io/x=1~reserved
interval_ms = 10|$OK~interval_ms: 50..5000
interval_ms = 6000|$OK~interval_ms: 50..5000
upscaling_speed = fast|$OK~bad.conf:1: upscaling_speed: a number, 0..1000
upscaling_speed = -1|$OK~bad.conf:1: upscaling_speed: a number, 0..1000
$OK|idle_timeout_s = 0~bad.conf:4: idle_timeout_s: seconds, 1..2592000
EOF
  rm "$RAYDIST_TMPDIR/bad.conf"
  "$R" start --head --port 0 --node-ip 127.0.0.1 --autoscaling-config "$RAYDIST_TMPDIR/bad.conf" 2>"$RAYDIST_TMPDIR/err" &&
    fail "a head started with a missing autoscaling config"
  grep -q "No such file" "$RAYDIST_TMPDIR/err" || { cat "$RAYDIST_TMPDIR/err"; fail "no reason for a missing config"; }
  "$R" start --address 127.0.0.1:1 --node-ip 127.0.0.9 --autoscaling-config "$AS_CONF" 2>"$RAYDIST_TMPDIR/err" &&
    fail "a node took --autoscaling-config"
  grep -q "goes with --head" "$RAYDIST_TMPDIR/err" || { cat "$RAYDIST_TMPDIR/err"; fail "no reason for --autoscaling-config without --head"; }
fi
# autoscaler_restart: the autoscaler's one node (type late, kept at one)
# joins 2 s after its launch command ends, past the launch timeout of 1 s,
# so it is adopted; logs (at INFO) rotate at 1000 bytes, two kept
if [ "$CASE" = autoscaler_restart ]; then
  export RAYDIST_ROTATION_MAX_BYTES=1000 RAYDIST_ROTATION_BACKUP_COUNT=2
  AS_CONF="$RAYDIST_TMPDIR/autoscale.conf"
  cat > "$AS_CONF" <<EOF
interval_ms = 200
launch_timeout_s = 1

[type late]
resources = CPU=1,late=1
min_workers = 1
max_workers = 1
launch = (sleep 2; "$R" start --address "\$RAYDIST_ADDRESS" --node-ip 127.0.0.40 --num-cpus 1 --resources late=1 --object-store-memory 100000000) > "$RAYDIST_TMPDIR/late.\$RAYDIST_LAUNCH_ID" 2>&1 &
terminate = echo "\$RAYDIST_NODE_TYPE \$RAYDIST_LAUNCH_ID \$RAYDIST_NODE_IP \$RAYDIST_NODE_INDEX" >> "$RAYDIST_TMPDIR/terminated"
EOF
  HEAD_OPTS="--autoscaling-config $AS_CONF --log-level 2"   # INFO lines: more to rotate
fi
"$R" start --head --port 0 --node-ip 127.0.0.1 --num-cpus 2 --object-store-memory 700000000 $HEAD_OPTS >/dev/null || fail "head"
ADDR=$(sed -n 's/^gcs=//p' "$ROOT/node-127.0.0.1/cluster")
[ -n "$ADDR" ] || fail "no GCS address"
"$R" start --address "$ADDR" --node-ip 127.0.0.2 --num-cpus 2 --resources only_b=1,pool=1 \
  --labels "zone=west,gpu=A100" --object-store-memory 700000000 >/dev/null || fail "node b"
"$R" start --address "$ADDR" --node-ip 127.0.0.3 --num-cpus 2 --resources only_c=1,pool=1 \
  --labels "zone=east, market=spot" >/dev/null || fail "node c"
# the autoscaler's warm (or late) node (min_workers 1) joins on its own
AS_IP=none
[ "$CASE" = autoscaler ] && AS_IP=127.0.0.19 AS_TYPE=warm
[ "$CASE" = autoscaler_restart ] && AS_IP=127.0.0.40 AS_TYPE=late
if [ "$AS_IP" != none ]; then
  for _i in $(seq 1 100); do "$R" status | grep -q "4 nodes alive" && break; sleep 0.2; done
  "$R" status > "$RAYDIST_TMPDIR/status" || fail "status"
  grep -q "4 nodes alive" "$RAYDIST_TMPDIR/status" || { cat "$RAYDIST_TMPDIR/status"; fail "status: the $AS_TYPE node did not join"; }
  grep -Eq "^labels: node [0-9]+ raydist.io/launch-id=[0-9]+,raydist.io/node-type=$AS_TYPE\$" "$RAYDIST_TMPDIR/status" ||
    { cat "$RAYDIST_TMPDIR/status"; fail "status: no $AS_TYPE node labels"; }
  sed -i "/raydist.io\/node-type=$AS_TYPE\$/d; /$AS_IP/d; s/4 nodes alive/3 nodes alive/" "$RAYDIST_TMPDIR/status"
else
  "$R" status > "$RAYDIST_TMPDIR/status" || fail "status"
fi
grep -q "3 nodes alive" "$RAYDIST_TMPDIR/status" || { cat "$RAYDIST_TMPDIR/status"; fail "status: not 3 nodes"; }
# each node registered its metrics endpoint, on its own address
for ip in 127.0.0.1 127.0.0.2 127.0.0.3; do
  grep -Eq "^metrics: node [0-9]+ http://$ip:[0-9]+/metrics$" "$RAYDIST_TMPDIR/status" ||
    { cat "$RAYDIST_TMPDIR/status"; fail "status: no metrics endpoint of $ip"; }
done
# the head's service-discovery file lists the same three endpoints (four
# with the autoscaler's warm node, left out of the status copy)
NSD=3
[ "$AS_IP" != none ] && NSD=4
sd_wait $NSD || fail "service discovery: not $NSD targets"
sd_targets | grep -v "^$AS_IP:" | awk '{print "metrics: node " $2 " http://" $1 "/metrics"}' | sort > "$RAYDIST_TMPDIR/sd"
grep '^metrics: ' "$RAYDIST_TMPDIR/status" | sort | cmp -s - "$RAYDIST_TMPDIR/sd" ||
  { cat "$RAYDIST_TMPDIR/sd" "$RAYDIST_TMPDIR/status"; fail "service discovery differs from status"; }
# and its labels, canonical (the head has none)
grep -Eq "^labels: node [0-9]+ gpu=A100,zone=west$" "$RAYDIST_TMPDIR/status" &&
  grep -Eq "^labels: node [0-9]+ market=spot,zone=east$" "$RAYDIST_TMPDIR/status" &&
  [ "$(grep -c '^labels:' "$RAYDIST_TMPDIR/status")" = 2 ] || { cat "$RAYDIST_TMPDIR/status"; fail "status: labels"; }
export RAYDIST_ADDRESS="$ADDR"

case "$CASE" in
  bad_token)
    # a session that points at the head's socket but holds a wrong token
    FAKE="$ROOT/node-127.0.0.9"
    mkdir -m 700 "$FAKE"
    printf 'gcs=%s\nip=127.0.0.9\nhead=0\n' "$ADDR" > "$FAKE/cluster"
    echo 0123456789abcdef0123456789abcdef > "$FAKE/token"
    ln -s "$ROOT/node-127.0.0.1/node.sock" "$FAKE/node.sock"
    RAYDIST_NODE_IP=127.0.0.9 "$T" bad_token || fail "bad_token"
    rm -rf "$FAKE"
    # joining with a wrong token or address: a clear error, nothing started
    if "$R" start --address "$ADDR" --node-ip 127.0.0.4 --token wrongwrongwrongwrong 2>"$RAYDIST_TMPDIR/err"; then
      fail "a node joined with a wrong token"
    fi
    grep -qi "token" "$RAYDIST_TMPDIR/err" || { cat "$RAYDIST_TMPDIR/err"; fail "no word about the token"; }
    if "$R" start --address 127.0.0.1:1 --node-ip 127.0.0.5 --token x 2>"$RAYDIST_TMPDIR/err"; then
      fail "a node joined a cluster that does not exist"
    fi
    [ -d "$ROOT/node-127.0.0.4" ] && fail "a refused node left a session behind"
    # the cluster still serves
    "$R" status | grep -q "3 nodes alive" || fail "cluster hurt by bad joins"
    ;;
  node_death|actor_node_death|actor_host_gone|object_lost|pg_node_death|lineage|lineage_eager|nodes)
    "$T" "$CASE" || fail "$CASE"
    if [ "$CASE" = lineage ]; then
      # the head pulled the lost results from the dead node again, backing
      # off, until it was answered (not once, and not in a tight loop)
      RETRIES=$(metric 127.0.0.1 raydist_object_pull_retries_total)
      echo "pulls retried by the head: $RETRIES"
      [ "$RETRIES" -ge 1 ] && [ "$RETRIES" -le 40 ] || fail "pull retries on the head: $RETRIES"
    fi
    sleep 3
    "$R" status > "$RAYDIST_TMPDIR/status" || fail "status after death"
    grep -q "2 nodes alive, 1 dead" "$RAYDIST_TMPDIR/status" || { cat "$RAYDIST_TMPDIR/status"; fail "death not seen"; }
    sd_wait 2 || fail "service discovery still lists the dead node"
    ;;
  batch_embed)
    # the main job on the cluster: three replicas (one per node by the
    # default policy), the same embeddings as the engine run directly
    BE=$4
    CMP=$5
    "$BE" --corpus wordnet --limit 400 --batch 32 --direct --out "$RAYDIST_TMPDIR/direct.npy" \
      > "$RAYDIST_TMPDIR/d.log" 2>&1 || { cat "$RAYDIST_TMPDIR/d.log"; fail "direct run"; }
    "$BE" --corpus wordnet --limit 400 --batch 32 --replicas 3 --address "$ADDR" --out "$RAYDIST_TMPDIR/c.npy" \
      > "$RAYDIST_TMPDIR/c.log" 2>&1 || { cat "$RAYDIST_TMPDIR/c.log"; fail "cluster run"; }
    grep -q "^summary: items=400 " "$RAYDIST_TMPDIR/c.log" || { cat "$RAYDIST_TMPDIR/c.log"; fail "no summary"; }
    "$CMP" "$RAYDIST_TMPDIR/direct.npy" "$RAYDIST_TMPDIR/c.npy" 1e-5 || fail "cluster output differs from the engine's"
    "$R" status | grep -q "3 nodes alive" || fail "cluster hurt"
    # the replicas' application metrics: the 400 sentences, summed over the
    # nodes' /metrics, and as many batches in the histograms as calls made
    python3 - "$ROOT"/node-127.0.0.*/metrics <<'PY' || fail "batch_embed: the Embedders' metrics"
import sys, urllib.request
sent = batches = 0
for f in sys.argv[1:]:
    page = urllib.request.urlopen("http://" + open(f).read().strip() + "/metrics", timeout=10).read().decode()
    for line in page.splitlines():
        if line.startswith('embedder_sentences_total{device="cpu"} '): sent += float(line.split()[-1])
        if line.startswith('embedder_batch_seconds_count{device="cpu"} '): batches += float(line.split()[-1])
assert sent == 400 and batches == 13, (sent, batches)   # 400 in batches of 32: 13
print("batch_embed: the Embedders counted 400 sentences in 13 batches")
PY
    ;;
  two_jobs)
    # two programs at once: this test binary and a copy with a byte appended
    # (another file, another code hash), each checking that its tasks and
    # actors run its own executable on every node; then both as drivers on a
    # fourth node, d, whose pool of 2 workers they must share
    RAYDIST_LOG_LEVEL=2 "$R" start --address "$ADDR" --node-ip 127.0.0.4 --num-cpus 2 --max-workers 2 \
      --resources only_d=1 >/dev/null || fail "node d"
    export RD_CLUSTER_NODES=4
    OTHER="$RAYDIST_TMPDIR/other_job"
    cp "$T" "$OTHER" && printf 'x' >> "$OTHER" && chmod +x "$OTHER" || fail "copy"
    export RD_TWO_JOBS_DIR="$RAYDIST_TMPDIR"
    for phase in two_jobs two_jobs_local; do
      [ $phase = two_jobs_local ] && export RAYDIST_NODE_IP=127.0.0.4
      RD_TWO_JOBS_TAG=a "$T" $phase > "$RAYDIST_TMPDIR/a.log" 2>&1 &
      A=$!
      RD_TWO_JOBS_TAG=b "$OTHER" $phase > "$RAYDIST_TMPDIR/b.log" 2>&1 &
      B=$!
      wait $A; RA=$?
      wait $B; RB=$?
      cat "$RAYDIST_TMPDIR/a.log" "$RAYDIST_TMPDIR/b.log"
      [ $RA -eq 0 ] && [ $RB -eq 0 ] || fail "$phase (a: $RA, b: $RB)"
    done
    unset RAYDIST_NODE_IP
    grep -q "to make room for job" "$ROOT/node-127.0.0.4/node.log" || fail "node d never made room for a job"
    # the first program again, alone: the nodes reuse or restart its workers
    "$T" custom_resources || fail "the first job after both"
    ;;
  bad_node)
    # node c cannot start this program's workers (they exit at once there):
    # from the head its tasks go to a and b, from c itself they spill
    "$T" bad_node || fail "bad_node from the head"
    RAYDIST_NODE_IP=127.0.0.3 "$T" bad_node || fail "bad_node from node c"
    grep -q "cannot start workers of job" "$ROOT/node-127.0.0.1/node.log" || fail "the head never avoided node c"
    grep -q "cannot start workers of job" "$ROOT/node-127.0.0.3/node.log" || fail "node c never avoided itself"
    [ "$(metric 127.0.0.1 raydist_job_nodes_avoided)" -ge 1 ] || fail "the head's metrics show no avoided node"
    ;;
  big_object)
    "$T" big_object || fail "big_object"
    [ "$(metric 127.0.0.2 raydist_object_store_restores_total)" -ge 1 ] || fail "node b read no spilled object back"
    [ "$(metric 127.0.0.2 raydist_object_store_fallback_allocations_total)" -ge 1 ] || fail "node b made no fallback allocation"
    ;;
  respill)
    "$T" respill || fail "respill"
    [ "$(metric 127.0.0.1 raydist_requests_respilled_total)" -ge 1 ] || fail "the head's metrics show no respill"
    [ "$(metric 127.0.0.1 raydist_spills_refused_total)" -ge 1 ] || fail "the head's metrics show no refused spill"
    ;;
  memory_monitor)
    # node d kills a task spilled to it for memory (its own limit only)
    RAYDIST_MEMORY_LIMIT_BYTES=419430400 RAYDIST_MEMORY_MONITOR_MS=50 "$R" start --address "$ADDR" \
      --node-ip 127.0.0.4 --num-cpus 2 --resources only_d=1 >/dev/null || fail "node d"
    export RD_CLUSTER_NODES=4
    "$T" memory_remote || fail "memory_remote"
    grep -q "killed by the memory monitor" "$ROOT/node-127.0.0.4/node.log" || fail "node d logged no kill"
    # and keeps the worker among those that exited, with why
    python3 - "$(cat "$ROOT/node-127.0.0.4/metrics")" <<'PY' || fail "memory_monitor: the killed worker not kept as exited"
import json, sys, urllib.request
j = json.load(urllib.request.urlopen("http://%s/api/workers" % sys.argv[1], timeout=10))
oom = [e for e in j["exited"] if e["exit_type"] == "NODE_OUT_OF_MEMORY"]
assert oom and oom[0]["exit_detail"].startswith("killed by the memory monitor"), j
assert oom[0]["end_ms"] >= oom[0]["launch_ms"] > 0, oom
PY
    # and says so as a cluster event of node d's
    L="$RAYDIST_TMPDIR/mm_events"
    listed_until 50 "ERROR +RAYLET +4  Worker [0-9]+ \(pid [0-9]+, job [0-9]+\) was killed by the memory monitor: the node's workers hold [0-9]+ MiB, over its limit of 400 MiB" \
      list cluster-events || { cat "$L"; fail "memory_monitor: the kill is not a cluster event"; }
    ;;
  detached)
    # detached actors and placement groups outlive the driver that made them; later drivers use,
    # restart and kill them by name
    for phase in detached_make detached_use detached_gone; do
      "$T" $phase || fail "$phase"
    done
    # the GCS actor table, as status prints it: "later" still serves
    "$R" status > "$RAYDIST_TMPDIR/status" || fail "status"
    grep -q "^named actors: 1 live, 3 dead" "$RAYDIST_TMPDIR/status" &&
      grep -Eq "^[0-9a-f]{16} later +Tally +1 +alive" "$RAYDIST_TMPDIR/status" ||
      { cat "$RAYDIST_TMPDIR/status"; fail "status does not show the detached actor"; }
    # each driver was a job of its own, ended when it left (the last one's end lands shortly after)
    for i in 1 2 3 4 5 6 7 8 9 10; do
      "$R" status > "$RAYDIST_TMPDIR/status" || fail "status"
      grep -q "^jobs: 0 running, 3 ended" "$RAYDIST_TMPDIR/status" && break
      sleep 0.3
    done
    grep -q "^jobs: 0 running, 3 ended" "$RAYDIST_TMPDIR/status" &&
      grep -Eq "^[0-9]+ +1 +[0-9]+ +[0-9a-f]{16} .*ended after [0-9.]+ s: its drivers exited" "$RAYDIST_TMPDIR/status" ||
      { cat "$RAYDIST_TMPDIR/status"; fail "status does not show the three jobs ended"; }
    # the head's dashboard says the same, as JSON and as a page
    python3 - "$(cat "$ROOT/node-127.0.0.1/metrics")" <<'PY' || fail "dashboard"
import json, sys, urllib.request
from html.parser import HTMLParser
base = "http://" + sys.argv[1]
d = json.load(urllib.request.urlopen(base + "/api/cluster", timeout=10))
c = d["cluster"]
assert d["node"]["index"] == 1 and c["gcs_error"] is None, d
alive = [n for n in c["nodes"] if n["state"] == "alive"]
assert len(alive) == 3 and all(n["dashboard"].startswith("http://" + n["ip"] + ":") for n in alive), c["nodes"]
assert [a["name"] for a in c["actors"] if a["state"] == "alive"] == ["later"], c["actors"]
assert len(c["jobs"]) == 3 and all(j["end_ms"] > 0 for j in c["jobs"]), c["jobs"]
class Rows(HTMLParser):
    def __init__(self):
        super().__init__(); self.table = None; self.rows = {}
    def handle_starttag(self, tag, attrs):
        if tag == "table": self.table = dict(attrs).get("id")
        if tag == "tr" and self.table: self.rows[self.table] = self.rows.get(self.table, 0) + 1
page = urllib.request.urlopen(base + "/", timeout=10).read().decode()
r = Rows(); r.feed(page)
assert r.rows.get("nodes") == 4 and r.rows.get("actors") == 2 and r.rows.get("jobs") == 4, r.rows
# the heading's links to this node's pages answer (the timeline is off here: 404)
class Links(HTMLParser):
    def __init__(self):
        super().__init__(); self.links = []
    def handle_starttag(self, tag, attrs):
        h = dict(attrs).get("href") if tag == "a" else None
        if h and h.startswith("/"): self.links.append(h)
l = Links(); l.feed(page)
assert {"/metrics", "/timeline", "/tasks", "/actors", "/objects", "/api/cluster"} <= set(l.links), l.links
for h in l.links:
    if h != "/timeline": assert urllib.request.urlopen(base + h, timeout=10).status == 200, h
# every node serves its own dashboard
for n in alive:
    assert json.load(urllib.request.urlopen(n["dashboard"] + "api/cluster", timeout=10))["node"]["index"] == n["index"]
print("dashboard: 3 nodes, the live actor and 3 ended jobs, on every node")
PY
    ;;
  detached_node_death)
    # detached actors made by a driver on node c are recorded on the head,
    # so they outlive node c itself (killed by the second driver)
    export RAYDIST_NODE_IP=127.0.0.3
    hold_start detached_node_make
    unset RAYDIST_NODE_IP
    # its calls to far-b (on b, recorded on the head) cross one link: the
    # head bridges nothing (it would hold two channels relaying them)
    H=$(metric 127.0.0.1 raydist_link_channels) B=$(metric 127.0.0.2 raydist_link_channels)
    echo "link channels while a driver on c holds far-b: head $H, b $B"
    [ "$H" = 0 ] && [ "$B" -ge 1 ] || { cat "$RAYDIST_TMPDIR/hold.log"; fail "far-b's calls are not direct: head $H, b $B"; }
    touch "$RAYDIST_TMPDIR/done"
    wait $HOLD || { cat "$RAYDIST_TMPDIR/hold.log"; fail "detached_node_make"; }
    cat "$RAYDIST_TMPDIR/hold.log"
    "$T" detached_node_use || fail "detached_node_use"
    ;;
  gcs_restart)
    # the GCS server killed under a running driver: its keeper starts it
    # again on the same port and table log; the nodes keep their indexes
    export RD_GCS_PID_FILE="$ROOT/node-127.0.0.1/gcs.pid"
    "$T" gcs_restart_before || fail "gcs_restart_before"
    grep -q "restart 1 in" "$ROOT/node-127.0.0.1/gcs.log" || fail "the keeper did not restart the GCS"
    grep -q "recovered 3 live nodes" "$ROOT/node-127.0.0.1/gcs.log" || fail "the GCS recovered no nodes"
    "$R" status > "$RAYDIST_TMPDIR/status" || fail "status after the restart"
    grep -q "3 nodes alive" "$RAYDIST_TMPDIR/status" &&
      grep -Eq "^[0-9a-f]{16} survivor +Tally +[0-9]+ +alive" "$RAYDIST_TMPDIR/status" &&
      grep -Eq "^[0-9a-f]{16} born-in-outage +Tally +[0-9]+ +alive" "$RAYDIST_TMPDIR/status" ||
      { cat "$RAYDIST_TMPDIR/status"; fail "status after the restart"; }
    "$T" gcs_restart_after || fail "gcs_restart_after"
    # a node that joins after the restart gets a new index
    "$R" start --address "$ADDR" --node-ip 127.0.0.4 --num-cpus 1 >/dev/null || fail "node d after the restart"
    "$R" status | grep -q "4 nodes alive" || fail "node d not listed"
    # a server that hangs (stopped: it neither dies nor answers) is killed
    # by its keeper and started again with its tables
    HUNG=$(cat "$RD_GCS_PID_FILE")
    kill -STOP "$HUNG" || fail "stop the GCS server"
    T0=$(date +%s.%N)
    NEW=$HUNG
    for i in $(seq 1 100); do
      NEW=$(cat "$RD_GCS_PID_FILE" 2>/dev/null || echo "$HUNG")
      [ "$NEW" != "$HUNG" ] && "$R" status >/dev/null 2>&1 && break
      sleep 0.2
    done
    [ "$NEW" != "$HUNG" ] || fail "the keeper did not replace a hung server"
    echo "hung GCS server $HUNG replaced by $NEW, serving, after $(awk "BEGIN { print $(date +%s.%N) - $T0 }") s"
    grep -q "has shown no life" "$ROOT/node-127.0.0.1/gcs.log" || fail "the keeper did not say why"
    "$R" status | grep -q "4 nodes alive" || fail "status after the hung server was replaced"
    # the keeper killed (the server goes with it): the dashboard still
    # answers, with the node's own part and the GCS's error
    KEEPER=$(awk '$1 == "gcs" {print $2}' "$ROOT/node-127.0.0.1/pids")
    SERVER=$(cat "$RD_GCS_PID_FILE")
    SERVER_START=$(proc_start "$SERVER")
    kill -9 "$KEEPER" || fail "kill the keeper"
    for i in 1 2 3 4 5 6 7 8 9 10; do still_runs "$SERVER" "$SERVER_START" || break; sleep 0.2; done
    still_runs "$SERVER" "$SERVER_START" && fail "the GCS server outlived its keeper"
    python3 - "$(cat "$ROOT/node-127.0.0.1/metrics")" <<'PY' || fail "dashboard without a GCS"
import json, sys, time, urllib.request
base = "http://" + sys.argv[1]
t0 = time.time()
d = json.load(urllib.request.urlopen(base + "/api/cluster", timeout=15))
c = d["cluster"]
assert c["gcs_error"] and c["actors"] == [] and len(c["nodes"]) >= 3, c   # d may not be in the view yet
page = urllib.request.urlopen(base + "/", timeout=15).read().decode()
assert "The GCS did not answer" in page and 'id="nodes"' in page
print(f"dashboard without a GCS: {c['gcs_error']!r} after {time.time() - t0:.2f} s")
PY
    ;;
  lease_reuse)
    export RD_PIDS_FILE="$RAYDIST_TMPDIR/pids"
    "$T" lease_reuse || fail "first driver"
    sleep 0.5
    "$T" lease_reuse || fail "second driver"
    ;;
  fuzz_link)
    # a peer that knows the token sends random link frames to node b (and
    # one that does not, a share of the time); every node keeps serving
    FZ=$4
    PORT=$(sed -n 's/^link_port=//p' "$ROOT/node-127.0.0.2/cluster")
    TOKEN=$(cat "$ROOT/node-127.0.0.2/token")
    [ -n "$PORT" ] && [ -n "$TOKEN" ] || fail "no link port or token for node b"
    "$FZ" link 127.0.0.2 "$PORT" "$TOKEN" || fail "$CASE"
    # and `raydist job --address`'s tool link: wrong requests, a node's frame, many at once
    "$FZ" joblink 127.0.0.2 "$PORT" "$TOKEN" || fail "$CASE: joblink"
    "$T" strategies || fail "cluster hurt by the fuzzed link"
    "$R" status | grep -q "3 nodes alive" || fail "cluster hurt"
    ;;
  code_gc)
    # code_status PATTERN: wait up to 10 s for `raydist status`'s code line to match
    code_status() {
      for i in $(seq 1 50); do
        "$R" status > "$RAYDIST_TMPDIR/status" || fail "status"
        grep -Eq "^code: $1" "$RAYDIST_TMPDIR/status" && return 0
        sleep 0.2
      done
      cat "$RAYDIST_TMPDIR/status"; fail "code_gc: no code line matching '$1'"
    }
    # copies NODE: how many programs node NODE keeps in its session's code/
    copies() { ls "$ROOT/node-$1/code" 2>/dev/null | grep -Ec '^[0-9a-f]{64}$'; }
    "$T" code_keep || fail "code_keep"
    [ "$(copies 127.0.0.2)" = 1 ] && [ "$(copies 127.0.0.3)" = 1 ] || fail "code_gc: nodes b and c did not fetch the program"
    # its job ended, but the detached actor (recorded on the head, hosted on c) holds the code,
    # in the GCS and on c; b, whose worker only idles, drops its copy
    sleep 3
    code_status "1 blob, [0-9.]+ MiB, 1 in use; 0 collected \(0.0 MiB\); unused code is dropped after 1 s"
    [ "$(copies 127.0.0.3)" = 1 ] || fail "code_gc: node c dropped the code of the actor it hosts"
    [ "$(copies 127.0.0.2)" = 0 ] || fail "code_gc: node b kept its unused copy"
    grep -q "dropped this node's copy of code" "$ROOT/node-127.0.0.2/node.log" || fail "code_gc: node b logged no drop"
    "$T" code_kill || fail "code_kill"
    code_status "0 blobs, 0.0 MiB, 0 in use; 1 collected \([0-9.]+ MiB\)"
    # the head's dashboard says the same, as JSON and on the page
    python3 - "$(cat "$ROOT/node-127.0.0.1/metrics")" <<'PY' || fail "code_gc: dashboard"
import json, sys, urllib.request
base = "http://" + sys.argv[1]
c = json.load(urllib.request.urlopen(base + "/api/cluster", timeout=10))["cluster"]["code"]
assert c["blobs"] == 0 and c["in_use"] == 0 and c["collected"] == 1 and c["collected_bytes"] > 0 and c["ttl_s"] == 1, c
page = urllib.request.urlopen(base + "/", timeout=10).read().decode()
assert '<p id="code">GCS code table: 0 blobs, 0.0 MiB, 0 in use; 1 collected' in page, page[-400:]
PY
    for i in $(seq 1 50); do [ "$(copies 127.0.0.3)" = 0 ] && break; sleep 0.2; done
    [ "$(copies 127.0.0.3)" = 0 ] || fail "code_gc: node c kept the dead actor's code"
    grep -Eq "gcs: code [0-9a-f]{64} collected \([0-9]+ bytes, unused for [0-9]+ s\)" "$ROOT/node-127.0.0.1/gcs.log" ||
      fail "code_gc: the GCS logged no collection"
    # a node that never had it, then the same program again: the head stores it anew, and b
    # fetches it again (its idle job there has no code now)
    "$R" start --address "$ADDR" --node-ip 127.0.0.4 --num-cpus 1 --resources only_d=1 >/dev/null || fail "node d"
    RD_CLUSTER_NODES=4 "$T" code_again || fail "code_again"
    [ "$(copies 127.0.0.2)" = 1 ] || fail "code_gc: node b did not fetch the program again"
    grep -q "since its last run: uploading it again" "$ROOT/node-127.0.0.1/node.log" || fail "code_gc: the head did not upload the code again"
    code_status "1 blob, [0-9.]+ MiB, [01] in use; 1 collected"
    ;;
  actor_respill)
    "$T" "$CASE" || fail "$CASE"
    # c gave y back once: the head took c's newer view of b's room, and did
    # not send y straight back to c from its own older one
    N=$(metric 127.0.0.3 raydist_requests_respilled_total)
    [ "$N" = 1 ] || fail "actor_respill: node c gave the actor back $N times"
    # and kept no dead record of it: c's dead are its blocker and z, killed
    D=$(metric 127.0.0.3 'raydist_actors{state="dead"}')
    [ "$D" = 2 ] || fail "actor_respill: node c counts $D dead actors, not 2 (its blocker and z)"
    ;;
  job_gc)
    # jobs_kept IP: how many jobs (programs) that node keeps
    jobs_kept() {
      python3 - "$(cat "$ROOT/node-$1/metrics")" <<'PY'
import sys, urllib.request
for l in urllib.request.urlopen("http://" + sys.argv[1] + "/metrics", timeout=10).read().decode().splitlines():
    if l.startswith('raydist_node_interned{kind="jobs"} '):
        print(int(float(l.split()[1])))
PY
    }
    # jobs_gone: wait up to 10 s for no node to keep a job
    jobs_gone() {
      for _i in $(seq 1 100); do
        [ "$(jobs_kept 127.0.0.1)$(jobs_kept 127.0.0.2)$(jobs_kept 127.0.0.3)" = 000 ] && return 0
        sleep 0.1
      done
      fail "job_gc: jobs kept after their runs: $(jobs_kept 127.0.0.1)/$(jobs_kept 127.0.0.2)/$(jobs_kept 127.0.0.3)"
    }
    # three programs (copies of the test driver), each a job on every node
    # it ran tasks on; all are freed once their workers have stopped
    for i in 1 2 3; do
      cp "$T" "$RAYDIST_TMPDIR/drv$i"
      "$RAYDIST_TMPDIR/drv$i" strategies > "$RAYDIST_TMPDIR/drv.log" 2>&1 || { cat "$RAYDIST_TMPDIR/drv.log"; fail "drv$i"; }
    done
    jobs_gone
    for i in 1 2 3; do
      grep -q "drv$i): no driver, worker, request or actor here any more: freed" "$ROOT/node-127.0.0.1/node.log" ||
        fail "job_gc: the head did not free drv$i's job"
    done
    grep -q "no driver, worker, request or actor here any more: freed" "$ROOT/node-127.0.0.2/node.log" ||
      fail "job_gc: node b did not free its job"
    # a freed program runs again as a new job, and goes again
    "$RAYDIST_TMPDIR/drv1" strategies > "$RAYDIST_TMPDIR/drv.log" 2>&1 || { cat "$RAYDIST_TMPDIR/drv.log"; fail "drv1 again"; }
    jobs_gone
    ;;
  jobs)
    # drivers submitted to the head's node, run detached, their output kept
    job_id() { sed -n 's/^job \([0-9]*\) submitted.*/\1/p'; }
    OK=$("$R" job submit --name ok -- "$T" job_ok | job_id)
    BAD=$("$R" job submit --name bad -- "$T" job_bad | job_id)
    LONG=$("$R" job submit --name long -- "$T" job_long | job_id)
    NOPE=$("$R" job submit -- /nonexistent/program | job_id)
    [ -n "$OK" ] && [ -n "$BAD" ] && [ -n "$LONG" ] && [ -n "$NOPE" ] || fail "jobs: no job ids"
    "$R" job wait "$OK" --timeout 120 || { "$R" job logs "$OK"; fail "jobs: job ok did not succeed"; }
    "$R" job wait "$BAD" --timeout 120 && fail "jobs: job bad succeeded"
    "$R" job wait "$NOPE" --timeout 30 && fail "jobs: a missing program succeeded"
    "$R" job list > "$RAYDIST_TMPDIR/jobs" || fail "job list"
    cat "$RAYDIST_TMPDIR/jobs"
    grep -Eq "^$OK +ok +SUCCEEDED" "$RAYDIST_TMPDIR/jobs" || fail "jobs: ok not listed as succeeded"
    grep -Eq "^$BAD +bad +FAILED \(exit 3\)" "$RAYDIST_TMPDIR/jobs" || fail "jobs: bad not listed as failed with 3"
    grep -Eq "^$NOPE +- +FAILED \(exit 127\)" "$RAYDIST_TMPDIR/jobs" || fail "jobs: missing program not exit 127"
    grep -Eq "^$LONG +long +RUNNING" "$RAYDIST_TMPDIR/jobs" || fail "jobs: long not running"
    "$R" job logs "$OK" > "$RAYDIST_TMPDIR/log" || fail "job logs"
    grep -q "job ok done (RAYDIST_JOB_ID=$OK)" "$RAYDIST_TMPDIR/log" || { cat "$RAYDIST_TMPDIR/log"; fail "jobs: no output of ok"; }
    grep -q "ip=127.0.0.2) job task says hi" "$RAYDIST_TMPDIR/log" || { cat "$RAYDIST_TMPDIR/log"; fail "jobs: no worker output in the log"; }
    "$R" job logs "$BAD" | grep -q "job bad: giving up" || fail "jobs: no stderr of bad"
    "$R" job logs "$NOPE" | grep -q "cannot run /nonexistent/program" || fail "jobs: no reason for the missing program"
    "$R" job status "$BAD" | grep -qx "job $BAD: FAILED (exit 3)" || fail "jobs: status of bad"
    "$R" job list --all | awk '/^node /{n=$2} /^[0-9]/{print n, $1, $2}' | grep -qx "127.0.0.1 $BAD bad" || fail "jobs: list --all"
    # each start and end is a cluster event of the head's (Ray's JOBS events)
    L="$RAYDIST_TMPDIR/job_events"
    listed_until 50 "ERROR +JOBS +1  Completed job $BAD \(bad\) with a status FAILED \(exit 3\)\.$" list cluster-events --state error ||
      { cat "$L"; fail "jobs: bad's end is not a cluster event"; }
    "$R" list cluster-events --limit 1000 > "$L" || fail "jobs: raydist list cluster-events"
    for e in "INFO +JOBS +1  Started job $OK \(ok\), entrypoint pid [0-9]+\." "INFO +JOBS +1  Completed job $OK \(ok\) with a status SUCCEEDED\." \
      "INFO +JOBS +1  Started job $LONG \(long\), entrypoint pid [0-9]+\." "ERROR +JOBS +1  Completed job $NOPE \(-?\) with a status FAILED \(exit 127\)\."; do
      grep -Eq "$e\$" "$L" || { cat "$L"; fail "jobs: no cluster event '$e'"; }
    done
    grep -q "Completed job $LONG " "$L" && { cat "$L"; fail "jobs: long, still running, said completed"; }
    # --working-dir: the job runs in a copy of it
    WD="$RAYDIST_TMPDIR/wd"
    mkdir -p "$WD/sub"
    echo payload > "$WD/sub/data.txt"
    printf '#!/bin/sh\necho "cwd=$(pwd)"\ncat sub/data.txt\necho changed > sub/data.txt\n' > "$WD/run.sh"
    chmod +x "$WD/run.sh"
    "$R" job submit --working-dir "$WD" --follow -- ./run.sh > "$RAYDIST_TMPDIR/wdout" || fail "jobs: --working-dir"
    grep -Eqx "cwd=$ROOT/node-127.0.0.1/jobs/[0-9]+/wd" "$RAYDIST_TMPDIR/wdout" && grep -qx payload "$RAYDIST_TMPDIR/wdout" ||
      { cat "$RAYDIST_TMPDIR/wdout"; fail "jobs: not run in a copy of its working directory"; }
    grep -qx payload "$WD/sub/data.txt" || fail "jobs: the job changed the original of its working directory"
    WDJ=$(sed -n 's/^job \([0-9]*\) submitted.*/\1/p' "$RAYDIST_TMPDIR/wdout")
    [ -d "$ROOT/node-127.0.0.1/jobs/$WDJ/wd/sub" ] || fail "jobs: no working copy of job $WDJ"
    "$R" job delete "$WDJ" | grep -qx "job $WDJ deleted" || fail "jobs: delete"
    [ -e "$ROOT/node-127.0.0.1/jobs/$WDJ" ] && fail "jobs: the deleted job's directory is there"
    # submit --follow: the output as it comes, then the end and its status
    "$R" job submit --follow -- /bin/sh -c 'echo one; sleep 0.3; echo two; exit 4' > "$RAYDIST_TMPDIR/fol" && fail "jobs: --follow of a failing job exits 0"
    tr '\n' ' ' < "$RAYDIST_TMPDIR/fol" | grep -Eq "^job [0-9]+ submitted.* one two job [0-9]+: FAILED \(exit 4\) \$" || { cat "$RAYDIST_TMPDIR/fol"; fail "jobs: submit --follow"; }
    # stop: its process group ends, and it is listed as stopped
    for i in $(seq 1 100); do "$R" job logs "$LONG" | grep -q "job long started" && break; sleep 0.1; done
    LPID=$("$R" job list | awk -v id="$LONG" '$1 == id {print $4}')
    LPID_START=$(proc_start "$LPID")
    [ -n "$LPID_START" ] || fail "jobs: long's process $LPID is not running"
    "$R" job stop "$LONG" --timeout 10 || fail "job stop"
    "$R" job list | grep -Eq "^$LONG +long +STOPPED" || fail "jobs: long not listed as stopped"
    still_runs "$LPID" "$LPID_START" && fail "jobs: the stopped job's process $LPID lives on"
    # its keeper told to end (SIGTERM, as `pkill raydist` does): the job is
    # stopped as `job stop` does, its output kept, its end recorded
    keeper_of() { sed -n 's/^keeper=//p' "$ROOT/node-127.0.0.1/jobs/$1/info"; }
    quiet_job() { "$R" job submit --name "$1" -- /bin/sh -c 'echo up; while :; do sleep 0.1; done' | job_id; }
    wait_up() { for i in $(seq 1 100); do "$R" job logs "$1" | grep -qx up && return 0; sleep 0.1; done; return 1; }
    KT=$(quiet_job kterm)
    wait_up "$KT" || fail "jobs: job kterm did not start"
    KT_PID=$("$R" job list | awk -v id="$KT" '$1 == id {print $4}')
    KT_START=$(proc_start "$KT_PID")
    kill -TERM "$(keeper_of "$KT")"
    "$R" job wait "$KT" --timeout 10 2>/dev/null
    "$R" job status "$KT" | grep -qx "job $KT: STOPPED" || { "$R" job status "$KT"; fail "jobs: a keeper told to end did not stop its job"; }
    grep -qx "keeper_signal=15" "$ROOT/node-127.0.0.1/jobs/$KT/stopped" || fail "jobs: no reason for the stop"
    grep -q "^signal=15" "$ROOT/node-127.0.0.1/jobs/$KT/status" || fail "jobs: no status from the keeper told to end"
    still_runs "$KT_PID" "$KT_START" && fail "jobs: kterm's process lives on"
    # its keeper killed outright: the program goes at once (not at its next
    # write into the closed pipe, which may never come), and what it
    # started in its group too; the job is failed with the reason
    KK=$("$R" job submit --name kkill -- /bin/sh -c 'sleep 300 & echo "child $!"; echo up; while :; do sleep 0.1; done' | job_id)
    wait_up "$KK" || fail "jobs: job kkill did not start"
    KK_PID=$("$R" job list | awk -v id="$KK" '$1 == id {print $4}')
    KK_START=$(proc_start "$KK_PID")
    KC_PID=$("$R" job logs "$KK" | sed -n 's/^child //p')
    KC_START=$(proc_start "$KC_PID")
    [ -n "$KC_START" ] || fail "jobs: kkill's child $KC_PID is not running"
    kill -KILL "$(keeper_of "$KK")"
    for i in $(seq 1 50); do still_runs "$KK_PID" "$KK_START" || still_runs "$KC_PID" "$KC_START" || break; sleep 0.1; done
    still_runs "$KK_PID" "$KK_START" && fail "jobs: the program of a killed keeper lives on"
    still_runs "$KC_PID" "$KC_START" && fail "jobs: what the program of a killed keeper started lives on"
    "$R" job status "$KK" | grep -qx "job $KK: FAILED (its keeper was killed: status unknown)" ||
      { "$R" job status "$KK"; fail "jobs: status of a job whose keeper was killed"; }
    # what a job started outside its process group (setsid: a daemon; one
    # that ignores SIGTERM) ends with a stop too: the keeper is their
    # subreaper, SIGTERM then SIGKILL after 5 s
    KD=$("$R" job submit --name kdaemon -- /bin/sh -c 'setsid sleep 300 & echo "daemon $!"
      (setsid sh -c "trap \"\" TERM; echo \"deaf \$\$\"; while :; do sleep 0.2; done" &)
      echo up; while :; do sleep 0.1; done' | job_id)
    wait_up "$KD" || fail "jobs: job kdaemon did not start"
    for i in $(seq 1 50); do "$R" job logs "$KD" | grep -q "^deaf " && break; sleep 0.1; done
    D1=$("$R" job logs "$KD" | sed -n 's/^daemon //p') D2=$("$R" job logs "$KD" | sed -n 's/^deaf //p')
    D1_START=$(proc_start "$D1") D2_START=$(proc_start "$D2")
    [ -n "$D1_START" ] && [ -n "$D2_START" ] || fail "jobs: kdaemon's daemons $D1 $D2 are not running"
    [ "$(ps -o sid= -p "$D1" | tr -d ' ')" = "$D1" ] || fail "jobs: kdaemon's first daemon is not in a session of its own"
    "$R" job stop "$KD" --timeout 20 > /dev/null || fail "jobs: stop kdaemon"
    still_runs "$D1" "$D1_START" && fail "jobs: a stopped job's daemon (setsid) lives on"
    still_runs "$D2" "$D2_START" && fail "jobs: a stopped job's daemon that ignores SIGTERM lives on"
    "$R" job logs "$KD" | grep -q "raydist job: stopping [0-9]* processes the job started outside its process group" ||
      fail "jobs: no word of the daemons stopped"
    # a node that accepts the keeper's connection and then answers nothing
    # (stopped) holds up neither the job's output (300 KB, more than a
    # pipe holds) nor its end: the job's start is told from a thread
    BN=$(awk '$1 == "node" {print $2}' "$ROOT/node-127.0.0.2/pids")
    [ -n "$BN" ] || fail "jobs: no node daemon pid for b"
    kill -STOP "$BN"
    T0=$(date +%s)
    HJ=$("$R" job submit --node-ip 127.0.0.2 --name hung-node -- /bin/sh -c 'head -c 300000 /dev/zero | tr "\0" x; echo; echo all out' | job_id)
    for i in $(seq 1 50); do "$R" job status "$HJ" --node-ip 127.0.0.2 | grep -q SUCCEEDED && break; sleep 0.1; done
    T1=$(date +%s)
    # (asked before the node goes on: it answers the keeper at once then)
    "$R" job status "$HJ" --node-ip 127.0.0.2 | grep -q SUCCEEDED && "$R" job logs "$HJ" --node-ip 127.0.0.2 | grep -qx "all out" ||
      { kill -CONT "$BN"; fail "jobs: a job on a node that does not answer did not end within $((T1 - T0)) s"; }
    kill -CONT "$BN"
    echo "a job on a node that does not answer: ended within $((T1 - T0)) s"
    # bad input: clear errors, nothing done
    "$R" job logs 999 2>/dev/null && fail "jobs: logs of no job"
    "$R" job stop abc 2>/dev/null && fail "jobs: stop of a bad id"
    "$R" job submit 2>/dev/null; [ $? -eq 2 ] || fail "jobs: submit without a program"
    "$R" job frobnicate 2>/dev/null; [ $? -eq 2 ] || fail "jobs: unknown subcommand"
    # one left running: `raydist stop` (below) must end it
    LEFT=$("$R" job submit --name left -- "$T" job_long | job_id)
    for i in $(seq 1 100); do "$R" job logs "$LEFT" | grep -q "job long started" && break; sleep 0.1; done
    JOB_PID=$("$R" job list | awk -v id="$LEFT" '$1 == id {print $4}')
    JOB_START=$(proc_start "$JOB_PID")
    echo "ok: jobs ok, bad, missing, stopped; job $LEFT (pid $JOB_PID) left for raydist stop"
    ;;
  jobs_remote)
    # `raydist job --address` from a machine with no node: a private
    # RAYDIST_TMPDIR (no session to find) and the token given; the program
    # goes up to the GCS and runs on the node named (default: the head)
    REM="$RAYDIST_TMPDIR/elsewhere"
    mkdir -p "$REM"
    TOKEN=$(cat "$ROOT/node-127.0.0.1/token")
    rj() { _sub=$1; shift; RAYDIST_TMPDIR="$REM" "$R" job "$_sub" --address "$ADDR" --token "$TOKEN" "$@"; }
    job_id() { sed -n 's/^job \([0-9]*\) submitted.*/\1/p'; }
    OK=$(rj submit --name ok -- "$T" job_ok | job_id)
    ENVJ=$(rj submit --name env --env GREETING=hello --env "TWO=a b" -- /bin/sh -c 'echo "greeting=$GREETING two=$TWO"; pwd' | job_id)
    BAD=$(rj submit --node-ip 127.0.0.2 --name on_b -- "$T" job_bad | job_id)
    LONG=$(rj submit --name long -- "$T" job_long | job_id)
    [ -n "$OK" ] && [ -n "$ENVJ" ] && [ -n "$BAD" ] && [ -n "$LONG" ] || fail "jobs_remote: no job ids"
    rj wait "$OK" --timeout 120 || { rj logs "$OK"; fail "jobs_remote: job ok did not succeed"; }
    rj wait "$ENVJ" --timeout 60 || fail "jobs_remote: job env did not succeed"
    rj wait "$BAD" --node-ip 127.0.0.2 --timeout 120 && fail "jobs_remote: job bad succeeded"
    rj list > "$RAYDIST_TMPDIR/jobs" || fail "jobs_remote: list"
    cat "$RAYDIST_TMPDIR/jobs"
    grep -Eq "^$OK +ok +SUCCEEDED .* $T job_ok\$" "$RAYDIST_TMPDIR/jobs" || fail "jobs_remote: ok not listed as succeeded"
    grep -Eq "^$LONG +long +RUNNING" "$RAYDIST_TMPDIR/jobs" || fail "jobs_remote: long not running"
    rj list --node-ip 127.0.0.2 | grep -Eq "^$BAD +on_b +FAILED \(exit 3\)" || fail "jobs_remote: bad not failed on b"
    # --all: every node's, under a line naming it
    rj list --all > "$RAYDIST_TMPDIR/all" || fail "jobs_remote: list --all"
    awk '/^node /{n=$2} /^[0-9]/{print n, $1, $2}' "$RAYDIST_TMPDIR/all" > "$RAYDIST_TMPDIR/all.flat"
    grep -qx "127.0.0.1 $OK ok" "$RAYDIST_TMPDIR/all.flat" && grep -qx "127.0.0.2 $BAD on_b" "$RAYDIST_TMPDIR/all.flat" &&
      grep -qx "node 127.0.0.3" "$RAYDIST_TMPDIR/all" || { cat "$RAYDIST_TMPDIR/all"; fail "jobs_remote: list --all"; }
    rj list --all --node-ip 127.0.0.2 2>/dev/null; [ $? -eq 2 ] || fail "jobs_remote: --all with --node-ip"
    # on the node itself they are its own jobs
    "$R" job list --node-ip 127.0.0.1 | grep -Eq "^$OK +ok +SUCCEEDED" || fail "jobs_remote: not a job of the head"
    "$R" job logs "$BAD" --node-ip 127.0.0.2 | grep -q "job bad: giving up" || fail "jobs_remote: bad's log not on b"
    rj logs "$OK" > "$RAYDIST_TMPDIR/log" || fail "jobs_remote: logs"
    grep -q "job ok done (RAYDIST_JOB_ID=$OK)" "$RAYDIST_TMPDIR/log" || { cat "$RAYDIST_TMPDIR/log"; fail "jobs_remote: no output of ok"; }
    grep -q "ip=127.0.0.2) job task says hi" "$RAYDIST_TMPDIR/log" || { cat "$RAYDIST_TMPDIR/log"; fail "jobs_remote: no worker output"; }
    rj status "$OK" | grep -qx "job $OK: SUCCEEDED" || fail "jobs_remote: status"
    # RAYDIST_ADDRESS stands for --address where no node runs
    RAYDIST_TMPDIR="$REM" RAYDIST_ADDRESS="$ADDR" RAYDIST_TOKEN="$TOKEN" "$R" job status "$OK" | grep -qx "job $OK: SUCCEEDED" ||
      fail "jobs_remote: RAYDIST_ADDRESS"
    rj submit --follow -- /bin/sh -c 'echo one; sleep 0.3; echo two' > "$RAYDIST_TMPDIR/fol" || fail "jobs_remote: --follow of a job that succeeds"
    tr '\n' ' ' < "$RAYDIST_TMPDIR/fol" | grep -Eq "^job [0-9]+ submitted.* one two job [0-9]+: SUCCEEDED \$" || { cat "$RAYDIST_TMPDIR/fol"; fail "jobs_remote: submit --follow"; }
    rj submit --follow -- /bin/sh -c 'exit 4' | grep -q "FAILED (exit 4)" || fail "jobs_remote: --follow of a failing job"
    # --working-dir: a copy of the directory, shipped, is the job's working directory
    WD="$RAYDIST_TMPDIR/wd"
    mkdir -p "$WD/sub"
    echo payload > "$WD/sub/data.txt"
    printf '#!/bin/sh\necho "cwd=$(pwd)"\ncat sub/data.txt\n' > "$WD/run.sh"
    chmod +x "$WD/run.sh"
    (cd "$WD" && rj submit --working-dir . --follow -- ./run.sh) > "$RAYDIST_TMPDIR/wdout" || { cat "$RAYDIST_TMPDIR/wdout"; fail "jobs_remote: --working-dir"; }
    grep -Eqx "cwd=$ROOT/node-127.0.0.1/jobs/[0-9]+/wd" "$RAYDIST_TMPDIR/wdout" && grep -qx payload "$RAYDIST_TMPDIR/wdout" ||
      { cat "$RAYDIST_TMPDIR/wdout"; fail "jobs_remote: not run in a copy of its working directory"; }
    rj submit --working-dir "$RAYDIST_TMPDIR/nonexistent" -- /bin/true 2>/dev/null && fail "jobs_remote: a missing --working-dir"
    rj logs "$ENVJ" > "$RAYDIST_TMPDIR/log"
    grep -qx "greeting=hello two=a b" "$RAYDIST_TMPDIR/log" || { cat "$RAYDIST_TMPDIR/log"; fail "jobs_remote: --env not set"; }
    grep -qx "$ROOT/node-127.0.0.1/jobs/$ENVJ" "$RAYDIST_TMPDIR/log" || fail "jobs_remote: not run in its job directory"
    # logs --follow: what comes, until the job ends (stopped here)
    rj logs "$LONG" --follow > "$RAYDIST_TMPDIR/follow" 2>&1 &
    FOLLOW=$!
    for i in $(seq 1 100); do grep -q "job long started" "$RAYDIST_TMPDIR/follow" && break; sleep 0.1; done
    grep -q "job long started" "$RAYDIST_TMPDIR/follow" || fail "jobs_remote: --follow shows nothing"
    kill -0 "$FOLLOW" 2>/dev/null || fail "jobs_remote: --follow ended while the job runs"
    LPID=$("$R" job list --node-ip 127.0.0.1 | awk -v id="$LONG" '$1 == id {print $4}')
    LPID_START=$(proc_start "$LPID")
    [ -n "$LPID_START" ] || fail "jobs_remote: long's process $LPID is not running"
    rj stop "$LONG" --timeout 10 | grep -q "job $LONG: STOPPED" || fail "jobs_remote: stop"
    for i in $(seq 1 50); do kill -0 "$FOLLOW" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$FOLLOW" 2>/dev/null && fail "jobs_remote: --follow did not end with the job"
    wait "$FOLLOW" || fail "jobs_remote: --follow failed"
    still_runs "$LPID" "$LPID_START" && fail "jobs_remote: the stopped job's process $LPID lives on"
    rj list | grep -Eq "^$LONG +long +STOPPED" || fail "jobs_remote: long not listed as stopped"
    # delete: an ended job's record and working copy go; a running one is refused
    rj delete "$LONG" | grep -qx "job $LONG deleted" || fail "jobs_remote: delete"
    [ -e "$ROOT/node-127.0.0.1/jobs/$LONG" ] && fail "jobs_remote: the deleted job's directory is there"
    rj status "$LONG" 2>/dev/null && fail "jobs_remote: status of a deleted job"
    # bad input: clear errors, nothing done
    RAYDIST_TMPDIR="$REM" "$R" job list --address "$ADDR" --token wrong 2> "$RAYDIST_TMPDIR/err" && fail "jobs_remote: a wrong token"
    grep -q "refused the cluster token" "$RAYDIST_TMPDIR/err" || { cat "$RAYDIST_TMPDIR/err"; fail "jobs_remote: no reason for the token"; }
    RAYDIST_TMPDIR="$REM" RAYDIST_TOKEN= "$R" job list --address "$ADDR" 2>/dev/null && fail "jobs_remote: no token"
    rj logs 999 2> "$RAYDIST_TMPDIR/err" && fail "jobs_remote: logs of no job"
    grep -q "no job 999" "$RAYDIST_TMPDIR/err" || fail "jobs_remote: no reason for job 999"
    rj wait 999 2>/dev/null && fail "jobs_remote: wait for no job"
    rj stop 999 2>/dev/null && fail "jobs_remote: stop of no job"
    rj list --node-ip 127.0.0.9 2> "$RAYDIST_TMPDIR/err" && fail "jobs_remote: a node not in the cluster"
    grep -q "no live node on 127.0.0.9" "$RAYDIST_TMPDIR/err" || fail "jobs_remote: no reason for the node"
    rj submit -- /nonexistent/program 2>/dev/null && fail "jobs_remote: a missing program"
    echo data > "$RAYDIST_TMPDIR/notexec"
    chmod 644 "$RAYDIST_TMPDIR/notexec"
    rj submit -- "$RAYDIST_TMPDIR/notexec" 2>/dev/null && fail "jobs_remote: a file that is not executable"
    rj submit --env NOEQUALS -- /bin/true 2>/dev/null; [ $? -eq 2 ] || fail "jobs_remote: a bad --env"
    RAYDIST_TMPDIR="$REM" "$R" job list --address "$ADDR" --session /tmp 2>/dev/null; [ $? -eq 2 ] || fail "jobs_remote: --address with --session"
    # one left running on b: `raydist stop` (below) must end it
    LEFT=$(rj submit --node-ip 127.0.0.2 --name left -- "$T" job_long | job_id)
    for i in $(seq 1 100); do rj logs "$LEFT" --node-ip 127.0.0.2 | grep -q "job long started" && break; sleep 0.1; done
    JOB_PID=$("$R" job list --node-ip 127.0.0.2 | awk -v id="$LEFT" '$1 == id {print $4}')
    JOB_START=$(proc_start "$JOB_PID")
    [ -n "$JOB_START" ] || fail "jobs_remote: the job left on b does not run"
    rj delete "$LEFT" --node-ip 127.0.0.2 2> "$RAYDIST_TMPDIR/err" && fail "jobs_remote: delete of a running job"
    grep -q "stop it first" "$RAYDIST_TMPDIR/err" || fail "jobs_remote: no reason for refusing the delete"
    echo "ok: remote jobs ok, env, bad on b, followed and stopped; job $LEFT on b (pid $JOB_PID) left for raydist stop"
    ;;
  jobs_http)
    # the jobs HTTP API on the head's metrics port, as any HTTP client uses it
    python3 "$(dirname "$0")/jobs_http.py" "$(cat "$ROOT/node-127.0.0.1/metrics")" "$(cat "$ROOT/node-127.0.0.1/token")" \
      "$R" "$ROOT/node-127.0.0.1" || fail "jobs_http"
    ;;
  head_restart)
    # the head's node daemon dies (SIGKILL: a crash, the OOM killer) while
    # its GCS runs on: b and c carry on, `raydist start --head` on its ip
    # starts a node daemon again beside that GCS, the old one's detached
    # actors are gone (their names free again), and the new head records
    # new ones that later drivers use
    "$T" detached_make || fail "head_restart: detached_make"
    H="$ROOT/node-127.0.0.1"
    NODE=$(awk '$1 == "node" {print $2}' "$H/pids")
    GCS_PID=$(cat "$H/gcs.pid")
    kill -9 "$NODE"
    # b and c see it die (their views: 2 alive), as the GCS does
    seen() { for i in $(seq 1 100); do [ "$(metric 127.0.0.2 raydist_cluster_nodes_alive)" = "$1" ] &&
               [ "$(metric 127.0.0.3 raydist_cluster_nodes_alive)" = "$1" ] && return 0; sleep 0.1; done; return 1; }
    seen 2 || fail "head_restart: b and c did not see the head die"
    "$R" status | grep -q "2 nodes alive, 1 dead" || { "$R" status; fail "head_restart: the head's death not seen"; }
    L="$RAYDIST_TMPDIR/hr_events"
    listed_until 30 "ERROR +GCS +1  Node 1 \(127\.0\.0\.1\) is dead: no heartbeat for [0-9]+ ms \(timeout 2000 ms\)\.$" \
      list cluster-events || { cat "$L"; fail "head_restart: the head's death is not a cluster event"; }
    "$R" start --head --port 0 --node-ip 127.0.0.1 --num-cpus 2 --object-store-memory 700000000 > "$RAYDIST_TMPDIR/again" 2>&1 ||
      { cat "$RAYDIST_TMPDIR/again"; fail "head_restart: start --head again"; }
    grep -q "head node started again on 127.0.0.1, beside the GCS at $ADDR" "$RAYDIST_TMPDIR/again" ||
      { cat "$RAYDIST_TMPDIR/again"; fail "head_restart: what start said"; }
    [ "$(cat "$H/gcs.pid")" = "$GCS_PID" ] && kill -0 "$GCS_PID" || fail "head_restart: the GCS was replaced"
    [ "$(awk '$1 == "node"' "$H/pids" | wc -l)" = 1 ] && ! awk '$1 == "node" {print $2}' "$H/pids" | grep -qx "$NODE" ||
      { cat "$H/pids"; fail "head_restart: pids does not name the new node daemon alone"; }
    "$R" status > "$RAYDIST_TMPDIR/status"
    grep -q "3 nodes alive, 1 dead" "$RAYDIST_TMPDIR/status" && grep -Eq "^4 +127.0.0.1 +yes +alive" "$RAYDIST_TMPDIR/status" &&
      grep -q "^named actors: 0 live, 4 dead" "$RAYDIST_TMPDIR/status" ||
      { cat "$RAYDIST_TMPDIR/status"; fail "head_restart: status after the restart"; }
    seen 3 || fail "head_restart: b and c did not see the new head"
    "$R" start --head --port 0 --node-ip 127.0.0.1 2> "$RAYDIST_TMPDIR/err" && fail "head_restart: a third head started"
    grep -q "a node already runs on 127.0.0.1" "$RAYDIST_TMPDIR/err" || { cat "$RAYDIST_TMPDIR/err"; fail "head_restart: no reason"; }
    # the first driver's job ended with the old head: node c drops the
    # groups its task made when it sees that (a sweep each second), and
    # the next detached_make names them again
    for _i in $(seq 1 50); do
      "$R" list placement-groups > "$L" || fail "head_restart: raydist list placement-groups"
      grep -E "^[0-9a-f]{16} task-pg-drop " "$L" | grep -vq " removed " || break
      sleep 0.1
    done
    grep -E "^[0-9a-f]{16} task-pg-drop " "$L" | grep -vq " removed " && { cat "$L"; fail "head_restart: the old job's groups stay"; }
    for phase in detached_make detached_use detached_gone; do
      "$T" $phase || fail "head_restart: $phase after the restart"
    done
    echo "ok: the head's node daemon started again beside GCS pid $GCS_PID; detached actors recorded anew"
    ;;
  job_resources)
    # a job's entrypoint resources (Ray's entrypoint_num_gpus, ...): held
    # from the head's ledger while its driver runs, its GPUs its own, the
    # next job PENDING until they are free; stops, killed keepers and
    # impossible requests
    H="$ROOT/node-127.0.0.1"
    L="$RAYDIST_TMPDIR/jr"
    job_id() { sed -n 's/^job \([0-9]*\) submitted.*/\1/p'; }
    keeper_of() { sed -n 's/^keeper=//p' "$H/jobs/$1/info"; }
    state_is() { for i in $(seq 1 100); do "$R" job status "$1" | grep -qx "job $1: $2" && return 0; sleep 0.1; done
                 "$R" job status "$1"; return 1; }
    gpu_job() { _n=$1; shift; "$R" job submit --name "$_n" "$@" -- /bin/sh -c 'echo "cvd=$CUDA_VISIBLE_DEVICES"; echo up; while :; do sleep 0.1; done'; }
    cvd_of() { for i in $(seq 1 100); do _c=$("$R" job logs "$1" | sed -n 's/^cvd=//p'); [ -n "$_c" ] && { echo "$_c"; return; }; sleep 0.1; done; }
    avail() { metric 127.0.0.1 "raydist_resources_available{resource=\"$1\"}"; }
    holds() { metric 127.0.0.1 "raydist_job_holds{state=\"$1\"}"; }
    G1=$(gpu_job g1 --num-gpus 1 | job_id)
    G2=$(gpu_job g2 --num-gpus 1 --resources big=1 | job_id)
    [ -n "$G1" ] && [ -n "$G2" ] || fail "job_resources: no job ids"
    C1=$(cvd_of "$G1") C2=$(cvd_of "$G2")
    [ -n "$C1" ] && [ -n "$C2" ] && [ "$C1" != "$C2" ] && echo "$C1 $C2" | grep -Eqx "[01] [01]" ||
      fail "job_resources: the two jobs' GPUs: '$C1' and '$C2'"
    [ "$(avail GPU)" = 0 ] && [ "$(avail big)" = 0 ] && [ "$(holds held)" = 2 ] ||
      fail "job_resources: the held GPUs still free ($(avail GPU) GPU, $(avail big) big, $(holds held) held)"
    # the next one waits, PENDING, and its submit returns at once
    "$R" job submit --name g3 --num-gpus 1 -- /bin/sh -c 'echo "cvd=$CUDA_VISIBLE_DEVICES"' > "$RAYDIST_TMPDIR/g3" ||
      fail "job_resources: a pending job's submit"
    grep -q "pending until GPU=1 of the node is free" "$RAYDIST_TMPDIR/g3" || { cat "$RAYDIST_TMPDIR/g3"; fail "job_resources: submit said"; }
    G3=$(job_id < "$RAYDIST_TMPDIR/g3")
    G4=$("$R" job submit --name g4 --num-gpus 1 -- sleep 100 | job_id)
    "$R" job list > "$L"
    grep -Eq "^$G3 +g3 +PENDING \(waits for GPU=1\) +0 " "$L" && grep -Eq "^$G4 +g4 +PENDING \(waits for GPU=1\) +0 " "$L" ||
      { cat "$L"; fail "job_resources: not listed PENDING"; }
    "$R" job status "$G3" | grep -qx "job $G3: PENDING (waits for GPU=1)" || fail "job_resources: status of a pending job"
    [ "$(holds waiting)" = 2 ] || fail "job_resources: $(holds waiting) holds waiting, not 2"
    # one that fits does not wait behind them
    "$R" job submit --num-cpus 1 --follow -- true > "$L" || { cat "$L"; fail "job_resources: a CPU job"; }
    grep -q "submitted: pid" "$L" || { cat "$L"; fail "job_resources: a CPU job waited behind the GPU jobs"; }
    # a pending job stopped: its keeper ends, nothing ran, STOPPED
    "$R" job stop "$G4" --timeout 10 > "$L" || { cat "$L"; fail "job_resources: stop of a pending job"; }
    grep -qx "job $G4: STOPPED" "$L" || { cat "$L"; fail "job_resources: the pending job not STOPPED"; }
    grep -qx "keeper_signal=15" "$H/jobs/$G4/stopped" || fail "job_resources: no reason for the stop"
    [ "$(holds waiting)" = 1 ] || fail "job_resources: the stopped job still waits"
    # a pending job withdrawn (as a jobs API job's mirror moves it): it never
    # runs and its record goes; a running one is not withdrawn
    G5=$("$R" job submit --name g5 --num-gpus 1 -- touch "$RAYDIST_TMPDIR/g5-ran" | job_id)
    [ "$(holds waiting)" = 2 ] || fail "job_resources: g5 does not wait"
    "$R" job withdraw "$G5" > "$L" && grep -qx "job $G5 withdrawn" "$L" || { cat "$L"; fail "job_resources: withdraw g5"; }
    [ ! -e "$H/jobs/$G5" ] && [ "$(holds waiting)" = 1 ] || fail "job_resources: g5's record or hold left after its withdrawal"
    "$R" job withdraw "$G1" > "$L" && { cat "$L"; fail "job_resources: a running job withdrawn"; }
    grep -qx "job $G1: RUNNING (not waiting: not withdrawn)" "$L" || { cat "$L"; fail "job_resources: withdraw of g1 said"; }
    # g1 stopped: g3 takes its GPU and runs to the end
    "$R" job stop "$G1" --timeout 10 > /dev/null || fail "job_resources: stop g1"
    state_is "$G3" SUCCEEDED || fail "job_resources: g3 did not run once g1's GPU was free"
    [ ! -e "$RAYDIST_TMPDIR/g5-ran" ] || fail "job_resources: the withdrawn g5 ran"
    [ "$(cvd_of "$G3")" = "$C1" ] || fail "job_resources: g3 ran on GPU '$(cvd_of "$G3")', not g1's $C1"
    "$R" job logs "$G3" | grep -q "waiting for GPU=1 of the node to be free" || fail "job_resources: no word of the wait in g3's log"
    # g2's keeper killed outright: its GPU and big come back
    kill -KILL "$(keeper_of "$G2")"
    state_is "$G2" "FAILED (its keeper was killed: status unknown)" || fail "job_resources: g2's state"
    for i in $(seq 1 100); do [ "$(avail GPU)" = 2 ] && [ "$(avail big)" = 1 ] && break; sleep 0.1; done
    [ "$(avail GPU)" = 2 ] && [ "$(avail big)" = 1 ] && [ "$(holds held)" = 0 ] && [ "$(holds waiting)" = 0 ] ||
      fail "job_resources: resources not back ($(avail GPU) GPU, $(avail big) big, $(holds held) held)"
    # what the node never has: refused at once, no job made
    NJ=$(ls "$H/jobs" | wc -l)
    "$R" job submit --num-gpus 3 -- true 2> "$L" && fail "job_resources: 3 GPUs of 2 accepted"
    grep -q "this node has {CPU: 2, GPU: 2, .*big: 1} in all: the job's {CPU: 0, GPU: 3} can never be held here" "$L" ||
      { cat "$L"; fail "job_resources: no reason for 3 GPUs"; }
    "$R" job submit --resources nope=1 -- true 2> "$L" && fail "job_resources: an unknown resource accepted"
    grep -q "nope: 1} can never be held here" "$L" || { cat "$L"; fail "job_resources: no reason for nope"; }
    grep -q "no live node has them" "$L" || { cat "$L"; fail "job_resources: nope said to be somewhere"; }
    # what another node has: the refusal names it, and its jobs API
    "$R" job submit --resources only_b=1 -- true 2> "$L" && fail "job_resources: only_b accepted on the head"
    grep -Eq "it fits on 127\.0\.0\.2 \(jobs API http://127\.0\.0\.2:[0-9]+\)\)\$" "$L" ||
      { cat "$L"; fail "job_resources: the node that has only_b not named"; }
    "$R" job submit --num-cpus abc -- true 2> "$L"; [ $? -eq 2 ] || fail "job_resources: --num-cpus abc"
    grep -q "'abc' for CPU is not a number" "$L" || { cat "$L"; fail "job_resources: no reason for abc"; }
    "$R" job list --num-gpus 1 2> /dev/null; [ $? -eq 2 ] || fail "job_resources: resources taken by list"
    "$R" job submit --mirror -- true 2> "$L"; [ $? -eq 2 ] && grep -q "mirror is for submit --address" "$L" ||
      fail "job_resources: --mirror without --address"
    "$R" job submit --address "$ADDR" --follow --mirror --seek-node --num-cpus 1 -- true 2> "$L"; [ $? -eq 2 ] &&
      grep -q "seek-node is for a submitted job's program" "$L" || { cat "$L"; fail "job_resources: --seek-node outside a job"; }
    # a mirror whose node has gone (here: never was) asks its job's node for
    # another (the jobs API's mirrors do, should the node they were given
    # leave first): b, which has only_b
    mkdir -p "$H/jobs/999"
    RAYDIST_JOB_DIR="$H/jobs/999" "$R" job submit --address "$ADDR" --follow --mirror --seek-node --node-ip 127.0.0.99 \
      --entrypoint-resources only_b=1 -- /bin/sh -c 'echo "gone-then on $RAYDIST_NODE_IP"' > "$L" 2>&1 ||
      { cat "$L"; fail "job_resources: a mirror whose node has gone"; }
    rm -rf "$H/jobs/999"
    grep -q "has no live node on 127.0.0.99" "$L" && grep -q "asking this job's node for another node" "$L" &&
      grep -qx "gone-then on 127.0.0.2" "$L" || { cat "$L"; fail "job_resources: the mirror did not move to b"; }
    [ "$(ls "$H/jobs" | wc -l)" = "$NJ" ] || fail "job_resources: a refused submit left a job"
    # zero asks nothing (Ray's default): runs at once, holds nothing
    "$R" job submit --num-gpus 0 --follow -- true > "$L" || { cat "$L"; fail "job_resources: --num-gpus 0"; }
    grep -q "submitted: pid" "$L" || { cat "$L"; fail "job_resources: --num-gpus 0 not started at once"; }
    # from another machine (--address): the resources travel with the submit
    REM="$RAYDIST_TMPDIR/elsewhere"
    mkdir -p "$REM"
    RAYDIST_TMPDIR="$REM" "$R" job submit --address "$ADDR" --token "$(cat "$H/token")" --num-gpus 2 --resources big=1 \
      --follow -- /bin/sh -c 'echo "cvd=$CUDA_VISIBLE_DEVICES"' > "$L" 2>&1 || { cat "$L"; fail "job_resources: remote submit"; }
    grep -qx "cvd=0,1" "$L" || { cat "$L"; fail "job_resources: the remote job's GPUs"; }
    RAYDIST_TMPDIR="$REM" "$R" job submit --address "$ADDR" --token "$(cat "$H/token")" --num-gpus 3 -- true > "$L" 2>&1 &&
      fail "job_resources: a remote submit of 3 GPUs accepted"
    grep -q "can never be held here" "$L" || { cat "$L"; fail "job_resources: no reason from the remote submit"; }
    echo "ok: jobs held GPUs $C1 and $C2, one waited and ran on $C1, one stopped pending, a killed keeper's came back"
    ;;
  state_api)
    # Ray's state CLI (ray list, ray get, ray summary) pointed at a node's
    # metrics port, as at Ray's dashboard: the whole cluster's nodes,
    # actors, tasks and placement groups while a driver holds them, asked
    # through the head and through node c; the API's refusals
    RAY=$4
    [ -x "$RAY" ] || { echo "SKIP: no Ray CLI at $RAY (tests/cluster/ray_cli_venv.sh makes it)"; exit 77; }
    hold_start state_hold
    "$R" job submit --name sa-job --follow -- sh -c 'echo state' > "$RAYDIST_TMPDIR/sajob" 2>&1 ||
      { cat "$RAYDIST_TMPDIR/sajob"; fail "state_api: job submit"; }
    # two submitted C drivers: a copy of the test program (its own GCS job,
    # which it starts) and the test program itself (the held driver's GCS
    # job, which it joins: one job per executable and node)
    cp "$T" "$RAYDIST_TMPDIR/cluster_test_copy"
    "$R" job submit --name sa-own --follow -- "$RAYDIST_TMPDIR/cluster_test_copy" join_leave > "$RAYDIST_TMPDIR/sajob" 2>&1 &&
      "$R" job submit --name sa-joins --follow -- "$T" join_leave >> "$RAYDIST_TMPDIR/sajob" 2>&1 ||
      { cat "$RAYDIST_TMPDIR/sajob"; fail "state_api: the C drivers' job submit"; }
    # two submissions of one new executable at once: one GCS job (one run
    # of the executable on this node), which both name, also when the
    # second driver says hello while the first's job entry is still on its
    # way to the GCS
    cp "$T" "$RAYDIST_TMPDIR/cluster_test_twin"
    "$R" job submit --name sa-twin1 -- "$RAYDIST_TMPDIR/cluster_test_twin" job_long > "$RAYDIST_TMPDIR/tw1" &
    "$R" job submit --name sa-twin2 -- "$RAYDIST_TMPDIR/cluster_test_twin" job_long > "$RAYDIST_TMPDIR/tw2"
    wait $!
    TW1=$(sed -n 's/^job \([0-9]*\) submitted.*/\1/p' "$RAYDIST_TMPDIR/tw1")
    TW2=$(sed -n 's/^job \([0-9]*\) submitted.*/\1/p' "$RAYDIST_TMPDIR/tw2")
    [ -n "$TW1" ] && [ -n "$TW2" ] || fail "state_api: the twin jobs' ids"
    for t in "$TW1" "$TW2"; do
      for _i in $(seq 1 100); do "$R" job logs "$t" | grep -q "job long started" && break; sleep 0.1; done
    done
    "$R" job stop "$TW1" --timeout 10 > /dev/null && "$R" job stop "$TW2" --timeout 10 > /dev/null || fail "state_api: stop the twin jobs"
    TOKEN=$(cat "$ROOT/node-127.0.0.1/token")
    export RAY_AUTH_MODE=token RAY_AUTH_TOKEN="$TOKEN" RAY_USAGE_STATS_ENABLED=0
    O="$RAYDIST_TMPDIR/ray.out"
    J="$RAYDIST_TMPDIR/json"
    MH=$(cat "$ROOT/node-127.0.0.1/metrics") MC=$(cat "$ROOT/node-127.0.0.3/metrics")
    # rb: the `ray` commands on stdin (NAME ARGS... a line) in one Python
    # process (tests/cluster/ray_batch.py: Ray's own CLI, its start-up paid
    # once), each one's output into $J/NAME; the test fails when one does
    mkdir -p "$J"
    # rl NAME ARGS...: the `ray` program, `ray ARGS... --format json` into $J/NAME (the test fails when ray does)
    rl() { _n=$1; shift; "$RAY" "$@" --format json > "$J/$_n" 2> "$O" || { cat "$O" "$J/$_n"; fail "state_api: ray $*"; }; }
    rb() { "$(dirname "$RAY")/python" "$(dirname "$0")/ray_batch.py" "$J" > "$O" 2>&1 || { cat "$O"; fail "state_api: a ray command"; }; }
    for M in "$MH" "$MC"; do
      A="--address http://$M"
      F="--format json"
      rb <<EOF
nodes list nodes $A $F
head list nodes $A --filter is_head_node=true $F
nodes_d list nodes $A --detail $F
actors list actors $A --detail $F
counter list actors $A --filter name=COUNTER $F
tasks list tasks $A --detail $F
running list tasks $A --filter state=RUNNING $F
not_running list tasks $A --filter "state!=running" $F
finished list tasks $A --filter state=FINISHED --detail $F
one list tasks $A --limit 1 $F
pgs list placement-groups $A --detail $F
jobs list jobs $A --detail $F
drivers list jobs $A --filter type=driver --filter status=RUNNING $F
objects list objects $A --filter object_size=1048576 $F
workers list workers $A --limit 1000 $F
driver list workers $A --filter worker_type=driver $F
stasks summary tasks $A
sactors summary actors $A
sobjects summary objects $A
EOF
      python3 - "$J" "$PID" <<'PY' || fail "state_api: ray list through $M"
import datetime, json, os, sys
d, pid = sys.argv[1], int(sys.argv[2])
j = lambda n: json.load(open(os.path.join(d, n)))
nodes = j("nodes")
assert sorted(n["node_ip"] for n in nodes) == ["127.0.0.1", "127.0.0.2", "127.0.0.3"], nodes
assert all(n["state"] == "ALIVE" and len(n["node_id"]) == 32 for n in nodes), nodes
by_ip = {n["node_ip"]: n for n in nodes}
assert by_ip["127.0.0.2"]["resources_total"]["only_b"] == 1 and by_ip["127.0.0.1"]["resources_total"]["CPU"] == 2, nodes
assert [n["node_ip"] for n in j("head")] == ["127.0.0.1"], j("head")
now_ms = datetime.datetime.now().timestamp() * 1000   # Ray's CLI prints the times as local dates
t_ms = lambda s: datetime.datetime.strptime(s, "%Y-%m-%d %H:%M:%S.%f").timestamp() * 1000
assert all(now_ms - 600000 < t_ms(n["start_time_ms"]) <= now_ms and n["end_time_ms"] is None for n in j("nodes_d")), j("nodes_d")
actors = j("actors")
assert len(actors) == 2, actors
c = [a for a in actors if a["name"] == "counter"]
assert len(c) == 1 and c[0]["state"] == "ALIVE" and c[0]["ray_namespace"] == "team" and c[0]["class_name"] == "Tally", actors
assert c[0]["node_id"] == by_ip["127.0.0.3"]["node_id"] and c[0]["pid"] > 0 and c[0]["required_resources"] == {"only_c": 1}, c
dead = [a for a in actors if a["state"] == "DEAD"]
assert len(dead) == 1 and "rd_actor_kill" in dead[0]["death_cause"]["actor_died_error_context"]["error_message"], dead
assert actors == sorted(actors, key=lambda a: a["actor_id"]), actors
assert [a["actor_id"] for a in j("counter")] == [c[0]["actor_id"]], j("counter")
tasks = j("tasks")
fin = sorted((t for t in tasks if t["state"] == "FINISHED"), key=lambda t: t["name"])
tasks = [t for t in tasks if t["state"] != "FINISHED"]
call = [t for t in tasks if t["actor_id"]]
assert len(call) == 1 and call[0]["name"] == "Tally.wait_file" and call[0]["actor_id"] == c[0]["actor_id"], call
assert call[0]["type"] == "ACTOR_TASK" and call[0]["node_id"] == c[0]["node_id"], call   # its actor's node
tasks = [t for t in tasks if not t["actor_id"]]
states = sorted((t["name"], t["state"]) for t in tasks)
assert states == [("arg_len", "PENDING_ARGS_AVAIL")] * 2 + [("slow_where", "FAILED")] + [("wait_file", "RUNNING")] * 2, states
assert len({t["task_id"] for t in tasks}) == 5 and all(t["job_id"] == tasks[0]["job_id"] != "" for t in tasks), tasks
ids = [n["node_id"] for n in nodes]
assert all(t["worker_pid"] > 0 and t["node_id"] in ids for t in tasks if t["state"] == "RUNNING"), tasks
assert all(t["node_id"] is None for t in tasks if t["state"] == "PENDING_ARGS_AVAIL"), tasks
f = [t for t in tasks if t["state"] == "FAILED"][0]
assert f["error_type"] == "RD_ETASK" and "bad args" in f["error_message"] and f["end_time_ms"] >= f["creation_time_ms"], f
assert f["worker_pid"] > 0 and f["node_id"] in ids, f   # where it ran and failed
assert [t["name"] for t in j("running")].count("wait_file") == 2, j("running")
assert all(t["start_time_ms"] >= t["creation_time_ms"] for t in tasks if t["state"] == "RUNNING"), tasks
assert sorted(t["name"] for t in j("not_running") if not t["actor_id"]) == ["arg_len", "arg_len", "slow_where", "slow_where"], j("not_running")
# the tasks that finished well, as their owner keeps them: the two
# Tally.add calls (one of each actor, on its node) and a 300 ms slow_where
assert [t["name"] for t in fin] == ["Tally.add", "Tally.add", "slow_where"], fin
assert sorted(t["task_id"] for t in j("finished")) == sorted(t["task_id"] for t in fin), (j("finished"), fin)
for t in fin:
    assert t["worker_pid"] > 0 and t["node_id"] in ids and t["job_id"] == tasks[0]["job_id"], t
    assert t["creation_time_ms"] <= t["start_time_ms"] <= t["end_time_ms"] and t["error_type"] is None, t
assert {t["actor_id"] for t in fin[:2]} == {a["actor_id"] for a in actors} and fin[0]["type"] == "ACTOR_TASK", fin
ms = lambda s: datetime.datetime.strptime(s, "%Y-%m-%d %H:%M:%S.%f").timestamp() * 1000
sw = fin[2]
assert sw["type"] == "NORMAL_TASK" and sw["actor_id"] is None and 300 <= ms(sw["end_time_ms"]) - ms(sw["start_time_ms"]) < 5000, sw
assert len(j("one")) == 1, j("one")
pgs = j("pgs")
assert len(pgs) == 1 and pgs[0]["name"] == "pg_state" and pgs[0]["state"] == "CREATED", pgs
assert [b["unit_resources"] for b in pgs[0]["bundles"]] == [{"CPU": 0.5}] * 2 and pgs[0]["bundles"][0]["node_id"] in [n["node_id"] for n in nodes], pgs
jobs = j("jobs")
sub = [x for x in jobs if x["submission_id"] == "sa-job"]
assert len(sub) == 1 and sub[0]["type"] == "SUBMISSION" and sub[0]["status"] == "SUCCEEDED" and sub[0]["entrypoint"].startswith("sh -c") and sub[0]["job_id"] is None, jobs
assert sub[0]["driver_info"]["node_ip_address"] == "127.0.0.1" and sub[0]["driver_exit_code"] == 0 and sub[0]["driver_node_id"] == by_ip["127.0.0.1"]["node_id"], sub
drv = j("drivers")
assert [(x["type"], x["status"], x["driver_info"]["pid"]) for x in drv] == [("DRIVER", "RUNNING", str(pid))], drv
assert drv[0]["job_id"] == tasks[0]["job_id"] == c[0]["job_id"], (drv, tasks[0], c)
assert pgs[0]["creator_job_id"] == drv[0]["job_id"], (pgs, drv)   # the held driver made it
# a submitted C driver's job: listed once, as its submission with its job
# id (no DRIVER row of its own); one that joined the held driver's job
# names that job, whose DRIVER row stays
own = [x for x in jobs if x["submission_id"] == "sa-own"]
joins = [x for x in jobs if x["submission_id"] == "sa-joins"]
assert len(own) == 1 and own[0]["type"] == "SUBMISSION" and own[0]["status"] == "SUCCEEDED" and own[0]["job_id"], own
assert own[0]["driver_info"]["id"] == own[0]["job_id"], own
assert [x["type"] for x in jobs if x["job_id"] == own[0]["job_id"]] == ["SUBMISSION"], jobs
assert len(joins) == 1 and joins[0]["job_id"] == drv[0]["job_id"], (joins, drv)
assert sorted(x["type"] for x in jobs if x["job_id"] == drv[0]["job_id"]) == ["DRIVER", "SUBMISSION"], jobs
assert sub[0]["job_id"] is None, sub   # sh runs no driver
twins = [x for x in jobs if x["submission_id"] in ("sa-twin1", "sa-twin2")]
assert len(twins) == 2 and twins[0]["job_id"] and twins[0]["job_id"] == twins[1]["job_id"], twins
assert [x["type"] for x in jobs if x["job_id"] == twins[0]["job_id"]] == ["SUBMISSION", "SUBMISSION"], jobs
objs = j("objects")
assert [(o["type"], o["pid"], o["ip"], o["task_status"]) for o in objs] == [("DRIVER", pid, "127.0.0.1", "FINISHED")], objs
ws = j("workers")
assert {t["worker_pid"] for t in tasks if t["state"] == "RUNNING"} <= {w["pid"] for w in ws if w["worker_type"] == "WORKER"}, ws
assert c[0]["pid"] in [w["pid"] for w in ws if w["node_id"] == c[0]["node_id"]], ws
assert [(w["pid"], w["ip"], w["is_alive"]) for w in j("driver")] == [(pid, "127.0.0.1", True)], j("driver")
PY
      # ray get by id (the `ray` program itself), the summaries as Ray prints them
      AID=$(python3 -c 'import json,sys; print([a["actor_id"] for a in json.load(open(sys.argv[1])) if a["name"] == "counter"][0])' "$J/actors")
      "$RAY" get actors "$AID" $A > "$O" 2>&1 && grep -q "name: counter" "$O" && grep -q "ray_namespace: team" "$O" ||
        { cat "$O"; fail "state_api: ray get actors"; }
      O2="$J/stasks"
      grep -q "total_tasks: 6" "$O2" && grep -q "total_actor_tasks: 3" "$O2" && grep -Eq "wait_file +RUNNING: 2 +NORMAL_TASK" "$O2" &&
        grep -Eq "arg_len +PENDING_ARGS_AVAIL: 2" "$O2" && grep -A1 -E "slow_where +FAILED: 1" "$O2" | grep -Eq "^ +FINISHED: 1$" &&
        grep -Eq "Tally.add +FINISHED: 2 +ACTOR_TASK" "$O2" || { cat "$O2"; fail "state_api: ray summary tasks"; }
      grep -q "total_actors: 2" "$J/sactors" && grep -Eq "Tally +ALIVE: 1" "$J/sactors" ||
        { cat "$J/sactors"; fail "state_api: ray summary actors"; }
      grep -q "callsite_enabled: false" "$J/sobjects" && grep -q "^disabled" "$J/sobjects" &&
        grep -q "FINISHED:" "$J/sobjects" || { cat "$J/sobjects"; fail "state_api: ray summary objects"; }
    done
    # a second driver on node c: the summaries add up what both nodes say
    RD_READY="$RAYDIST_TMPDIR/ready2" RD_DONE="$RAYDIST_TMPDIR/done" RAYDIST_NODE_IP=127.0.0.3 "$T" state_hold2 \
      > "$RAYDIST_TMPDIR/hold2.log" 2>&1 &
    HOLD2=$!
    for i in $(seq 1 200); do [ -s "$RAYDIST_TMPDIR/ready2" ] && break; sleep 0.1; done
    [ -s "$RAYDIST_TMPDIR/ready2" ] || { kill $HOLD2; cat "$RAYDIST_TMPDIR/hold2.log"; fail "state_api: the second driver never got ready"; }
    for M in "$MH" "$MC"; do
      for i in $(seq 1 50); do   # each driver reports its tasks every 100 ms
        "$RAY" summary tasks --address "http://$M" > "$O" 2>&1 && grep -Eq "wait_file +RUNNING: 3 +NORMAL_TASK" "$O" && break
        sleep 0.2
      done
      grep -q "total_tasks: 7" "$O" && grep -q "total_actor_tasks: 5" "$O" && grep -Eq "wait_file +RUNNING: 3 +NORMAL_TASK" "$O" &&
        grep -Eq "Tally.add +FINISHED: 3 +ACTOR_TASK" "$O" &&
        [ "$(grep -c "^[0-9]  *wait_file " "$O")" = 1 ] || { cat "$O"; fail "state_api: the tasks summary of two nodes"; }
      "$RAY" summary actors --address "http://$M" > "$O" 2>&1 && grep -q "total_actors: 3" "$O" &&
        grep -Eq "Tally +ALIVE: 2" "$O" || { cat "$O"; fail "state_api: the actors summary of two nodes"; }
    done
    # the cluster's events (the GCS's), through Ray's CLI: the three nodes'
    # joins among them, in Ray's columns; --detail adds custom_fields
    # (and, below, the runtime envs)
    rb <<EOF
events list cluster-events --address http://$MC --limit 1000 --format json
events_detail list cluster-events --address http://$MH --detail --filter severity=info --format json
envs list runtime-envs --address http://$MH --detail --format json
EOF
    python3 - "$J/events" "$J/events_detail" <<'PY' || fail "state_api: ray list cluster-events"
import json, sys
rows, detail = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
joined = [r for r in rows if r["source_type"] == "GCS" and " joined the cluster" in r["message"]]
assert len(joined) == 3 and all({k for k in r if r[k] is not None} == {"severity", "time", "source_type", "message", "event_id"}
                               for r in rows), rows
assert [int(r["event_id"]) for r in rows] == sorted(int(r["event_id"]) for r in rows), rows   # oldest first
assert all(r["severity"] == "INFO" for r in detail) and len(detail) >= 3, detail
ips = sorted(r["custom_fields"]["node_ip"] for r in detail if " joined the cluster" in r["message"])
assert ips == ["127.0.0.1", "127.0.0.2", "127.0.0.3"], detail
assert all(len(r["custom_fields"]["node_id"]) == 32 for r in detail if "node_id" in r["custom_fields"]), detail
print("state_api: %d cluster events, the joins with their nodes" % len(rows))
PY
    # runtime envs: none here (no env set: cluster_env_bad_node has some); no token, refused
    grep -q "No resource in the cluster" "$J/envs" || { cat "$J/envs"; fail "state_api: ray list runtime-envs"; }
    env -u RAY_AUTH_MODE -u RAY_AUTH_TOKEN "$RAY" list nodes --address "http://$MH" > "$O" 2>&1 && { cat "$O"; fail "state_api: no token answered"; }
    grep -q "cluster token" "$O" || { cat "$O"; fail "state_api: no reason for the token"; }
    # bad input: each a 4xx in Ray's envelope, with why
    python3 - "$MH" "$TOKEN" <<'PY' || fail "state_api: bad requests"
import json, sys, urllib.request, urllib.error
base, tok = "http://" + sys.argv[1], sys.argv[2]
def get(path, code, words, method="GET", auth=True):
    rq = urllib.request.Request(base + path, method=method, headers={"Authorization": "Bearer " + tok} if auth else {})
    try:
        r = urllib.request.urlopen(rq, timeout=30)
        got, body = r.status, r.read()
    except urllib.error.HTTPError as e:
        got, body = e.code, e.read()
    j = json.loads(body)
    assert got == code and j["result"] is (code == 200) and words in j["msg"], (path, got, j)
    return j
ok = get("/api/v0/tasks?limit=2&detail=true", 200, "")
r = ok["data"]["result"]
assert r["total"] == 12 and len(r["result"]) == 2 and "events" in r["result"][0], r   # nodes asked for 2 rows each (both drivers)
assert r["num_after_truncation"] < 12 and r["num_filtered"] == r["num_after_truncation"], r   # 8 unfinished, 4 finished
r = get("/api/v0/tasks?limit=2&filter_keys=state&filter_predicates=%3D&filter_values=pending_args_avail", 200, "")["data"]["result"]
assert r["total"] == 12 and r["num_filtered"] == 2 and len(r["result"]) == 2, r                   # asked of the nodes as PENDING_ARGS
assert all(t["name"] == "arg_len" for t in r["result"]), r
get("/api/v0/nodes", 401, "cluster token", auth=False)
get("/api/v0/nodes", 405, "takes GET", method="POST")
get("/api/v0/nodes?limit=10001", 400, "exceeds the supported limit 10000")
get("/api/v0/nodes?limit=x", 400, "limit must be a whole number")
get("/api/v0/nodes?detail=maybe", 400, "detail must be True or False")
get("/api/v0/nodes?timeout=0", 400, "timeout must be whole seconds")
get("/api/v0/nodes?filter_keys=colour&filter_predicates=%3D&filter_values=red", 400, "filter column colour is not supported")
get("/api/v0/nodes?filter_keys=resources_total&filter_predicates=%3D&filter_values=1", 400, "Supported filter columns: node_id")
get("/api/v0/nodes?filter_keys=state&filter_predicates=%3E&filter_values=ALIVE", 400, "Unsupported filter predicate >")
get("/api/v0/nodes?filter_keys=state&filter_predicates=%3D", 400, "must come in threes")
get("/api/v0/actors?filter_keys=pid&filter_predicates=%3D&filter_values=abc", 400, "for a int type column")
get("/api/v0/nodes?filter_keys=is_head_node&filter_predicates=%3D&filter_values=yes", 400, "for a boolean type column")
get("/api/v0/nodes?filter_keys=state&filter_predicates=%3D&filter_values=%zz", 400, "bad %-escape")
get("/api/v0/nodes?" + "&".join(["filter_keys=state&filter_predicates=%3D&filter_values=ALIVE"] * 17), 400, "at most 16 filters")
get("/api/v0/colours", 404, "no such resource 'colours'")
get("/api/v0/nodes/summarize", 404, "no summary of nodes")
get("/api/v0/tasks/x/y", 404, "no such path")
assert get("/api/v0/runtime_envs", 200, "")["data"]["result"]["total"] == 0
e = get("/api/v0/cluster_events?limit=1", 200, "")["data"]["result"]
newest = get("/api/v0/cluster_events?limit=1000", 200, "")["data"]["result"]
assert e["total"] == newest["total"] >= 3 and len(e["result"]) == 1 and e["result"][0] == newest["result"][-1], (e, newest)
e = get("/api/v0/cluster_events?filter_keys=source_type&filter_predicates=%21%3D&filter_values=gcs", 200, "")["data"]["result"]
assert all(r["source_type"] != "GCS" for r in e["result"]), e
get("/api/v0/cluster_events?filter_keys=message&filter_predicates=%3D&filter_values=x", 400, "Supported filter columns")
j = get("/api/v0/nodes?filter_keys=STATE&filter_predicates=%3D&filter_values=dead", 200, "")
assert j["data"]["result"]["num_filtered"] == 0 and j["data"]["result"]["total"] == 3, j
PY
    touch "$RAYDIST_TMPDIR/done"
    wait $HOLD || { cat "$RAYDIST_TMPDIR/hold.log"; fail "state_hold"; }
    wait $HOLD2 || { cat "$RAYDIST_TMPDIR/hold2.log"; fail "state_hold2"; }
    # the drivers are gone: their unfinished tasks and their live actor with
    # them (Ray's CLI says "No resource in the cluster" for an empty list);
    # what they finished stays listed, as in Ray, from every node
    for i in $(seq 1 50); do
      rl after list tasks --address "http://$MH" --filter state!=FAILED --filter state!=FINISHED
      grep -qx "No resource in the cluster" "$J/after" && break
      sleep 0.2
    done
    grep -qx "No resource in the cluster" "$J/after" || { cat "$J/after"; fail "state_api: tasks left listed"; }
    rl after list tasks --address "http://$MC" --filter state=FINISHED --detail
    python3 - "$J/after" <<'PY' || fail "state_api: the gone drivers' finished tasks"
import collections, json, sys
rows = json.load(open(sys.argv[1]))
by = collections.Counter((t["job_id"], t["name"]) for t in rows)
print(sorted(by.items()))
j1, j2 = sorted({t["job_id"] for t in rows}, key=int)   # the held driver's job, then the second driver's
assert by == {(j1, "Tally.add"): 2, (j1, "slow_where"): 1, (j1, "arg_len"): 2, (j1, "wait_file"): 2,
              (j1, "Tally.wait_file"): 1, (j2, "Tally.add"): 1, (j2, "Tally.wait_file"): 1, (j2, "wait_file"): 1}, by
assert all(t["state"] == "FINISHED" and t["worker_pid"] > 0 and t["end_time_ms"] for t in rows), rows
PY
    for i in $(seq 1 50); do
      rl after list actors --address "http://$MH" --filter state=ALIVE
      grep -qx "No resource in the cluster" "$J/after" && break
      sleep 0.2
    done
    grep -qx "No resource in the cluster" "$J/after" || { cat "$J/after"; fail "state_api: an actor alive after its driver"; }
    echo "ok: ray list/get/summary through the head and node c"
    ;;
  jobs_ray_cli)
    # Ray's own job CLI (ray[default], tests/cluster/ray_cli_venv.sh) against
    # the head's jobs API, as a Ray user points it at a cluster: version
    # check, working_dir upload, submit, the log tail (a WebSocket), status,
    # logs, stop, list, delete, with the token as a header
    RAY=$4
    [ -x "$RAY" ] || { echo "SKIP: no Ray CLI at $RAY (tests/cluster/ray_cli_venv.sh makes it)"; exit 77; }
    M=$(cat "$ROOT/node-127.0.0.1/metrics")
    TOKEN=$(cat "$ROOT/node-127.0.0.1/token")
    export RAY_JOB_HEADERS="{\"Authorization\": \"Bearer $TOKEN\"}" RAY_USAGE_STATS_ENABLED=0
    A="--address http://$M"
    O="$RAYDIST_TMPDIR/ray.out"
    WD="$RAYDIST_TMPDIR/raywd"
    mkdir -p "$WD/sub"
    echo "ray payload" > "$WD/sub/data.txt"
    printf '#!/bin/sh\necho "cwd=$(pwd)"\ncat sub/data.txt\nprintf "caf\\303\\251 \\377\\n"\nsleep 1\necho "last line"\n' > "$WD/run.sh"
    chmod +x "$WD/run.sh"
    # submit: the directory uploaded as a package, the log followed to the end
    (cd "$WD" && "$RAY" job submit $A --submission-id ray-wd --working-dir . -- ./run.sh) > "$O" 2>&1 ||
      { cat "$O"; fail "jobs_ray_cli: ray job submit --working-dir"; }
    grep -q "Uploading package gcs://_ray_pkg_" "$O" && grep -q "Job 'ray-wd' succeeded" "$O" &&
      grep -Eqx "cwd=$ROOT/node-127.0.0.1/jobs/[0-9]+/wd" "$O" && grep -qx "ray payload" "$O" &&
      grep -qx "last line" "$O" && grep -q "close code 1000" "$O" ||
      { cat "$O"; fail "jobs_ray_cli: the submitted job's output or end"; }
    grep -qx "caf\(é\|\xc3\xa9\) \(�\|\xef\xbf\xbd\)" "$O" || { cat "$O"; fail "jobs_ray_cli: a bad byte not as U+FFFD in the tail"; }
    # the same directory again: the package is there, not uploaded twice
    (cd "$WD" && "$RAY" job submit $A --no-wait --working-dir . -- ./run.sh) > "$O" 2>&1 || { cat "$O"; fail "jobs_ray_cli: second submit"; }
    grep -q "already exists, skipping upload" "$O" || { cat "$O"; fail "jobs_ray_cli: the package uploaded again"; }
    # a failing job: ray job submit says so and exits 1
    "$RAY" job submit $A --submission-id ray-bad -- sh -c 'echo oops; exit 3' > "$O" 2>&1 && { cat "$O"; fail "jobs_ray_cli: a failing job's submit exit 0"; }
    grep -q "Job 'ray-bad' failed" "$O" && grep -qx "oops" "$O" && grep -q "FAILED (exit 3)" "$O" ||
      { cat "$O"; fail "jobs_ray_cli: the failing job"; }
    # (status, logs, list, delete: Ray's click commands in one Python
    # process, tests/cluster/ray_batch.py, its start-up paid once)
    J="$RAYDIST_TMPDIR/rb"
    mkdir -p "$J"
    rb() { "$(dirname "$RAY")/python" "$(dirname "$0")/ray_batch.py" "$J" > "$O" 2>&1 || { cat "$O"; fail "jobs_ray_cli: a ray command"; }; }
    rb <<EOF
status job status $A ray-bad
logs job logs $A ray-wd
EOF
    cat "$J/status" "$J/status.err" | grep -q "Job 'ray-bad' failed" || { cat "$J/status" "$J/status.err"; fail "jobs_ray_cli: status"; }
    grep -qx "ray payload" "$J/logs" || { cat "$J/logs"; fail "jobs_ray_cli: logs"; }
    # --no-wait, logs --follow while it runs, stop (the follower ends with it), delete
    "$RAY" job submit $A --no-wait --submission-id ray-long -- sh -c 'echo started; exec sleep 60' > "$O" 2>&1 || { cat "$O"; fail "jobs_ray_cli: --no-wait"; }
    "$RAY" job logs $A --follow ray-long > "$RAYDIST_TMPDIR/follow" 2>&1 &
    FOLLOW=$!
    for i in $(seq 1 100); do grep -qx started "$RAYDIST_TMPDIR/follow" && break; sleep 0.1; done
    grep -qx started "$RAYDIST_TMPDIR/follow" || { cat "$RAYDIST_TMPDIR/follow"; fail "jobs_ray_cli: logs --follow shows nothing"; }
    kill -0 "$FOLLOW" 2>/dev/null || fail "jobs_ray_cli: logs --follow ended while the job runs"
    "$RAY" job stop $A ray-long > "$O" 2>&1 && grep -q "Job 'ray-long' was stopped" "$O" || { cat "$O"; fail "jobs_ray_cli: stop"; }
    for i in $(seq 1 100); do kill -0 "$FOLLOW" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$FOLLOW" 2>/dev/null && fail "jobs_ray_cli: logs --follow did not end with the job"
    wait "$FOLLOW" || { cat "$RAYDIST_TMPDIR/follow"; fail "jobs_ray_cli: logs --follow failed"; }
    rb <<EOF
list job list $A
delete job delete $A ray-long
!gone job status $A ray-long
EOF
    for sid in ray-wd ray-bad ray-long; do grep -q "submission_id='$sid'" "$J/list" || { cat "$J/list"; fail "jobs_ray_cli: $sid not listed"; }; done
    cat "$J/delete" "$J/delete.err" | grep -q "deleted successfully" || { cat "$J/delete" "$J/delete.err"; fail "jobs_ray_cli: delete"; }
    # entrypoint resources: both of the head's CPUs held while the job runs
    # (it reads the node's metrics); what the head has not, refused with its words
    cat > "$RAYDIST_TMPDIR/cpu_free.py" <<EOF
import urllib.request
for l in urllib.request.urlopen("http://$M/metrics", timeout=10).read().decode().splitlines():
    if l.startswith('raydist_resources_available{resource="CPU"} '):
        print("cpu free", l.split()[1])
EOF
    "$RAY" job submit $A --submission-id ray-res --entrypoint-num-cpus 2 -- python3 "$RAYDIST_TMPDIR/cpu_free.py" > "$O" 2>&1 &&
      grep -q "Job 'ray-res' succeeded" "$O" && grep -qx "cpu free 0" "$O" || { cat "$O"; fail "jobs_ray_cli: --entrypoint-num-cpus"; }
    "$RAY" job submit $A --entrypoint-num-gpus 1 -- true > "$O" 2>&1 && { cat "$O"; fail "jobs_ray_cli: a GPU job on a head without one"; }
    grep -q "status code 400.*GPU: 1} can never be held here" "$O" || { cat "$O"; fail "jobs_ray_cli: no reason for the GPU job"; }
    # runtime_env env_vars: the driver's, and its tasks' on b and actor's on c
    "$RAY" job submit $A --submission-id ray-env --runtime-env-json '{"env_vars": {"RD_CL_ENV": "job"}}' -- "$T" job_env \
      > "$O" 2>&1 && grep -q "Job 'ray-env' succeeded" "$O" && grep -q "the job's task on b: ran as 2|job" "$O" &&
      grep -q "the job's actor on c: ran as 3|job" "$O" || { cat "$O"; fail "jobs_ray_cli: --runtime-env-json env_vars"; }
    # what node b has and the head has not: run on b, followed through the head
    "$RAY" job submit $A --submission-id ray-on-b --entrypoint-resources '{"only_b": 1}' -- sh -c 'echo "on $RAYDIST_NODE_IP"; exit 4' \
      > "$O" 2>&1 && { cat "$O"; fail "jobs_ray_cli: the job on b exit 0"; }
    grep -qx "on 127.0.0.2" "$O" && grep -q "Job 'ray-on-b' failed" "$O" && grep -q "FAILED (exit 4)" "$O" ||
      { cat "$O"; fail "jobs_ray_cli: a job for node b"; }
    # a label selector only node b's labels satisfy: run there
    "$RAY" job submit $A --submission-id ray-west --entrypoint-label-selector '{"zone": "west"}' -- \
      sh -c 'echo "west on $RAYDIST_NODE_IP"' > "$O" 2>&1 && grep -qx "west on 127.0.0.2" "$O" &&
      grep -q "Job 'ray-west' succeeded" "$O" || { cat "$O"; fail "jobs_ray_cli: --entrypoint-label-selector"; }
    # they are the node's jobs
    "$R" job list > "$O" && grep -Eq " ray-wd +SUCCEEDED" "$O" && grep -Eq " ray-bad +FAILED \(exit 3\)" "$O" ||
      { cat "$O"; fail "jobs_ray_cli: raydist job list"; }
    # Ray's token mode sends the same header; no token is refused with Ray's message
    env -u RAY_JOB_HEADERS RAY_AUTH_MODE=token RAY_AUTH_TOKEN="$TOKEN" "$RAY" job status $A ray-bad > "$O" 2>&1 ||
      { cat "$O"; fail "jobs_ray_cli: RAY_AUTH_TOKEN"; }
    env -u RAY_JOB_HEADERS "$RAY" job list $A > "$O" 2>&1 && { cat "$O"; fail "jobs_ray_cli: a list without the token"; }
    grep -qi "token" "$O" || { cat "$O"; fail "jobs_ray_cli: no reason for the refusal"; }
    echo "ok: ray job submit/status/logs/--follow/stop/list/delete on the jobs API"
    ;;
  job_log_rotation)
    # a job's log rotated at 20 KB, four older segments kept: --follow from
    # the start sees every line once and in order across the cuts; `job
    # logs` afterwards (here and over --address) the kept tail, saying what
    # went; a line longer than twice the limit is cut
    job_id() { sed -n 's/^job \([0-9]*\) submitted.*/\1/p'; }
    export RAYDIST_ROTATION_MAX_BYTES=20000 RAYDIST_ROTATION_BACKUP_COUNT=4
    # 3000 lines of 71 bytes, 100 every 0.1 s (awk's system() flushes its output first)
    WRITER='BEGIN { for (i = 1; i <= 3000; i++) { printf "line %06d ..........................................................\n", i; if (i % 100 == 0) system("sleep 0.1") } }'
    "$R" job submit --name writer --follow -- awk "$WRITER" > "$RAYDIST_TMPDIR/fol" 2> "$RAYDIST_TMPDIR/folerr" ||
      { cat "$RAYDIST_TMPDIR/folerr"; fail "job_log_rotation: the writer failed"; }
    J=$(job_id < "$RAYDIST_TMPDIR/fol")
    [ -n "$J" ] || fail "job_log_rotation: no job id"
    [ -s "$RAYDIST_TMPDIR/folerr" ] && { cat "$RAYDIST_TMPDIR/folerr"; fail "job_log_rotation: --follow lost lines"; }
    grep '^line ' "$RAYDIST_TMPDIR/fol" | cut -c6-11 > "$RAYDIST_TMPDIR/seen"
    seq -f %06g 1 3000 | cmp -s - "$RAYDIST_TMPDIR/seen" || fail "job_log_rotation: --follow did not show lines 1-3000 once, in order"
    JD="$ROOT/node-127.0.0.1/jobs/$J"
    ls -l "$JD"
    [ "$(readlink "$JD/log")" = "log.$(ls "$JD" | sed -n 's/^log\.\([0-9]*\)$/\1/p' | sort -n | tail -1)" ] ||
      fail "job_log_rotation: log does not point at the newest segment"
    [ "$(ls "$JD" | grep -c '^log\.[0-9]*$')" = 5 ] || fail "job_log_rotation: not 5 segments kept"
    [ -e "$JD/log.0" ] && fail "job_log_rotation: the first segment was not removed"
    # each segment starts where its name says and (but the newest) ends a line past the limit
    for f in $(ls "$JD" | sed -n 's/^log\.\([0-9]*\)$/\1/p' | sort -n); do
      SZ=$(stat -c %s "$JD/log.$f")
      [ $((f % 71)) = 0 ] || fail "job_log_rotation: segment log.$f does not start a line"
      [ "log.$f" = "$(readlink "$JD/log")" ] && continue
      [ "$SZ" -ge 20000 ] && [ "$SZ" -lt 20071 ] || fail "job_log_rotation: segment log.$f has $SZ bytes"
    done
    # logs: the kept tail, whole lines to the last, and a word on the rest
    "$R" job logs "$J" > "$RAYDIST_TMPDIR/tail" 2> "$RAYDIST_TMPDIR/tailerr" || fail "job_log_rotation: job logs"
    grep -q "bytes of the log were rotated away" "$RAYDIST_TMPDIR/tailerr" || fail "job_log_rotation: nothing said of the rotated bytes"
    FIRST=$(head -1 "$RAYDIST_TMPDIR/tail" | cut -c6-11)
    seq -f %06g "$FIRST" 3000 | cmp -s - "$(cut -c6-11 "$RAYDIST_TMPDIR/tail" > "$RAYDIST_TMPDIR/tailn"; echo "$RAYDIST_TMPDIR/tailn")" ||
      fail "job_log_rotation: job logs is not lines $FIRST-3000"
    [ "$FIRST" -gt 1 ] && [ "$(wc -l < "$RAYDIST_TMPDIR/tail")" -gt 1100 ] || fail "job_log_rotation: $FIRST is the first line kept"
    # the same over a tool link, in 1 MiB replies from the same offsets
    TOKEN=$(cat "$ROOT/node-127.0.0.1/token")
    RAYDIST_TMPDIR="$RAYDIST_TMPDIR/elsewhere" "$R" job logs "$J" --address "$ADDR" --token "$TOKEN" > "$RAYDIST_TMPDIR/rtail" 2> "$RAYDIST_TMPDIR/rerr" ||
      { cat "$RAYDIST_TMPDIR/rerr"; fail "job_log_rotation: remote logs"; }
    cmp -s "$RAYDIST_TMPDIR/tail" "$RAYDIST_TMPDIR/rtail" || fail "job_log_rotation: remote logs differ"
    grep -q "bytes of the log were rotated away" "$RAYDIST_TMPDIR/rerr" || fail "job_log_rotation: nothing said remotely"
    # a 50 KB line with no end is cut at twice the limit
    LONGJ=$("$R" job submit -- awk 'BEGIN { for (i = 0; i < 50000; i++) printf "x"; printf "\nend\n" }' | job_id)
    "$R" job wait "$LONGJ" --timeout 30 || fail "job_log_rotation: the long line's job"
    LD="$ROOT/node-127.0.0.1/jobs/$LONGJ"
    ls -l "$LD"
    [ "$(stat -c %s "$LD/log.0")" -ge 40000 ] && [ "$(stat -c %s "$LD/log.0")" -lt 50000 ] || fail "job_log_rotation: the long line not cut past 40 KB"
    [ "$("$R" job logs "$LONGJ" | wc -c)" = 50005 ] || fail "job_log_rotation: the long line's log is not whole"
    # a malformed setting: the submit refused, with the reason, and no job made
    RAYDIST_ROTATION_MAX_BYTES=lots "$R" job submit -- /bin/true 2> "$RAYDIST_TMPDIR/err" && fail "job_log_rotation: submitted with a bad setting"
    grep -q "RAYDIST_ROTATION_MAX_BYTES must be a whole number" "$RAYDIST_TMPDIR/err" || fail "job_log_rotation: no reason for a bad setting"
    [ "$(ls "$ROOT/node-127.0.0.1/jobs" | wc -l)" = 2 ] || fail "job_log_rotation: a refused submit made a job"
    ;;
  namespaces)
    # named actors per namespace, across drivers (one after another) and nodes
    RAYDIST_NAMESPACE=team_a "$T" ns_make || fail "ns_make"
    RAYDIST_NAMESPACE=team_b "$T" ns_other || fail "ns_other"
    RAYDIST_NAMESPACE=team_a "$T" ns_same || fail "ns_same"
    ;;
  owner_exit)
    "$T" owner_exit_child || fail "owner_exit_child"
    "$T" owner_exit_check || fail "owner_exit_check"
    ;;
  log_to_driver)
    # what workers print, on whatever node, reaches the driver, prefixed
    "$T" "$CASE" > "$RAYDIST_TMPDIR/out" 2> "$RAYDIST_TMPDIR/err" || { cat "$RAYDIST_TMPDIR/err"; fail "$CASE"; }
    for want in "ip=127.0.0.2) say task-on-b stdout 0" "ip=127.0.0.2) say task-on-b stdout 2" \
                "ip=127.0.0.3) say nested-on-c stdout 1" "ip=127.0.0.1) say task-here stdout 1" \
                "ip=127.0.0.3) say actor-on-c stdout" "ip=127.0.0.3) no newline at the end"; do
      grep -qF "$want" "$RAYDIST_TMPDIR/out" || { cat "$RAYDIST_TMPDIR/out"; fail "$CASE: no '$want' on stdout"; }
    done
    for want in "ip=127.0.0.2) say task-on-b stderr" "ip=127.0.0.3) say nested-on-c stderr"; do
      grep -qF "$want" "$RAYDIST_TMPDIR/err" || { cat "$RAYDIST_TMPDIR/err"; fail "$CASE: no '$want' on stderr"; }
    done
    grep -q "say task-on-b stdout" "$RAYDIST_TMPDIR/err" && fail "$CASE: stdout lines on stderr"
    # the 20 KB line comes in pieces, every x of it
    X=$(grep -F "ip=127.0.0.3)" "$RAYDIST_TMPDIR/out" | grep -v "say\|no newline" | sed 's/^(Tally pid=[0-9]*, ip=[0-9.]*) //' | tr -d '\nlong ' | wc -c)
    [ "$X" -eq 19999 ] || fail "$CASE: the long line came as $X x's, not 19999"
    # and the node that ran it kept it in the worker's file
    cat "$ROOT"/node-127.0.0.2/logs/worker-*.out | grep -qxF "say task-on-b stdout 1" || fail "$CASE: not in a worker file on b"
    # the task say_nested (run on b) submitted names it as its parent: the
    # child's row, on b (its owner is b's worker), gives the parent's id as
    # the head names the parent's row (NODE-OWNERPID-TASK)
    python3 - "$(cat "$ROOT/node-127.0.0.1/metrics")" "$(cat "$ROOT/node-127.0.0.2/metrics")" <<'PY' || fail "$CASE: parent_task_id"
import json, sys, time, urllib.request
get = lambda m: json.load(urllib.request.urlopen("http://" + m + "/api/tasks?state=FINISHED&limit=1000", timeout=10))
for i in range(50):
    h, b = get(sys.argv[1]), get(sys.argv[2])
    par = [t for t in h["tasks"] if t["func"] == "say_nested"]
    kids = [t for t in b["tasks"] if t["func"] == "say" and t["parent"]]
    if par and kids:
        break
    time.sleep(0.1)
assert len(par) == 1 and par[0]["parent"] == "", par
pid = "%04x-%08x-%016x" % (h["node"], par[0]["owner_pid"], par[0]["task_id"])
assert [k["parent"] for k in kids] == [pid], (pid, kids)
assert all(t["parent"] == "" for t in h["tasks"]), h["tasks"]   # the driver's own tasks have none
print("say's parent", pid)
PY
    # a driver that asks for none gets none
    RAYDIST_LOG_TO_DRIVER=0 "$T" "$CASE" > "$RAYDIST_TMPDIR/out" 2>&1 || fail "$CASE without output"
    grep -q "(pid=" "$RAYDIST_TMPDIR/out" && { cat "$RAYDIST_TMPDIR/out"; fail "$CASE: output with RAYDIST_LOG_TO_DRIVER=0"; }
    # (b no longer sends it the lines, but keeps them in the worker's file all the same)
    [ "$(cat "$ROOT"/node-127.0.0.2/logs/worker-*.out | grep -cxF "say task-on-b stdout 1")" = 2 ] ||
      fail "$CASE: the second run's lines not kept on b"
    echo "ok: worker output on the driver, from three nodes"
    ;;
  task_logs)
    # an actor's calls' lines apart in its worker's files with
    # RAYDIST_RECORD_ACTOR_TASK_LOGGING=1 (each call's range, a line left
    # without its newline in the call that printed it), and without it
    # (the calls not recorded: raydist logs task says so and why); the
    # driver's lines prefixed with the actor's class, as Ray's
    "$T" actor_task_logs > "$RAYDIST_TMPDIR/out" 2>&1 || { cat "$RAYDIST_TMPDIR/out"; fail "actor_task_logs"; }
    grep -q "^(Tally pid=[0-9]*, ip=127.0.0.2) say actor-on-c stdout$" "$RAYDIST_TMPDIR/out" ||
      { cat "$RAYDIST_TMPDIR/out"; fail "$CASE: the actor's lines not prefixed with its class"; }
    RA=$(sed -n 's/^recorded //p' "$RAYDIST_TMPDIR/out") PA=$(sed -n 's/^plain //p' "$RAYDIST_TMPDIR/out")
    # bytes that only look like a mark are the worker's output, kept and printed
    [ "$(cat "$ROOT"/node-127.0.0.2/logs/worker-*.out | grep -c "rd:bogus mark$\|rd:task not-an-id$")" = 2 ] &&
      grep -q "^(say_fake_mark pid=[0-9]*, ip=127.0.0.2) fake .*rd:bogus mark$" "$RAYDIST_TMPDIR/out" ||
      { cat -v "$RAYDIST_TMPDIR/out" | grep -v xxxx; fail "$CASE: output like a mark lost"; }
    L="$RAYDIST_TMPDIR/logs.out"
    python3 - "$(cat "$ROOT/node-127.0.0.1/metrics")" "$(cat "$ROOT/node-127.0.0.1/token")" "$RA" "$PA" \
      "$ROOT/node-127.0.0.2/logs" > "$RAYDIST_TMPDIR/tids" <<'PY' || fail "$CASE: the calls' rows and ranges"
import json, sys, urllib.request
addr, token, ra, pa, logs = sys.argv[1:6]
q = urllib.request.Request("http://%s/api/v0/tasks?limit=1000&detail=True" % addr,
                           headers={"Authorization": "Bearer " + token})
rows = json.load(urllib.request.urlopen(q, timeout=30))["data"]["result"]["result"]
rec = sorted([r for r in rows if r["name"] == "Tally.say" and r["actor_id"] == ra], key=lambda r: r["task_id"])
plain = [r for r in rows if r["name"] == "Tally.say" and r["actor_id"] == pa]
assert len(rec) == 2 and len(plain) == 1, rows
want = "say actor-on-c stdout\nlong " + "x" * 19999 + "\nno newline at the end"
for i, r in enumerate(rec):
    info = r["task_log_info"]
    data = open(logs + "/" + info["stdout_file"]).read()
    end = info["stdout_end"] if i == 0 else len(data)
    assert info["stdout_start"] == (0 if i == 0 else len(want)) and data[info["stdout_start"]:end] == want, (i, info)
    assert (info["stdout_end"] is None) == (i == 1), info
info = plain[0]["task_log_info"]
assert info["stdout_file"] and info["stdout_start"] is None and info["stdout_end"] is None, info
print(rec[0]["task_id"], plain[0]["task_id"])
PY
    read -r RT PT < "$RAYDIST_TMPDIR/tids"
    "$R" logs task --id "$RT" > "$L" || { cat "$L"; fail "$CASE: raydist logs task of a recorded call"; }
    [ "$(head -n 1 "$L")" = "say actor-on-c stdout" ] && [ "$(tail -n 1 "$L")" = "no newline at the end" ] &&
      [ "$(wc -l < "$L")" = 2 ] || { cat "$L" | cut -c1-80; fail "$CASE: the recorded call's lines"; }
    "$R" logs task --id "$PT" > "$L" 2>&1 && fail "$CASE: an unrecorded call's lines given"
    grep -q "no lines of task $PT are recorded on this node.*RAYDIST_RECORD_ACTOR_TASK_LOGGING=1" "$L" ||
      { cat "$L"; fail "$CASE: no reason for an unrecorded call"; }
    echo "ok: task logs"
    ;;
  log_dedup)
    # the same line from three workers on two nodes: printed once, then
    # once more with how many, within the window, while the driver idles;
    # one worker's own repeats are all printed; RAYDIST_DEDUP_LOGS=0 prints
    # every line; a bad window is refused
    O="$RAYDIST_TMPDIR/out"
    RAYDIST_DEDUP_LOGS_AGG_WINDOW_S=1 "$T" "$CASE" > "$O" 2>&1 || { cat "$O"; fail "$CASE"; }
    cat "$O"
    [ "$(grep -c 'dedup-me hello from a worker [0-9]*$' "$O")" = 1 ] || fail "$CASE: the first line not printed once"
    grep -q 'dedup-me hello from a worker [0-9]* \[repeated 2x across cluster\] (raydist deduplicates' "$O" ||
      fail "$CASE: no [repeated 2x across cluster] line"
    sed -n '/repeated 2x/,$p' "$O" | grep -q '^driver: idled$' || fail "$CASE: the repeats came after the driver's idle"
    for t in a b c; do   # prefixed with the task's name, as Ray's
      grep -q "^(say_same pid=[0-9]*, ip=127.0.0.[23]) only task $t says this$" "$O" || fail "$CASE: task $t's own line"
      [ "$(grep -c "^(say_same pid=[0-9]*, ip=127.0.0.[23]) task $t again and again$" "$O")" = 3 ] || fail "$CASE: task $t's repeats"
    done
    RAYDIST_DEDUP_LOGS=0 "$T" "$CASE" > "$O" 2>&1 || { cat "$O"; fail "$CASE with RAYDIST_DEDUP_LOGS=0"; }
    [ "$(grep -c 'dedup-me hello from a worker [0-9]*$' "$O")" = 3 ] || { cat "$O"; fail "$CASE: not every line without dedup"; }
    grep -q "repeated" "$O" && fail "$CASE: [repeated] with RAYDIST_DEDUP_LOGS=0"
    RAYDIST_DEDUP_LOGS_AGG_WINDOW_S=soon "$T" "$CASE" > "$O" 2>&1 && fail "$CASE: a bad window taken"
    grep -q "RAYDIST_DEDUP_LOGS_AGG_WINDOW_S must be seconds" "$O" || { cat "$O"; fail "$CASE: no reason for a bad window"; }
    echo "ok: workers' lines deduplicated on the driver"
    ;;
  stack)
    # raydist stack: a task stuck on b (in stack_spin_wait, beside a thread
    # sleeping and one that blocks every signal) and its driver (in rd_get
    # on the head) each write their threads' stacks when signalled; the task
    # goes on after it, and no file is left behind
    export RD_WORKER_PID="$RAYDIST_TMPDIR/wpid"
    hold_start stack_hold
    for i in $(seq 1 200); do [ -s "$RD_WORKER_PID" ] && break; sleep 0.1; done
    WP=$(cat "$RD_WORKER_PID")
    L="$RAYDIST_TMPDIR/stack.out"
    T0=$(date +%s%N)
    "$R" stack > "$L" || { cat "$L"; fail "raydist stack"; }
    T1=$(date +%s%N)
    "$R" stack --pid "$PID" > /dev/null || fail "raydist stack --pid (the driver)"
    echo "raydist stack took $(( (T1 - T0) / 1000000 )) ms (one thread that does not answer: 1 s of it);" \
      "--pid of the driver $(( ($(date +%s%N) - T1) / 1000000 )) ms"
    cat "$L"
    # the worker's section: from its header to the next process
    awk -v h="^worker pid $WP " '$0 ~ h {on=1} on && /^(driver|worker) pid / && $0 !~ h {on=0} on' "$L" > "$L.w"
    grep -Eq "^worker pid $WP \(worker [0-9a-f]{8}\), job [0-9]+:$" "$L.w" && grep -q "^process $WP$" "$L.w" &&
      grep -Eq "^thread $WP \(.+\) \(main\)$" "$L.w" && grep -Eq "\(\+0x[0-9a-f]+\)\[0x[0-9a-f]+\] stack_spin_wait at cluster_test\.c:[0-9]+" "$L.w" &&
      grep -Eq "\] stack_stuck_impl at cluster_test\.c:[0-9]+" "$L.w" && grep -Eq "\] stack_helper_sleep at cluster_test\.c:[0-9]+" "$L.w" &&
      grep -Eq "^/lib/.*libc\.so\.6\(usleep\+0x[0-9a-f]+\)" "$L.w" &&
      [ "$(grep -c ': no answer within 1 s (it blocks the signal, or cannot run)$' "$L.w")" = 1 ] ||
      { cat "$L.w"; fail "stack: the stuck worker's threads"; }
    grep -q "^node 1 (127.0.0.1):$" "$L" && grep -q "^node 2 (127.0.0.2):$" "$L" && grep -q "^node 3 (127.0.0.3):$" "$L" &&
      grep -Eq "^driver pid $PID(, job [0-9]+)?:$" "$L" && grep -q "(rd_get+0x" "$L" || fail "stack: the nodes, the driver in rd_get"
    # one process, by pid; through another node's address too
    "$R" stack --pid "$WP" > "$L" || { cat "$L"; fail "raydist stack --pid"; }
    [ "$(grep -Ec '^(driver|worker) pid ' "$L")" = 1 ] && grep -q "^node 2 (127.0.0.2):$" "$L" &&
      grep -q "stack_spin_wait at cluster_test" "$L" || { cat "$L"; fail "stack --pid: not the worker alone"; }
    "$R" stack --pid "$PID" --node-ip 127.0.0.1 > "$L" || { cat "$L"; fail "raydist stack --pid --node-ip"; }
    [ "$(grep -Ec '^(driver|worker) pid ' "$L")" = 1 ] && grep -q "(rd_get+0x" "$L" || { cat "$L"; fail "stack: the driver"; }
    # bad input: no such process, no token, a bad query, a bad option
    "$R" stack --pid 1 > "$L" 2>&1 && fail "stack: pid 1 answered"
    grep -q "no driver or worker has pid 1 on any live node" "$L" || { cat "$L"; fail "stack: no reason for pid 1"; }
    "$R" stack --pid x > /dev/null 2>&1 && fail "stack: took --pid x"
    python3 - "$(cat "$ROOT/node-127.0.0.2/metrics")" "$(cat "$ROOT/node-127.0.0.2/token")" <<'PY' || fail "stack: bad requests"
import sys, urllib.request, urllib.error
base, tok = "http://" + sys.argv[1], sys.argv[2]
def get(path, auth=True):
    rq = urllib.request.Request(base + path, headers={"Authorization": "Bearer " + tok} if auth else {})
    try:
        r = urllib.request.urlopen(rq, timeout=30)
        return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
for path, auth, code, words in [("/api/stack", False, 401, "cluster token"), ("/api/stack?pid=abc", True, 400, "pid=P"),
                                ("/api/stack?depth=3", True, 400, "pid=P"), ("/api/stack?pid=1", True, 404, "no driver or worker")]:
    got = get(path, auth)
    assert got[0] == code and words in got[1], (path, got)
PY
    touch "$RAYDIST_TMPDIR/done"
    wait $HOLD || { cat "$RAYDIST_TMPDIR/hold.log"; fail "stack_hold: the task did not finish well after the dumps"; }
    ls "$ROOT"/node-127.0.0.*/logs/ | grep -q '^stack-' && { ls "$ROOT"/node-127.0.0.*/logs/; fail "stack: files left"; }
    unset RD_WORKER_PID
    echo "ok: raydist stack"
    ;;
  logs)
    # each worker's stdout and stderr in files of their own on its node,
    # listed and read through any node (raydist logs, GET /api/v0/logs):
    # by name, by pid, by actor, by task, the last lines, followed as it
    # grows; bad input refused with why; a crashed worker in ray list
    # workers with why, and its stderr
    hold_start logs_hold
    B="$ROOT/node-127.0.0.2" L="$RAYDIST_TMPDIR/logs.out"
    grep -lF "say task-on-b stdout 2" "$B"/logs/worker-*-*-*.out > "$RAYDIST_TMPDIR/bfile" ||
      { ls -l "$B/logs"; fail "logs: the task's lines are not in a worker file on b"; }
    BF=$(basename "$(head -n 1 "$RAYDIST_TMPDIR/bfile")")
    BPID=$(echo "$BF" | sed 's/^worker-[0-9a-f]*-[0-9]*-\([0-9]*\)\.out$/\1/')
    grep -qxF "say task-on-b stderr" "$B/logs/${BF%.out}.err" || fail "logs: the task's stderr is not in ${BF%.out}.err"
    grep -qF "say task-on-b" "$B/node.log" && fail "logs: the worker's lines went to b's node.log too"
    # every node's files, by Ray's categories
    "$R" logs > "$L" || { cat "$L"; fail "raydist logs"; }
    for want in "node 1 (127.0.0.1" "node 3 (127.0.0.3" "  raylet:" "  gcs_server:" "    gcs.log" "    $BF" "  worker_err:"; do
      grep -qF "$want" "$L" || { cat "$L"; fail "logs: no '$want' in raydist logs"; }
    done
    # one match is printed: the file by name, its last 2 lines
    "$R" logs "$BF" --node-ip 127.0.0.2 --tail 2 > "$L" || { cat "$L"; fail "raydist logs $BF"; }
    printf 'say again-on-b stdout 1\nsay again-on-b stdout 2\n' | cmp -s - "$L" || { cat "$L"; fail "logs: the last two lines of $BF"; }
    grep -q "$(printf '\036')" "$B"/logs/worker-* && fail "logs: a task mark left in a worker's file"
    "$R" logs worker --pid "$BPID" --node-ip 127.0.0.2 --err > "$L" && grep -qxF "say task-on-b stderr" "$L" ||
      { cat "$L"; fail "logs: the worker's stderr by pid"; }
    # an actor's file (through node b), its 20 KB line whole
    AID=$(cat "$RAYDIST_TMPDIR/actor")
    "$R" logs actor --id "$AID" > "$L" || { cat "$L"; fail "raydist logs actor"; }
    grep -qxF "say actor-on-c stdout" "$L" || { grep -v '^long' "$L"; fail "logs: the actor's line"; }
    [ "$(grep '^long x' "$L" | tr -d '\nlong ' | wc -c)" -eq 19999 ] || fail "logs: the actor's long line is not whole"
    # the tasks, found by their ids among the finished and failed tasks:
    # each one's lines alone, though the three ran on one worker (its
    # row's task_log_info names its worker's files and where its lines are)
    python3 - "$(cat "$ROOT/node-127.0.0.1/metrics")" "$(cat "$ROOT/node-127.0.0.1/token")" "$BF" "$B/logs" \
      > "$RAYDIST_TMPDIR/tids" <<'PY' || fail "logs: the say tasks not listed with their files and ranges"
import json, sys, urllib.request
q = urllib.request.Request("http://%s/api/v0/tasks?limit=100&detail=True" % sys.argv[1],
                           headers={"Authorization": "Bearer " + sys.argv[2]})
rows = json.load(urllib.request.urlopen(q, timeout=30))["data"]["result"]["result"]
says = [r for r in rows if r["name"] == "say" and r["state"] == "FINISHED"]
crash = [r for r in rows if r["name"] == "crash_loudly"]
assert len(says) == 2 and len(crash) == 1, rows
err = sys.argv[3][:-4] + ".err"
texts = []
for r in says:
    info = r["task_log_info"]
    assert info["stdout_file"] == sys.argv[3] and info["stderr_file"] == err, r
    with open(sys.argv[4] + "/" + sys.argv[3], "rb") as f:
        out = f.read()
    end = info["stdout_end"] if info["stdout_end"] is not None else len(out)
    texts.append(out[info["stdout_start"]:end].decode())
    print(r["task_id"])
assert sorted(texts) == ["say again-on-b stdout 0\nsay again-on-b stdout 1\nsay again-on-b stdout 2\n",
                         "say task-on-b stdout 0\nsay task-on-b stdout 1\nsay task-on-b stdout 2\n"], texts
info = crash[0]["task_log_info"]
assert info["stderr_file"] == err and info["stderr_start"] > 0 and info["stderr_end"] is None, crash
print(crash[0]["task_id"])
PY
    for TID in $(head -n 2 "$RAYDIST_TMPDIR/tids"); do
      "$R" logs task --id "$TID" > "$L" || { cat "$L"; fail "logs: raydist logs task"; }
      [ "$(wc -l < "$L")" = 3 ] && [ "$(sort -u "$L" | sed 's/ stdout [0-9]$//' | sort -u | wc -l)" = 1 ] &&
        grep -qx "say [a-z]*-on-b stdout 0" "$L" || { cat "$L"; fail "logs: task $TID's lines are not its three alone"; }
      "$R" logs task --id "$TID" --err > "$L" && grep -qx "say [a-z]*-on-b stderr" "$L" && [ "$(wc -l < "$L")" = 1 ] ||
        { cat "$L"; fail "logs: task $TID's stderr line is not alone"; }
    done
    # its line, then the worker's crash report (src/stack.c): what, the task, its stack
    "$R" logs task --id "$(sed -n 3p "$RAYDIST_TMPDIR/tids")" --err > "$L" &&
      [ "$(head -n 1 "$L")" = "crash_loudly: about to abort" ] &&
      sed -n 2p "$L" | grep -q "^\*\*\* raydist worker $BPID: died of SIGABRT (Aborted) while running task 'crash_loudly' (.*); its stack:\$" &&
      grep -q "(abort+0x" "$L" || { cat "$L"; fail "logs: the crashed task's stderr"; }
    # followed: the actor prints again, and the follower shows it
    "$R" logs actor --id "$AID" --follow > "$RAYDIST_TMPDIR/follow" 2>&1 &
    FOLLOW=$!
    sleep 1
    touch "$RAYDIST_TMPDIR/more"
    # (after the first call's line without a newline)
    for _i in $(seq 1 50); do [ "$(grep -c 'say actor-on-c stdout$' "$RAYDIST_TMPDIR/follow")" = 2 ] && break; sleep 0.2; done
    kill $FOLLOW
    [ "$(grep -c 'say actor-on-c stdout$' "$RAYDIST_TMPDIR/follow")" = 2 ] ||
      { grep -v '^long' "$RAYDIST_TMPDIR/follow"; fail "logs: --follow did not show the new lines"; }
    # the HTTP API: Ray's envelope and categories; refusals
    python3 - "$(cat "$ROOT/node-127.0.0.3/metrics")" "$(cat "$ROOT/node-127.0.0.1/token")" "$BF" "$BPID" \
      "$RAYDIST_TMPDIR/dead" <<'PY' || fail "logs: the HTTP API"
import json, sys, urllib.error, urllib.request
addr, token, bf, bpid = sys.argv[1:5]
def get(path, code, want, auth=True):
    q = urllib.request.Request("http://" + addr + path, headers={"Authorization": "Bearer " + token} if auth else {})
    try:
        r = urllib.request.urlopen(q, timeout=30)
        got, body = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        got, body = e.code, e.read().decode()
    assert got == code and want in body, (path, got, body[:300])
    return body
j = json.loads(get("/api/v0/logs?node_ip=127.0.0.2", 200, ""))
res = j["data"]["result"]
assert j["result"] is True and bf in res["worker_out"] and "node.log" in res["raylet"], res
assert all(f.endswith(".err") for f in res["worker_err"]), res
j = json.loads(get("/api/v0/logs?node_ip=127.0.0.2&glob=*.err", 200, ""))
assert list(j["data"]["result"]) == ["worker_err"], j
t = get("/api/v0/logs/file?node_ip=127.0.0.2&filename=" + bf + "&lines=1", 200, "")
assert t == "say again-on-b stdout 2\n", t
t = get("/api/v0/logs/file?node_ip=127.0.0.2&pid=" + bpid + "&lines=-1&offset=23&end=46", 200, "")
assert t == "say task-on-b stdout 1\n", t
tids = open(sys.argv[5].rsplit("/", 1)[0] + "/tids").read().split()
t = get("/api/v0/logs/file?task_id=" + tids[0] + "&lines=2", 200, "")   # the task's last two lines
assert t.count("\n") == 2 and t.startswith("say ") and " stdout 1\n" in t and t.endswith(" stdout 2\n"), t
t = get("/api/v0/logs/file?task_id=" + tids[2] + "&suffix=err", 200, "")
assert t.startswith("crash_loudly: about to abort\n*** raydist worker " + bpid + ": died of SIGABRT (Aborted) while "
                    "running task 'crash_loudly' ("), t
j = json.loads(get("/api/v0/logs/file?task_id=" + tids[0] + "&stat=1", 200, ""))
assert j["filename"] == bf and j["node_ip"] == "127.0.0.2", j
get("/api/v0/logs/file?task_id=0001-00000001-0000000000000001", 404, "no task 0001-00000001-0000000000000001")
get("/api/logs/file?task=0001-00000001-0000000000000001", 404, "no lines of task 0001-00000001-0000000000000001 are recorded")
get("/api/logs/file?task=" + tids[0] + "&offset=3", 400, "task=ID names its own file and range")
get("/api/v0/logs/file?node_ip=127.0.0.2&filename=token", 400, "not a log's name")
get("/api/v0/logs/file?node_ip=127.0.0.2&filename=..%2Ftoken", 400, "not a log's name")
get("/api/v0/logs/file?node_ip=127.0.0.2&filename=nothing.log", 404, "no log 'nothing.log'")
get("/api/v0/logs/file?node_ip=127.0.0.2&pid=1", 404, "no out file of a worker with pid 1")
get("/api/v0/logs/file?pid=" + bpid, 400, "name the node")
get("/api/v0/logs/file?node_ip=127.0.0.2", 400, "name one of filename, pid, actor_id and task_id")
get("/api/v0/logs/file?actor_id=00000000deadbeef", 404, "no actor 00000000deadbeef")
get("/api/v0/logs/file?node_ip=127.0.0.9&filename=node.log", 404, "node ip 127.0.0.9")
get("/api/v0/logs/file?node_ip=127.0.0.2&filename=node.log&lines=lots", 400, "lines must be")
get("/api/v0/logs/file?node_ip=127.0.0.2&pid=" + bpid + "&suffix=log", 400, "Suffix log is not supported")
get("/api/v0/logs/stream?node_ip=127.0.0.2&filename=node.log", 501, "raydist logs")
get("/api/v0/logs", 400, "Both node id and node ip are not provided")
get("/api/v0/logs?node_ip=127.0.0.2", 401, "cluster token", auth=False)
get("/api/logs/file?filename=node.log", 401, "cluster token", auth=False)
# the worker that crashed: listed as exited, with why and when
j = json.loads(get("/api/v0/workers?limit=1000&detail=True&filter_keys=is_alive&filter_predicates=%3D&filter_values=False",
                   200, ""))
dead = [w for w in j["data"]["result"]["result"] if w["ip"] == "127.0.0.2"]
assert len(dead) == 1 and dead[0]["exit_type"] == "SYSTEM_ERROR", j
assert dead[0]["exit_detail"].startswith("killed by signal 6 (Aborted)"), dead
assert 0 < dead[0]["worker_launch_time_ms"] <= dead[0]["start_time_ms"] <= dead[0]["end_time_ms"], dead
open(sys.argv[5], "w").write("%d\n" % dead[0]["pid"])
print("logs: the HTTP API's answers and refusals; the crashed worker listed")
PY
    # raydist list workers says so too, and takes only its states
    "$R" list workers --state exited > "$L" || { cat "$L"; fail "raydist list workers --state exited"; }
    grep -Eq "^  [0-9a-f]{8} +$(cat "$RAYDIST_TMPDIR/dead") SYSTEM_ERROR .* killed by signal 6 \(Aborted\)" "$L" ||
      { cat "$L"; fail "logs: the crashed worker not in raydist list workers"; }
    grep -q "^node 2: [0-9]* workers alive (starting" "$L" && ! grep -q "  STATE " "$L" ||
      { cat "$L"; fail "logs: raydist list workers --state exited"; }
    "$R" list workers --state ALIVE > "$L" && grep -q "^  WORKER .* STATE " "$L" && ! grep -q "SYSTEM_ERROR" "$L" ||
      { cat "$L"; fail "logs: raydist list workers --state alive"; }
    "$R" list workers --state gone > "$L" 2>&1 && fail "logs: raydist list workers --state gone answered"
    # its stderr's last lines say why: its own, then its crash report
    "$R" logs worker --pid "$(cat "$RAYDIST_TMPDIR/dead")" --node-ip 127.0.0.2 --err --tail 40 > "$L" &&
      grep -qxF "crash_loudly: about to abort" "$L" &&
      grep -q "^\*\*\* raydist worker $(cat "$RAYDIST_TMPDIR/dead"): died of SIGABRT (Aborted)" "$L" ||
      { cat "$L"; fail "logs: the crashed worker's stderr"; }
    # the crash is a cluster event (Ray's), after the nodes' joins; only
    # errors with --state error
    DEAD=$(cat "$RAYDIST_TMPDIR/dead")
    listed_until 50 "ERROR +RAYLET +2  Worker [0-9]+ \(pid $DEAD, job [0-9]+\) died unexpectedly: killed by signal 6 \(Aborted\)" \
      list cluster-events --state error || { cat "$L"; fail "logs: the crash is not a cluster event"; }
    grep -q "INFO" "$L" && { cat "$L"; fail "logs: --state error listed other events"; }
    # and counted by its node's metrics, by Ray's exit type
    [ "$(metric 127.0.0.2 'raydist_workers_exited_total{exit_type="SYSTEM_ERROR"}')" = 1 ] &&
      [ "$(metric 127.0.0.3 'raydist_workers_exited_total{exit_type="SYSTEM_ERROR"}')" = 0 ] ||
      fail "logs: raydist_workers_exited_total"
    "$R" list cluster-events > "$L" || fail "raydist list cluster-events"
    cat "$L"
    grep -Eq "^cluster events: [0-9]+ kept \(ids 1\.\.[0-9]+\)$" "$L" || { cat "$L"; fail "logs: the events' count"; }
    for n in "1 \(127\.0\.0\.1, host [^)]*\) joined the cluster as its head with 2 CPU" "2 \(127\.0\.0\.2, host [^)]*\) joined the cluster with" \
      "3 \(127\.0\.0\.3, host [^)]*\) joined the cluster with .*only_c"; do
      grep -Eq "^  [0-9-]+ [0-9:]+  INFO +GCS +[123]  Node $n" "$L" || { cat "$L"; fail "logs: no event 'Node $n'"; }
    done
    "$R" list cluster-events --limit 1 > "$L" && [ "$(grep -c "^  20" "$L")" = 1 ] && grep -q "died unexpectedly" "$L" ||
      { cat "$L"; fail "logs: --limit 1 is not the newest event"; }
    "$R" list cluster-events --state loud > "$L" 2>&1 && fail "logs: raydist list cluster-events --state loud answered"
    # raydist status ends with it, as Ray's "Recent failures"
    "$R" status > "$L" || fail "logs: raydist status"
    tail -n 2 "$L" | head -n 1 | grep -q "^recent failures (the last hour" &&
      tail -n 1 "$L" | grep -Eq "^  [0-9]+s ago +ERROR +node 2: Worker [0-9]+ \(pid $DEAD, job [0-9]+\) died unexpectedly" ||
      { cat "$L"; fail "logs: raydist status has no recent failure"; }
    "$R" logs actor > "$L" 2>&1 && fail "logs: raydist logs actor without --id"
    grep -q "\-\-id is needed" "$L" || { cat "$L"; fail "logs: no reason for a missing --id"; }
    touch "$RAYDIST_TMPDIR/done"
    wait "$HOLD" || { cat "$RAYDIST_TMPDIR/hold.log"; fail "$CASE"; }
    echo "ok: workers' files listed and read by name, pid, actor and task, followed"
    ;;
  memory)
    # raydist memory: every node's store, while a driver holds a 4 MiB put on
    # the head and a 2 MiB result left on node b
    hold_start memory_hold
    "$R" memory --top 5 > "$RAYDIST_TMPDIR/mem" || { cat "$RAYDIST_TMPDIR/mem"; fail "raydist memory"; }
    cat "$RAYDIST_TMPDIR/mem"
    [ "$(grep -c '^node [0-9]*: ' "$RAYDIST_TMPDIR/mem")" = 3 ] || fail "raydist memory: not three nodes"
    grep -Eq "^ +[0-9a-f]{16} +4.000 MiB  memory +pins 0 +driver pid $PID$" "$RAYDIST_TMPDIR/mem" ||
      fail "raydist memory: no 4 MiB put of driver $PID"
    grep -Eq "^ +[0-9a-f]{16} +2.000 MiB  memory +pins 0 +a client of node [0-9]+$" "$RAYDIST_TMPDIR/mem" ||
      fail "raydist memory: no 2 MiB result on b owned by the head's driver"
    "$R" memory --top x > /dev/null 2>&1 && fail "raydist memory took --top x"
    touch "$RAYDIST_TMPDIR/done"
    wait $HOLD || { cat "$RAYDIST_TMPDIR/hold.log"; fail "memory_hold"; }
    # the driver is gone: so are its objects, on both nodes
    for i in $(seq 1 50); do
      "$R" memory > "$RAYDIST_TMPDIR/mem" && [ "$(grep -c ': 0 objects' "$RAYDIST_TMPDIR/mem")" = 3 ] && break
      sleep 0.1
    done
    [ "$(grep -c ': 0 objects' "$RAYDIST_TMPDIR/mem")" = 3 ] || { cat "$RAYDIST_TMPDIR/mem"; fail "objects left behind"; }
    ;;
  tasks)
    # raydist list tasks: a driver's unfinished tasks, by state, while they
    # wait for a file (tasks_hold says what it submitted)
    hold_start tasks_hold
    L="$RAYDIST_TMPDIR/tasks"
    # the driver reports its tasks every 100 ms and the actor call waits for
    # its actor: until the head lists all 8, two running (on b and on c)
    listed_until 200 '^node [0-9]+: 8 unfinished tasks \(RUNNING 2, .*PENDING_ARGS 3\)$' list tasks
    # the failed ones come with the driver's next report (every 100 ms), the
    # unfinished ones from asking it: the first list may be without them
    listed_until 50 '^  failed for good: 3 here' list tasks
    cat "$L"
    grep -Eq '^node [0-9]+: 8 unfinished tasks \(RUNNING 2, .*PENDING_ARGS 3\)$' "$L" || fail "list tasks: not 8 on the head"
    [ "$(grep -c '^node [0-9]*: 0 unfinished tasks$' "$L")" = 2 ] || fail "list tasks: b and c own none"
    [ "$(grep -c " driver pid $PID " "$L")" = 11 ] || fail "list tasks: not 8 rows of driver $PID and 3 failed"
    grep -Eq "^  [0-9a-f]{16} RUNNING +[0-9.]+s wait_file +driver pid $PID +worker pid [0-9]+$" "$L" ||
      fail "list tasks: no running wait_file on a worker"
    grep -Eq "^  [0-9a-f]{16} RUNNING +[0-9.]+s Tally\.wait_file +driver pid $PID +worker pid [0-9]+, actor [0-9a-f]{16}$" "$L" ||
      fail "list tasks: no running actor call"
    [ "$(grep -Ec "^  [0-9a-f]{16} PENDING_ARGS +[0-9.]+s arg_len +driver pid $PID +1 argument not ready$" "$L")" = 3 ] ||
      fail "list tasks: not three arg_len waiting for their argument"
    # the other two wait_file tasks wait for b's only_b, or behind the first on its worker
    [ "$(grep -Ec "^  [0-9a-f]{16} (PENDING_LEASE .* wants \{CPU: 1, GPU: 0, only_b: 1\}|SUBMITTED .* worker pid [0-9]+)$" "$L")" = 2 ] ||
      fail "list tasks: not two wait_file behind the first"
    # by function, however the wait_file tasks are split
    grep -Eq '^    arg_len +3  PENDING_ARGS 3$' "$L" && grep -Eq '^    wait_file +3  RUNNING 1, ' "$L" &&
      grep -Eq '^    Tally\.wait_file +2  RUNNING 1, (SUBMITTED|PENDING_ACTOR) 1$' "$L" &&
      [ "$(grep -Ec '^    (slow_where|slow_pid|where) +1  FAILED 1$' "$L")" = 3 ] || fail "list tasks: by function"
    # the three that failed for good, most recent first, with their errors
    grep -q '^  failed for good: 3 here, the last 3 kept (0 not detailed by their owners)$' "$L" ||
      fail "list tasks: not 3 failed"
    "$R" list tasks --state FAILED > "$L" || fail "list tasks --state FAILED"
    cat "$L"
    [ "$(grep -c '^  [0-9a-f]\{16\} ' "$L")" = 3 ] || fail "list tasks --state FAILED: not 3 rows"
    grep -Eq "^  [0-9a-f]{16} FAILED +[0-9.]+s slow_where +driver pid $PID +RD_ETASK: .*bad args" "$L" ||
      fail "list tasks: slow_where's own error"
    grep -Eq "^  [0-9a-f]{16} FAILED +[0-9.]+s slow_pid +driver pid $PID +RD_ETASK: argument 0 of 'slow_pid' failed: .*bad args" "$L" ||
      fail "list tasks: slow_pid's failed argument"
    grep -Eq "^  [0-9a-f]{16} FAILED +[0-9.]+s where +driver pid $PID +RD_ECANCELED: task 'where' was cancelled$" "$L" ||
      fail "list tasks: the cancelled one"
    # the oldest three are the wait_file tasks, submitted first (the owner
    # walks its actor's running calls before its queued tasks)
    "$R" list tasks --limit 3 > "$L" || fail "list tasks --limit 3"
    [ "$(grep -Ec '^  [0-9a-f]{16} [A-Z_]+ +[0-9.]+s wait_file ' "$L")" = 3 ] || { cat "$L"; fail "list tasks --limit 3: not the oldest"; }
    "$R" list tasks --limit 0 > "$L" || fail "list tasks --limit 0"
    [ "$(grep -c '^  [0-9a-f]\{16\} ' "$L")" = 0 ] && grep -Eq '^    arg_len +3  PENDING_ARGS 3$' "$L" ||
      { cat "$L"; fail "list tasks --limit 0: not the summary alone"; }
    "$R" list tasks --state pending_args --limit 2 > "$L" || fail "list tasks --state"
    [ "$(grep -c '^  [0-9a-f]\{16\} ' "$L")" = 2 ] && [ "$(grep -c '^  [0-9a-f]\{16\} PENDING_ARGS ' "$L")" = 2 ] ||
      { cat "$L"; fail "list tasks --state pending_args --limit 2: not two PENDING_ARGS rows"; }
    # the JSON twin, and a bad state
    python3 - "$(cat "$ROOT/node-127.0.0.1/metrics")" "$PID" <<'PY' || fail "/api/tasks"
import json, sys, urllib.request, urllib.error
base = "http://" + sys.argv[1]
j = json.load(urllib.request.urlopen(base + "/api/tasks?limit=5", timeout=10))
assert j["unfinished"] == 8 and j["counts"]["PENDING_ARGS"] == 3 and j["counts"]["RUNNING"] == 2, j
assert len(j["tasks"]) == 5 and all(t["owner"] == "driver pid " + sys.argv[2] for t in j["tasks"]), j
ages = [t["age_s"] for t in j["tasks"]]
assert ages == sorted(ages, reverse=True), ages
assert [o["unfinished"] for o in j["owners"] if o["answered"]] == [8], j["owners"]
f = {x["func"]: x for x in j["by_function"]}
assert sorted(f) == ["Tally.wait_file", "arg_len", "slow_pid", "slow_where", "wait_file", "where"], f
assert f["where"]["counts"]["FAILED"] == 1 and f["where"]["unfinished"] == 0, f
assert j["failed_kept"] == 3 and j["failed_total"] == 3 and j["counts"]["FAILED"] == 3, j
assert {x["func"]: x["status"] for x in j["failures"]} == {"slow_where": "RD_ETASK", "slow_pid": "RD_ETASK", "where": "RD_ECANCELED"}, j["failures"]
assert all(x["owner"] == "driver pid " + sys.argv[2] and x["ago_s"] >= 0 for x in j["failures"]), j["failures"]
assert all(x["parent"] == "" for x in j["failures"] + j["tasks"]), j   # the driver's own: no parent
assert f["arg_len"]["unfinished"] == 3 and f["arg_len"]["counts"]["PENDING_ARGS"] == 3, f
assert f["wait_file"]["counts"]["RUNNING"] == 1 and f["wait_file"]["unfinished"] == 3, f
try:
    urllib.request.urlopen(base + "/tasks?state=DONE", timeout=10)
    sys.exit("state=DONE was accepted")
except urllib.error.HTTPError as e:
    assert e.code == 400 and b"unknown state" in e.read()
PY
    "$R" list tasks --state DONE > /dev/null 2>&1 && fail "list tasks took --state DONE"
    "$R" list actors --state FAILED > /dev/null 2>&1 && fail "list actors took --state FAILED"
    "$R" list tasks --limit -1 > /dev/null 2>&1 && fail "list tasks took --limit -1"
    # an owner that makes no library call and has no progress thread does
    # not answer: named after 2 s, the others listed all the same
    RAYDIST_PROGRESS_THREAD=0 RD_SILENT=1 RD_READY="$RAYDIST_TMPDIR/ready2" RD_DONE="$RAYDIST_TMPDIR/done" \
      "$T" tasks_hold > "$RAYDIST_TMPDIR/hold2.log" 2>&1 &
    HOLD2=$!
    for i in $(seq 1 200); do [ -s "$RAYDIST_TMPDIR/ready2" ] && break; sleep 0.1; done
    [ -s "$RAYDIST_TMPDIR/ready2" ] || { kill $HOLD2; cat "$RAYDIST_TMPDIR/hold2.log"; fail "the silent driver never got ready"; }
    PID2=$(cat "$RAYDIST_TMPDIR/ready2")
    "$R" list tasks > "$L" || fail "list tasks with a silent owner"
    cat "$L"
    grep -q "^  driver pid $PID2 did not answer within 2 s$" "$L" || fail "list tasks: the silent driver not named"
    [ "$(grep -c " driver pid $PID " "$L")" = 11 ] || fail "list tasks: driver $PID's rows not there beside a silent one"
    touch "$RAYDIST_TMPDIR/done"
    wait $HOLD || { cat "$RAYDIST_TMPDIR/hold.log"; fail "tasks_hold"; }
    wait $HOLD2 || { cat "$RAYDIST_TMPDIR/hold2.log"; fail "tasks_hold (silent)"; }
    for i in $(seq 1 50); do
      "$R" list tasks > "$L" && [ "$(grep -c '^node [0-9]*: 0 unfinished tasks$' "$L")" = 3 ] && break
      sleep 0.1
    done
    [ "$(grep -c '^node [0-9]*: 0 unfinished tasks$' "$L")" = 3 ] || { cat "$L"; fail "tasks left listed"; }
    # both drivers gone: what they finished well is still listed (their node
    # keeps it), 8 each: three wait_file, three arg_len, two Tally.wait_file
    # (a driver's last report, sent as it shuts down, may land a moment after
    # its exit is seen)
    listed_until 50 '^  finished well: the last 16 kept$' list tasks --state FINISHED --limit 100
    cat "$L"
    grep -Eq '^  finished well: the last 16 kept$' "$L" &&
      [ "$(grep -Ec "^  [0-9a-f]{16} FINISHED .* driver pid $PID +ran [0-9.]+ s on worker pid [0-9]+" "$L")" = 8 ] &&
      [ "$(grep -Ec "^  [0-9a-f]{16} FINISHED .* driver pid $PID2 +ran [0-9.]+ s on worker pid [0-9]+" "$L")" = 8 ] &&
      grep -Eq '^    arg_len +6  FINISHED 6$' "$L" && grep -Eq '^    Tally\.wait_file +4  FINISHED 4$' "$L" &&
      [ "$(grep -Ec "FINISHED .* Tally\.wait_file .*, actor [0-9a-f]{16}$" "$L")" = 4 ] ||
      fail "list tasks: the gone drivers' finished tasks"
    # a driver that shuts down with a question of its node unread (the
    # listing asked it while it made no library call): its socket ends in
    # error at the node, which still reads the last report it sent (the
    # three tasks it finished were lost so until 2026-12-05)
    rm -f "$RAYDIST_TMPDIR/ready" "$RAYDIST_TMPDIR/done"
    export RAYDIST_PROGRESS_THREAD=0 RAYDIST_LOG_TO_DRIVER=0
    hold_start tasks_last_report
    unset RAYDIST_PROGRESS_THREAD RAYDIST_LOG_TO_DRIVER
    "$R" list tasks > "$L" || fail "list tasks beside a silent driver"
    grep -q "^  driver pid $PID did not answer within 2 s$" "$L" || { cat "$L"; fail "list tasks: the silent driver was not asked"; }
    touch "$RAYDIST_TMPDIR/done"
    wait $HOLD || { cat "$RAYDIST_TMPDIR/hold.log"; fail "tasks_last_report"; }
    listed_until 50 "^  [0-9a-f]{16} FINISHED .* where +driver pid $PID " list tasks --state FINISHED --limit 100
    [ "$(grep -Ec "^  [0-9a-f]{16} FINISHED .* where +driver pid $PID " "$L")" = 3 ] ||
      { cat "$L"; fail "list tasks: the last report of a driver that left a question unread"; }
    # 50000 tasks on an open put, their driver outside the library: its
    # progress thread answers (it napped when no task was queued or sent)
    rm -f "$RAYDIST_TMPDIR/ready" "$RAYDIST_TMPDIR/done"
    hold_start tasks_open_put
    sleep 3   # its progress thread has sent its report and would nap (1 s at a time)
    listed_until 10 '^node [0-9]+: 50000 unfinished tasks \(PENDING_ARGS 50000\)$' list tasks --limit 3
    cat "$L"
    grep -Eq '^node [0-9]+: 50000 unfinished tasks \(PENDING_ARGS 50000\)$' "$L" &&
      grep -Eq '^    arg_len +50000  PENDING_ARGS 50000$' "$L" &&
      [ "$(grep -Ec "PENDING_ARGS .* driver pid $PID +1 argument not ready$" "$L")" = 3 ] ||
      fail "list tasks: not 50000 waiting for the open put"
    touch "$RAYDIST_TMPDIR/done"
    wait $HOLD || { cat "$RAYDIST_TMPDIR/hold.log"; fail "tasks_open_put"; }
    # its 50000 finished faster than it reports them (1000 each 100 ms): the
    # head kept what it was told, at least the 10000 the driver held at its
    # exit, and counted every one of them, kept or not
    python3 - "$(cat "$ROOT/node-127.0.0.1/metrics")" "$PID" <<'PY' || fail "/api/tasks: the 50000 finished"
import json, sys, urllib.request
j = json.load(urllib.request.urlopen("http://" + sys.argv[1] + "/api/tasks?state=FINISHED&limit=20", timeout=10))
print({k: j[k] for k in ("finished_kept", "finished_unkept", "unfinished")})
# (and the 19 before it: 16 of the two holding drivers, 3 of the last)
assert j["unfinished"] == 0 and j["finished_kept"] + j["finished_unkept"] == 50019, j
assert j["finished_kept"] >= 10019 and j["counts"]["FINISHED"] == j["finished_kept"], j
assert [f["counts"]["FINISHED"] for f in j["by_function"] if f["func"] == "arg_len"] == [j["finished_kept"] - 13], j["by_function"]
rows = j["tasks"]
assert len(rows) == 20 and all(t["state"] == "FINISHED" and t["func"] == "arg_len" for t in rows), rows
assert all(t["owner_pid"] == int(sys.argv[2]) and t["worker_pid"] > 0 and t["worker_node"] > 0 for t in rows), rows
assert all(t["created_ms"] <= t["start_ms"] <= t["end_ms"] for t in rows), rows
ends = [t["end_ms"] for t in rows]
assert ends == sorted(ends, reverse=True), ends
PY
    # a node that writes to a driver gone with its last report unread (a
    # listing asks it in the same turn of the node's loop as the driver's
    # end, first): the write fails, and the node still reads that report.
    # The head is stopped while a listing's request is completed and then
    # the driver shuts down, so the head sees them in that order.
    rm -f "$RAYDIST_TMPDIR/ready" "$RAYDIST_TMPDIR/done"
    export RAYDIST_PROGRESS_THREAD=0 RAYDIST_LOG_TO_DRIVER=0
    hold_start tasks_last_report
    unset RAYDIST_PROGRESS_THREAD RAYDIST_LOG_TO_DRIVER
    HN=$(awk '$1 == "node" {print $2}' "$ROOT/node-127.0.0.1/pids")
    [ -n "$HN" ] || fail "tasks: no node daemon pid for the head"
    python3 - "$(cat "$ROOT/node-127.0.0.1/metrics")" "$HN" "$PID" "$RAYDIST_TMPDIR/done" <<'PY' ||
import os, signal, socket, sys, time
host, port = sys.argv[1].rsplit(":", 1)
node, driver, done = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
s = socket.create_connection((host, int(port)), timeout=30)
s.sendall(b"GET /tasks HTTP/1.0\r\n")
time.sleep(0.5)   # the head has read the request's first line
os.kill(node, signal.SIGSTOP)
try:
    s.sendall(b"\r\n")
    time.sleep(0.2)
    open(done, "w").close()
    for _ in range(300):   # the driver ends (a zombie until the shell's wait)
        try:
            if open("/proc/%d/stat" % driver).read().rsplit(")", 1)[1].split()[0] == "Z":
                break
        except FileNotFoundError:
            break
        time.sleep(0.1)
    else:
        sys.exit("the driver did not end while its node was stopped")
finally:
    os.kill(node, signal.SIGCONT)
r = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    r += b
assert r.startswith(b"HTTP/1.0 200"), r[:200]
PY
      { kill -CONT "$HN"; fail "tasks: the listing beside a driver's end"; }
    wait $HOLD || { cat "$RAYDIST_TMPDIR/hold.log"; fail "tasks_last_report (node stopped)"; }
    listed_until 50 "^  [0-9a-f]{16} FINISHED .* where +driver pid $PID " list tasks --state FINISHED --limit 100
    [ "$(grep -Ec "^  [0-9a-f]{16} FINISHED .* where +driver pid $PID " "$L")" = 3 ] ||
      { cat "$L"; fail "list tasks: the last report of a driver the node wrote to after its end"; }
    ;;
  list_actors)
    # raydist list actors: the head's driver's actors in every state
    # (actors_hold says what it made); a restart after the script kills one
    hold_start actors_hold
    L="$RAYDIST_TMPDIR/actors"
    listed_until 100 '^node [0-9]+: 4 actors \(PENDING_CREATION 1, ALIVE 2, DEAD 1\)$' list actors
    cat "$L"
    grep -Eq '^node [0-9]+: 4 actors \(PENDING_CREATION 1, ALIVE 2, DEAD 1\)$' "$L" || fail "list actors: not 4 on the head"
    [ "$(grep -c '^node [0-9]*: 0 actors$' "$L")" = 2 ] || fail "list actors: b and c record none"
    grep -Eq '^    Tally +4  PENDING_CREATION 1, ALIVE 2, DEAD 1$' "$L" || fail "list actors: by class"
    # keeper: on c (node 3), its name without its namespace, no restart yet
    KROW=$(grep -E "^  [0-9a-f]{16} Tally +keeper +ALIVE +3 +[0-9]+ +0/2 +[0-9.]+s driver pid $PID +$" "$L") ||
      fail "list actors: no keeper alive on node 3"
    KPID=$(echo "$KROW" | awk '{print $6}')
    grep -Eq "^  [0-9a-f]{16} Tally +- +ALIVE +2 +[0-9]+ +0/0 +[0-9.]+s driver pid $PID +$" "$L" ||
      fail "list actors: none alive on node 2"
    grep -Eq "^  [0-9a-f]{16} Tally +- +PENDING_CREATION .* driver pid $PID +(wants \{CPU: 0, GPU: 0, only_b: 1\}|sent to node 2, not alive yet)" "$L" ||
      fail "list actors: none waiting for only_b"
    grep -Eq "^  [0-9a-f]{16} Tally +- +DEAD +1 +[0-9]+ +0/0 .* actor Tally was killed by rd_actor_kill$" "$L" ||
      fail "list actors: the killed one is not dead on node 1"
    # live ones first, oldest first: keeper heads the list
    [ "$(grep -Em1 '^  [0-9a-f]{16} ' "$L" | awk '{print $3}')" = keeper ] || fail "list actors: keeper not first"
    # its process killed: restarted on c (restart 1 of 2), a new pid
    kill -9 "$KPID"
    listed_until 100 '^  [0-9a-f]{16} Tally +keeper +ALIVE +3 +[0-9]+ +1/2 ' list actors --state alive
    cat "$L"
    KROW=$(grep -E '^  [0-9a-f]{16} Tally +keeper +ALIVE +3 +[0-9]+ +1/2 ' "$L") || fail "list actors: keeper not restarted"
    [ "$(echo "$KROW" | awk '{print $6}')" != "$KPID" ] || fail "list actors: keeper kept its dead pid"
    [ "$(grep -c '^  [0-9a-f]\{16\} ' "$L")" = 2 ] || fail "list actors --state alive: not two rows"
    "$R" list actors --state DEAD --limit 0 > "$L" || fail "list actors --limit 0"
    [ "$(grep -c '^  [0-9a-f]\{16\} ' "$L")" = 0 ] && grep -Eq '^    Tally +4 ' "$L" ||
      { cat "$L"; fail "list actors --limit 0: not the summary alone"; }
    # the JSON twin, and a bad state
    python3 - "$(cat "$ROOT/node-127.0.0.1/metrics")" "$PID" <<'PY' || fail "/api/actors"
import json, sys, urllib.request, urllib.error
base = "http://" + sys.argv[1]
j = json.load(urllib.request.urlopen(base + "/api/actors", timeout=10))
assert j["actors"] == 4 and j["counts"] == {"PENDING_CREATION": 1, "RESTARTING": 0, "ALIVE": 2, "DEAD": 1}, j
assert [c["class"] for c in j["by_class"]] == ["Tally"] and j["by_class"][0]["actors"] == 4, j
k = j["list"][0]
assert k["name"] == "keeper" and k["namespace"] == "team" and k["node"] == 3 and k["restarts"] == 1, k
assert k["max_restarts"] == 2 and k["owner"] == "driver pid " + sys.argv[2] and not k["detached"], k
assert k["resources"] == "{CPU: 0, GPU: 0, only_c: 1}", k
assert [a["state"] for a in j["list"]] == ["ALIVE", "ALIVE", "PENDING_CREATION", "DEAD"], j["list"]
d = j["list"][3]
assert d["dead_for_s"] > 0 and d["pid"] > 0 and "rd_actor_kill" in d["detail"] and d["name"] is None, d
j = json.load(urllib.request.urlopen(base + "/api/actors?state=dead&limit=5", timeout=10))
assert len(j["list"]) == 1 and j["list"][0]["state"] == "DEAD", j
try:
    urllib.request.urlopen(base + "/actors?state=GONE", timeout=10)
    sys.exit("state=GONE was accepted")
except urllib.error.HTTPError as e:
    assert e.code == 400 and b"unknown state" in e.read()
PY
    "$R" list actors --state RUNNING > /dev/null 2>&1 && fail "list actors took --state RUNNING"
    "$R" list objects --state ALIVE > /dev/null 2>&1 && fail "list objects took --state"
    "$R" list gremlins > /dev/null 2>&1 && fail "list took gremlins"
    # the GCS's tables: nodes (all alive), and this driver's run
    "$R" list nodes > "$L" || fail "list nodes"
    grep -q '^nodes: 3 alive, 0 dead$' "$L" && [ "$(grep -Ec '^[123] +127\.0\.0\.[123] ' "$L")" = 3 ] ||
      { cat "$L"; fail "list nodes: not 3 alive rows"; }
    "$R" list nodes --state dead > "$L" || fail "list nodes --state dead"
    [ "$(grep -Ec '^[0-9]+ +127\.' "$L")" = 0 ] || { cat "$L"; fail "list nodes --state dead: rows"; }
    "$R" list jobs --state running > "$L" || fail "list jobs"
    grep -Eq "^[0-9]+ +1 +$PID +[0-9a-f-]+ +[0-9]+ s ago +running$" "$L" || { cat "$L"; fail "list jobs: this driver's run"; }
    "$R" list jobs --state gone > /dev/null 2>&1 && fail "list jobs took --state gone"
    "$R" list objects --limit 2 > "$L" || fail "list objects"
    [ "$(grep -c '^node [0-9]*: [0-9]* objects' "$L")" = 3 ] || { cat "$L"; fail "list objects: not three nodes"; }
    # the last calls reach the restarted keeper and, once on_b is killed,
    # the one that waited; the driver gone, every record is dead
    touch "$RAYDIST_TMPDIR/done"
    wait $HOLD || { cat "$RAYDIST_TMPDIR/hold.log"; fail "actors_hold"; }
    listed_until 50 '^node [0-9]+: 4 actors \(DEAD 4\)$' list actors
    grep -Eq '^node [0-9]+: 4 actors \(DEAD 4\)$' "$L" || { cat "$L"; fail "list actors: not all dead after the driver"; }
    grep -Eq '^  [0-9a-f]{16} Tally +keeper +DEAD +3 +[0-9]+ +1/2 .* - \(left\) ' "$L" ||
      { cat "$L"; fail "list actors: keeper's record after its driver"; }
    ;;
  app_metrics)
    # application metrics: each node serves what its own processes reported;
    # the actor's gauge while it lives, gone with it
    hold_start "$CASE"
    C_ADDR=$(cat "$ROOT/node-127.0.0.3/metrics")
    for i in $(seq 1 50); do
      python3 -c "import sys, urllib.request; sys.exit('cl_queue_depth{actor=\"tally\"} 3\n' not in urllib.request.urlopen('http://$C_ADDR/metrics', timeout=10).read().decode())" && break
      sleep 0.1
    done
    [ "$i" -lt 50 ] || fail "app_metrics: c never served the actor's gauge"
    touch "$RAYDIST_TMPDIR/done"
    wait "$HOLD" || { cat "$RAYDIST_TMPDIR/hold.log"; fail "$CASE"; }
    python3 - "$(cat "$ROOT/node-127.0.0.1/metrics")" "$(cat "$ROOT/node-127.0.0.2/metrics")" "$C_ADDR" <<'PY' || fail "app_metrics: the nodes' pages"
import sys, time, urllib.request
def page(addr):
    return urllib.request.urlopen("http://" + addr + "/metrics", timeout=10).read().decode()
head, b, c = (page(a) for a in sys.argv[1:4])
for _ in range(50):   # the actor's worker leaves c a moment after the kill
    if 'cl_queue_depth{' not in c:
        break
    time.sleep(0.1)
    c = page(sys.argv[3])
assert 'cl_requests_total{route="driver"} 1\n' in head and 'route="b"' not in head, head[-600:]
assert 'cl_requests_total{route="b"} 10\n' in b and 'route="driver"' not in b, b[-600:]
assert 'cl_queue_depth{' not in c and "cl_requests_total" not in c, c[-600:]
assert "raydist_app_metric_series 0\n" in c, c[-600:]
assert all("raydist_app_metric_rejected_total 0\n" in p for p in (head, b, c))
print("app_metrics: the driver's on the head, the tasks' on b, the actor's gauge gone from c with the actor")
PY
    ;;
  worker_log_rotation)
    # 480 KB of worker output on b, over 3.6 s: the worker's file is
    # rotated (as it passes 100 KB) into .out.1 and .out.2, never a .3,
    # none far past 100 KB, the last lines in the newest file, no line cut
    RAYDIST_LOG_TO_DRIVER=0 "$T" log_rotation || fail "$CASE"
    B="$ROOT/node-127.0.0.2"
    ls -l "$B"/logs
    W=$(grep -l 'say-lots round 11 line 399 ' "$B"/logs/worker-*.out "$B"/logs/worker-*.out.1 2>/dev/null | head -n 1)
    W=${W%.1}
    [ -n "$W" ] || fail "$CASE: the last line is not in a worker's newest two files"
    [ -f "$W.1" ] && [ -f "$W.2" ] || fail "$CASE: no $W.1 and .2"
    [ -e "$W.3" ] && fail "$CASE: a third backup kept"
    for f in "$W" "$W".*; do
      [ "$(stat -c %s "$f")" -le 120000 ] || fail "$CASE: $f has $(stat -c %s "$f") bytes"
    done
    grep -q 'say-lots round 00 ' "$W" "$W".* && fail "$CASE: the first round was not dropped"
    # the lines kept are whole and in order across the files
    cat "$W.2" "$W.1" "$W" | grep -o 'say-lots round [0-9]* line [0-9]*' > "$RAYDIST_TMPDIR/kept"
    sort -c "$RAYDIST_TMPDIR/kept" || fail "$CASE: lines out of order"
    [ "$(wc -l < "$RAYDIST_TMPDIR/kept")" -ge 1000 ] || fail "$CASE: under 1000 lines kept"
    [ "$(grep -c . "$W.1")" = "$(grep -c '^say-lots round [0-9]* line [0-9]* 0*$' "$W.1")" ] ||
      fail "$CASE: a line cut in $W.1"
    # each round's task range points into the file its lines are in now,
    # moved back a backup at each rotation: one round's lines alone, all
    # 400 of them where the range is whole in one file
    python3 - "$(cat "$ROOT/node-127.0.0.1/metrics")" "$(cat "$ROOT/node-127.0.0.1/token")" "$B/logs" <<'PY' ||
import json, re, sys, urllib.request
q = urllib.request.Request("http://%s/api/v0/tasks?limit=1000&detail=True" % sys.argv[1],
                           headers={"Authorization": "Bearer " + sys.argv[2]})
rows = json.load(urllib.request.urlopen(q, timeout=30))["data"]["result"]["result"]
says = [r for r in rows if r["name"] == "say_lots" and r["state"] == "FINISHED"]
assert len(says) == 12, [r["name"] for r in rows]
whole, files = 0, set()
for r in says:
    info = r["task_log_info"] or {}
    if info.get("stdout_start") is None:
        continue   # rotated out with its file
    data = open(sys.argv[3] + "/" + info["stdout_file"]).read()
    end = info["stdout_end"] if info["stdout_end"] is not None else len(data)
    text = data[info["stdout_start"]:end]
    rounds = set(re.findall(r"^say-lots round ([0-9]+) line", text, re.M))
    assert len(rounds) == 1 and 0 < text.count("\n") <= 400, (info, rounds, text[:200])
    whole += text.count("\n") == 400
    files.add(info["stdout_file"].rsplit(".", 1)[-1])
assert whole >= 3 and {"1", "2"} <= files, (whole, files)
PY
      fail "$CASE: the rounds' task ranges after rotations"
    ;;
  worker_files_pruned)
    # eight workers on b, one task each (max_calls 1): b keeps the files of
    # the last 3 that exited (RAYDIST_WORKERS_EXITED_KEPT=3), those of the
    # others go as they leave the list
    RAYDIST_LOG_TO_DRIVER=0 "$T" worker_churn || fail "$CASE: the driver"
    B="$ROOT/node-127.0.0.2"
    for i in $(seq 1 50); do
      [ "$("$R" list workers --state exited | grep -c 'it ran its function')" -ge 3 ] &&
        [ "$(grep -l '^say churn-' "$B"/logs/worker-*.out 2>/dev/null | wc -l)" -le 3 ] && break
      sleep 0.1
    done
    ls -l "$B/logs"
    KEPT=$(grep -l '^say churn-' "$B"/logs/worker-*.out 2>/dev/null | wc -l)
    [ "$KEPT" -le 3 ] && [ "$KEPT" -ge 1 ] || fail "$CASE: $KEPT workers' files of the 8 kept, not 1 to 3"
    grep -q '^say churn-7 stdout 2$' "$B"/logs/worker-*.out || fail "$CASE: the last worker's file not kept"
    grep -q '^say churn-0 ' "$B"/logs/worker-*.out && fail "$CASE: the first worker's file kept"
    [ "$(ls "$B"/logs/worker-*.err | wc -l)" = "$(ls "$B"/logs/worker-*.out | wc -l)" ] ||
      fail "$CASE: .out and .err not removed together"
    echo "ok: $KEPT of 8 workers' files kept on b"
    ;;
  log_rotation)
    # 480 KB of worker output on b, over 3.6 s: b's node.log is rotated
    # (checked once a second) into node.log.1 and .2, never a .3, none far
    # past 100 KB, and the last lines are in the newest file
    # (RAYDIST_LOG_TO_STDERR=1: the workers' lines go to the node's log)
    RAYDIST_LOG_TO_DRIVER=0 "$T" "$CASE" || fail "$CASE"
    B="$ROOT/node-127.0.0.2"
    sleep 1.2   # one more check: the last round's lines may be past the limit
    ls -l "$B"/node.log*
    [ -f "$B/node.log.1" ] && [ -f "$B/node.log.2" ] || fail "log_rotation: no node.log.1 and .2"
    [ -e "$B/node.log.3" ] && fail "log_rotation: a third backup kept"
    for f in "$B"/node.log*; do
      [ "$(stat -c %s "$f")" -le 300000 ] || fail "log_rotation: $f has $(stat -c %s "$f") bytes"
    done
    grep -h '^(pid=[0-9]*) say-lots round 11 line 399 ' "$B/node.log" "$B/node.log.1" > /dev/null ||
      fail "log_rotation: the last line is not in the newest two files"
    grep -q 'say-lots round 00 ' "$B"/node.log* && fail "log_rotation: the first round was not dropped"
    # the lines kept are whole and in order across the files
    cat "$B/node.log.2" "$B/node.log.1" "$B/node.log" | grep -o 'say-lots round [0-9]* line [0-9]*' > "$RAYDIST_TMPDIR/kept"
    sort -c "$RAYDIST_TMPDIR/kept" || fail "log_rotation: lines out of order"
    [ "$(wc -l < "$RAYDIST_TMPDIR/kept")" -ge 1000 ] || fail "log_rotation: under 1000 lines kept"
    [ -d "$B/logs" ] && fail "log_rotation: worker files with RAYDIST_LOG_TO_STDERR=1"
    # a malformed setting stops a node from starting, with the reason
    if RAYDIST_ROTATION_MAX_BYTES=lots "$R" start --address "$ADDR" --node-ip 127.0.0.4 2>"$RAYDIST_TMPDIR/err"; then
      fail "a node started with RAYDIST_ROTATION_MAX_BYTES=lots"
    fi
    grep -q "RAYDIST_ROTATION_MAX_BYTES must be a whole number" "$RAYDIST_TMPDIR/err" ||
      { cat "$RAYDIST_TMPDIR/err"; fail "log_rotation: no reason for a bad setting"; }
    ;;
  labels)
    "$T" "$CASE" || fail "$CASE"
    # malformed labels: a usage error before anything starts
    if "$R" start --address "$ADDR" --node-ip 127.0.0.4 --labels "zone=a,zone=b" 2>"$RAYDIST_TMPDIR/err"; then
      fail "a node started with a label given twice"
    fi
    grep -q "labels: label key 'zone' given twice" "$RAYDIST_TMPDIR/err" || { cat "$RAYDIST_TMPDIR/err"; fail "no reason"; }
    [ -d "$ROOT/node-127.0.0.4" ] && fail "a refused node left a session behind"
    ;;
  placement_groups)
    "$T" "$CASE" || fail "$CASE"
    # every group the job made (its tasks' too, on the head and on node c)
    # is removed once its driver is gone, and the GCS table says so (node c
    # reads the job's end from the GCS within a second; the removals land
    # shortly after)
    for i in $(seq 1 30); do
      "$R" status > "$RAYDIST_TMPDIR/status" || fail "status"
      grep -Eq "^placement groups: 0 live, [1-9][0-9]* removed" "$RAYDIST_TMPDIR/status" && break
      sleep 0.3
    done
    grep -Eq "^placement groups: 0 live, [1-9][0-9]* removed" "$RAYDIST_TMPDIR/status" ||
      { cat "$RAYDIST_TMPDIR/status"; fail "placement groups left behind"; }
    # raydist list placement-groups: the removed ones too, with why, by state
    NREM=$(sed -n 's/^placement groups: 0 live, \([0-9]*\) removed.*/\1/p' "$RAYDIST_TMPDIR/status")
    L="$RAYDIST_TMPDIR/pgs"
    "$R" list placement-groups --state REMOVED --limit 10000 > "$L" || fail "list placement-groups"
    [ "$(grep -Ec '^[0-9a-f]{16} .* removed ' "$L")" = "$NREM" ] || { cat "$L"; fail "list placement-groups: not $NREM removed rows"; }
    # the 300-bundle group: its first bundles, and how many in all
    grep -E '^[0-9a-f]{16} many .*, \.\.\. \(300 bundles\)' "$L" > /dev/null || { cat "$L"; fail "list placement-groups: the 300-bundle row"; }
    "$R" list placement-groups --state created > "$L" || fail "list placement-groups --state created"
    [ "$(grep -Ec '^[0-9a-f]{16} ' "$L")" = 0 ] || { cat "$L"; fail "list placement-groups: a created one left"; }
    "$R" list placement-groups --limit 1 > "$L" || fail "list placement-groups --limit 1"
    [ "$(grep -Ec '^[0-9a-f]{16} ' "$L")" = 1 ] || { cat "$L"; fail "list placement-groups --limit 1: not one row"; }
    "$R" list placement-groups --state ALIVE > /dev/null 2>&1 && fail "list placement-groups took --state ALIVE"
    ;;
  autoscaler)
    RD_CLUSTER_NODES=4 "$T" autoscaler || fail "autoscaler"
    # the big nodes go once idle 3 s, through their terminate command; warm stays
    L="$RAYDIST_TMPDIR/as_status"
    listed_until 150 '^  type big: 0 alive, 0 starting \(min 0, max 2\)' status || { cat "$L"; fail "the big nodes did not leave"; }
    cat "$L"
    grep -Eq '^cluster at .*: 4 nodes alive, 3 dead$' "$L" || fail "status: not 4 nodes alive, 3 dead"
    [ "$(grep -c 'dead .*drained: idle for [0-9]* s (autoscaler, type .big.)' "$L")" = 2 ] ||
      fail "status: the big nodes' reason"
    grep -Eq '^  type warm: 1 alive, 0 starting \(min 1, max 1\)' "$L" || fail "status: type warm"
    grep -q '^autoscaler: 3 node types, a round every 300 ms; idle nodes go after 60 s; upscaling speed 1.5$' "$L" ||
      fail "status: the autoscaler's header"
    grep -Eq '^  type big: .*; idle nodes go after 3 s$' "$L" || fail "status: big's own idle timeout"
    grep -Eq '^  launches: 4 started, 0 failed; 2 nodes let go$' "$L" || fail "status: launches"
    for _i in $(seq 1 50); do [ "$(wc -l < "$RAYDIST_TMPDIR/terminated" 2>/dev/null)" = 3 ] && break; sleep 0.1; done
    cat "$RAYDIST_TMPDIR/terminated"
    [ "$(grep -Ec '^big [0-9]+ 127\.0\.0\.1[0-9][0-9] [0-9]+$' "$RAYDIST_TMPDIR/terminated")" = 3 ] ||
      fail "terminate commands"
    # demand: one request waiting on b (node 2 here: the warm node took 4)
    # and the backlog of four behind it on the head; no type has zone=west
    B=$(sed -n 's/^labels: node \([0-9]*\) gpu=A100,zone=west$/\1/p' "$L")
    export RD_CLUSTER_NODES=4
    hold_start backlog_hold
    # (each node says so with its heartbeat once the request has waited 1 s)
    listed_until 100 "^waiting: node $B \\{CPU: 0.5, GPU: 0\\} x 1 selector .zone=west.\$" status ||
      { cat "$L"; fail "status: no request waiting on b"; }
    listed_until 100 '^waiting: node 1 \{CPU: 0.5, GPU: 0\} x 4 selector .zone=west.$' status ||
      { cat "$L"; fail "status: no backlog of 4 on the head"; }
    listed_until 100 '^  [0-9]+ waiting requests? no node type can run$' status ||
      { cat "$L"; fail "status: zone=west not said unplaceable"; }
    cat "$L"
    touch "$RAYDIST_TMPDIR/done"
    wait "$HOLD" || fail "backlog_hold"
    # rd_request_resources: two big nodes start for the room asked, stay
    # past the idle timeout while it stands, and go once it is withdrawn
    RD_REQUEST=2 "$T" request_room || fail "request_room 2"
    listed_until 150 '^  type big: 2 alive, 0 starting' status || { cat "$L"; fail "requested room: no two big nodes"; }
    grep -Eq '^  requested: 2 bundles \(rd_request_resources\)$' "$L" || { cat "$L"; fail "status: requested"; }
    sleep 5
    "$R" status > "$L" || fail "status"
    grep -Eq '^  type big: 2 alive, 0 starting' "$L" || { cat "$L"; fail "requested room: big nodes left while asked for"; }
    # a job submitted to one of them (a script that is no driver, holding
    # nothing) keeps that node past the idle timeout once the room is
    # withdrawn; it goes once the job has ended
    BIG=$(awk '$2 ~ /^127\.0\.0\.1[0-9][0-9]$/ && $3 == "alive" {print $2; exit}' "$L")
    [ -n "$BIG" ] || { cat "$L"; fail "no big node's address in status"; }
    "$R" job submit --node-ip "$BIG" -- /bin/sh -c "while [ ! -e '$RAYDIST_TMPDIR/big_job_done' ]; do sleep 0.1; done" \
      > /dev/null || fail "a job on big node $BIG"
    RD_CLUSTER_NODES=6 RD_REQUEST=0 "$T" request_room || fail "request_room 0"
    listed_until 150 '^  type big: 1 alive, 0 starting' status || { cat "$L"; fail "requested room withdrawn: not one big node left"; }
    sleep 5
    "$R" status > "$L" || fail "status"
    grep -Eq '^  type big: 1 alive, 0 starting' "$L" && awk '$3 == "alive"' "$L" | grep -Eq "^ *[0-9]+ +$BIG " ||
      { cat "$L"; fail "the big node $BIG running a job left, or the other stayed"; }
    touch "$RAYDIST_TMPDIR/big_job_done"
    listed_until 150 '^  type big: 0 alive, 0 starting' status || { cat "$L"; fail "requested room withdrawn: big nodes stay"; }
    grep -Eq '^  launches: 6 started, 0 failed; 4 nodes let go$' "$L" || { cat "$L"; fail "status: launches after the request"; }
    # the cluster's events tell the story: 5 big nodes and 1 warm added, the
    # big ones removed when idle and gone as drained, a request unplaceable
    "$R" list cluster-events --limit 1000 > "$L" || fail "raydist list cluster-events"
    cat "$L"
    add() { sed -n "s/^.*  INFO  *AUTOSCALER  *-  Adding \([0-9]*\) node(s) of type $1\.\$/\1/p" "$L" | awk '{s += $1} END {print s + 0}'; }
    [ "$(add big)" = 5 ] && [ "$(add warm)" = 1 ] || fail "events: not 5 big and 1 warm nodes added ($(add big), $(add warm))"
    [ "$(grep -Ec "INFO +AUTOSCALER +-  Removing 1 nodes of type big \(node [0-9]+, idle for [0-9]+ s\)\.$" "$L")" -ge 4 ] ||
      fail "events: not 4 big nodes removed"
    [ "$(grep -Ec "INFO +GCS +[0-9]+  Node [0-9]+ \(127\.0\.0\.1[0-9][0-9]\) left the cluster: drained: idle for [0-9]+ s \(autoscaler, type 'big'\)\.$" "$L")" = 4 ] ||
      fail "events: not 4 big nodes left drained"
    grep -Eq "WARNING +AUTOSCALER +-  No node type can run [0-9]+ waiting requests?, e\.g\. .*: add a node type that can\.$" "$L" ||
      fail "events: no request said unplaceable"    # jobs through the jobs API whose entrypoint resources no live node has
    # but a node type has: PENDING, their mirrors the head's demand, until
    # a node that can hold them joins (never: stopped while it waits; big:
    # the autoscaler starts a node and the job runs there); what no node
    # type has either is refused
    python3 "$(dirname "$0")/jobs_seek.py" "$(cat "$ROOT/node-127.0.0.1/metrics")" "$(cat "$ROOT/node-127.0.0.1/token")" "$R" ||
      fail "autoscaler: jobs waiting for a node"
    "$R" list cluster-events --limit 1000 > "$L" || fail "raydist list cluster-events"
    # (busy-1 runs on seek-tier's big node while it stays, 3 s idle, or on a
    # new one; busy-2 on a new one beside it)
    { [ "$(add big)" = 8 ] || [ "$(add big)" = 9 ]; } && [ "$(add never)" = 1 ] ||
      { cat "$L"; fail "events: not 8 or 9 big and 1 never node added ($(add big), $(add never))"; }
    ;;
  view_claim)
    "$T" view_claim || fail "view_claim"
    for ip in 127.0.0.2 127.0.0.3; do
      N=$(metric $ip raydist_requests_respilled_total)
      [ "$N" = 0 ] || fail "view_claim: node $ip respilled $N requests (the head sent both to one node)"
    done
    ;;
  autoscaler_restart)
    H="$ROOT/node-127.0.0.1"
    L="$RAYDIST_TMPDIR/as_status"
    # (rotated logs: the oldest first, so lines come in the order written)
    alog() { cat "$H/autoscaler.log.2" "$H/autoscaler.log.1" "$H/autoscaler.log" 2>/dev/null; }
    glog() { cat "$H/gcs.log.2" "$H/gcs.log.1" "$H/gcs.log" 2>/dev/null; }
    # launch 1 timed out (its node came 2 s after its command ended, the
    # timeout is 1 s); the node that came anyway was adopted, not left out
    alog | grep -q "launch 1 (type 'late') failed: its node did not join within 1 s" ||
      { alog; fail "launch 1 did not time out"; }
    alog | grep -Eq "launch 1: node [0-9]+ \(127\.0\.0\.40\) of type 'late' adopted" || { alog; fail "the late node not adopted"; }
    listed_until 50 '^  launches: 1 started, 1 failed; 0 nodes let go$' status || { cat "$L"; fail "status: launches"; }
    grep -Eq '^  type late: 1 alive, 0 starting \(min 1, max 1\)' "$L" || { cat "$L"; fail "status: type late"; }
    listed_until 50 "ERROR +AUTOSCALER +-  Launch 1 of a node of type late failed: its node did not join within 1 s\\.$" \
      list cluster-events || { cat "$L"; fail "events: the launch's failure"; }
    # the autoscaler killed: its keeper starts it again, which picks up the
    # launch and its counts from the GCS and starts nothing more
    AS=$(cat "$H/autoscaler.pid")
    kill -9 "$AS" || fail "kill the autoscaler"
    for _i in $(seq 1 50); do alog | grep -q "pid [0-9]* ready again after restart 1" && break; sleep 0.1; done
    alog | grep -q "autoscaler keeper: pid $AS killed by signal 9 (Killed) after [0-9]* ms; restart 1 in " ||
      { alog; fail "the keeper did not say the autoscaler died"; }
    alog | grep -q "pid [0-9]* ready again after restart 1" || { alog; fail "the autoscaler was not started again"; }
    alog | grep -q "picked up 1 launch from an earlier autoscaler (1 started, 1 failed, 0 let go); the next launch id is 2" ||
      { alog; fail "the restarted autoscaler did not pick up its launch"; }
    [ "$(cat "$H/autoscaler.pid")" != "$AS" ] || fail "autoscaler.pid names the dead process"
    sleep 1   # five rounds
    "$R" status > "$L" || fail "status"
    grep -Eq '^  launches: 1 started, 1 failed; 0 nodes let go$' "$L" && grep -Eq '^  type late: 1 alive, 0 starting' "$L" &&
      grep -Eq '^  launch 1 \(late\): up, node [0-9]+ \(127\.0\.0\.40\)$' "$L" || { cat "$L"; fail "status after the restart"; }
    # the late node killed: the new autoscaler runs its terminate command
    # (a launch of the old one) and starts another, adopted in turn
    NP=$(awk '$1 == "node" {print $2}' "$ROOT/node-127.0.0.40/pids")
    kill -9 "$NP" || fail "kill the late node"
    for _i in $(seq 1 100); do [ -s "$RAYDIST_TMPDIR/terminated" ] && break; sleep 0.1; done
    cat "$RAYDIST_TMPDIR/terminated"
    grep -Eq '^late 1 127\.0\.0\.40 [0-9]+$' "$RAYDIST_TMPDIR/terminated" || fail "no terminate command for launch 1"
    listed_until 100 '^  launches: 2 started, 2 failed; 0 nodes let go$' status || { cat "$L"; fail "status: no launch 2"; }
    listed_until 100 '^  launch 2 \(late\): up, node [0-9]+ \(127\.0\.0\.40\)$' status || { cat "$L"; fail "status: launch 2 not adopted"; }
    cat "$L"
    # the GCS server killed: gcs.log, which its keeper writes and rotates,
    # has the keeper's and the new server's lines in order
    # one following the events sees the restart as it comes
    "$R" list cluster-events --follow --limit 1 > "$RAYDIST_TMPDIR/follow" 2> "$RAYDIST_TMPDIR/follow.err" &
    FOL=$!
    for _i in $(seq 1 50); do grep -q "^  TIME " "$RAYDIST_TMPDIR/follow" && break; sleep 0.1; done
    GS=$(cat "$H/gcs.pid")
    kill -9 "$GS" || fail "kill the GCS server"
    for _i in $(seq 1 50); do glog | grep -q "gcs keeper: pid [0-9]* ready again after restart 1" && break; sleep 0.1; done
    sleep 1.2   # one more rotation check
    ls -l "$H"/gcs.log* "$H"/autoscaler.log*
    K=$(glog | grep -n "gcs keeper: pid $GS killed by signal 9" | cut -d: -f1)
    V=$(glog | grep -n "gcs: recovered 4 live nodes" | tail -n 1 | cut -d: -f1)
    A=$(glog | grep -n "gcs keeper: pid [0-9]* ready again after restart 1" | cut -d: -f1)
    [ -n "$K" ] && [ -n "$V" ] && [ -n "$A" ] && [ "$K" -lt "$V" ] && [ "$V" -lt "$A" ] ||
      { glog; fail "gcs.log: not the keeper's line, then the server's recovery, then the keeper's again"; }
    for _i in $(seq 1 100); do grep -q "The GCS restarted" "$RAYDIST_TMPDIR/follow" && break; sleep 0.1; done
    kill "$FOL"
    wait "$FOL" 2>/dev/null
    cat "$RAYDIST_TMPDIR/follow" "$RAYDIST_TMPDIR/follow.err"
    [ "$(grep -c "^  20" "$RAYDIST_TMPDIR/follow")" -ge 2 ] && grep -Eq "WARNING +GCS +-  The GCS restarted" "$RAYDIST_TMPDIR/follow" ||
      fail "events: --follow did not show the GCS's restart"
    # its events survived it (gcs.db), the restart among them
    "$R" list cluster-events > "$L" || fail "raydist list cluster-events after the GCS restart"
    grep -Eq "ERROR +AUTOSCALER +-  Launch 1 of a node of type late failed" "$L" &&
      grep -Eq "WARNING +GCS +-  The GCS restarted and recovered its tables: 4 live nodes" "$L" ||
      { cat "$L"; fail "events: not kept over the GCS's restart"; }
    for f in gcs autoscaler; do
      [ -f "$H/$f.log.1" ] || fail "$f.log was not rotated"
      [ -e "$H/$f.log.3" ] && fail "$f.log: a third backup kept"
      for g in "$H/$f".log*; do
        [ "$(stat -c %s "$g")" -le 4000 ] || fail "$g has $(stat -c %s "$g") bytes"
        # rotated at a line's end: a kept file ends one
        [ "$g" = "$H/$f.log" ] || [ "$(tail -c 1 "$g" | wc -l)" = 1 ] || { cat "$g"; fail "$g: a line cut in two"; }
      done
    done
    ;;
  env_bad_node)
    # the C driver holds its workers at the end: the set's runtime envs,
    # failed on c (its workers exit before joining) and started elsewhere
    L="$RAYDIST_TMPDIR/envs"
    hold_start env_bad_node
    listed_until 50 'FAILED +RD_CL_BREAK=1 RD_CL_ENV=brk' list runtime-envs --address "$ADDR" ||
      { cat "$L"; fail "env_bad_node: raydist list runtime-envs shows no failed set"; }
    cat "$L"
    grep -q "workers started from .* exit before joining the node (the last one with status 3)" "$L" ||
      fail "env_bad_node: no reason for the failed set"
    grep -Eq '^ +[0-9]+ +[1-9][0-9]* +[0-9]+ ms ok +RD_CL_BREAK=1 RD_CL_ENV=brk$' "$L" ||
      fail "env_bad_node: no node started the set's workers"
    # Ray's state API (ray list runtime-envs): the same, one row a node
    python3 - "$(cat "$ROOT/node-127.0.0.1/metrics")" "$(cat "$ROOT/node-127.0.0.1/token")" "$(cat "$ROOT/node-127.0.0.2/metrics")" <<'PY' ||
import json, sys, urllib.error, urllib.request
base, tok = "http://" + sys.argv[1], sys.argv[2]
for path in ("/api/runtime_envs", "/runtime_envs"):   # a node's own: the values may be secrets, so the token
    try:
        urllib.request.urlopen("http://" + sys.argv[3] + path, timeout=30)
        assert False, path + " answered without the token"
    except urllib.error.HTTPError as e:
        assert e.code == 401 and b"cluster token" in e.read(), (path, e.code)
def get(path):
    rq = urllib.request.Request(base + path, headers={"Authorization": "Bearer " + tok})
    return json.loads(urllib.request.urlopen(rq, timeout=30).read())["data"]["result"]
ids = {n["node_ip"]: n["node_id"] for n in get("/api/v0/nodes")["result"]}
rows = get("/api/v0/runtime_envs?detail=true")["result"]
want = {"env_vars": {"RD_CL_BREAK": "1", "RD_CL_ENV": "brk"}}
mine = [r for r in rows if r["runtime_env"] == want]
bad = [r for r in mine if not r["success"]]
good = [r for r in mine if r["success"]]
assert len(bad) == 1 and bad[0]["node_id"] == ids["127.0.0.3"] and "exit before joining" in bad[0]["error"], rows
assert bad[0]["creation_time_ms"] is None and bad[0]["ref_cnt"] == 0, bad
assert good and all(r["error"] is None and r["ref_cnt"] >= 1 and r["creation_time_ms"] >= 0 for r in good), good
assert ids["127.0.0.3"] not in [r["node_id"] for r in good], rows
f = get("/api/v0/runtime_envs?filter_keys=success&filter_predicates=%3D&filter_values=false")["result"]
assert [r["node_id"] for r in f if r["runtime_env"] == want] == [ids["127.0.0.3"]] and "error" not in f[0], f
print("env_bad_node: runtime envs ok on %d nodes, failed on c" % len(good))
PY
      fail "env_bad_node: the state API's runtime_envs"
    touch "$RAYDIST_TMPDIR/done"
    wait "$HOLD" || { cat "$RAYDIST_TMPDIR/hold.log"; fail "env_bad_node"; }
    cat "$RAYDIST_TMPDIR/hold.log"
    ;;
  env)
    "$T" env || fail env
    # a job's env (Ray's job-level runtime_env env_vars) reaches its tasks
    # and actors on other nodes: `raydist job submit --env`, and the jobs
    # API's env_vars (the same keeper option)
    "$R" job submit --env RD_CL_ENV=job --follow -- "$T" job_env > "$RAYDIST_TMPDIR/je" 2>&1 ||
      { cat "$RAYDIST_TMPDIR/je"; fail "env: a job's --env"; }
    cat "$RAYDIST_TMPDIR/je"
    python3 - "$(cat "$ROOT/node-127.0.0.1/metrics")" "$(cat "$ROOT/node-127.0.0.1/token")" "$T" <<'PY' || fail "env: a jobs API job's env_vars"
import json, sys, time, urllib.request
base, token, prog = "http://" + sys.argv[1], sys.argv[2], sys.argv[3]
def call(method, path, body=None):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode() if body else None, method=method)
    req.add_header("Authorization", "Bearer " + token)
    req.add_header("Content-Type", "application/json")
    return json.load(urllib.request.urlopen(req, timeout=60))
jid = call("POST", "/api/jobs/", {"entrypoint": prog + " job_env", "runtime_env": {"env_vars": {"RD_CL_ENV": "job"}}})["job_id"]
for _ in range(600):
    j = call("GET", "/api/jobs/" + jid)
    if j["status"] not in ("PENDING", "RUNNING"):
        break
    time.sleep(0.1)
logs = call("GET", "/api/jobs/%s/logs" % jid)["logs"]
print(logs)
assert j["status"] == "SUCCEEDED" and "the job's actor on c: ran as" in logs, j
PY
    ;;
  chaos)
    # tests/cluster/chaos.c: two driver threads mixing every kind of call
    # at random for RD_CHAOS_SECS (20 s), a random worker SIGKILLed every
    # 250 ms, node c SIGKILLed halfway and started again 2 s later; every
    # result is checked, no wait may pass 90 s, and only errors the kills
    # explain are taken (RD_CHAOS_SEED picks the calls: 1 here).  By hand,
    # RD_CHAOS_FAULTS and RD_CHAOS_THREADS set other faults (docs/testing.md)
    CH=$4
    FAULTS=${RD_CHAOS_FAULTS-CHAOS_MS=250 KILL_NODE=c REJOIN_AFTER=2}
    # shellcheck disable=SC2086 # FAULTS is a list of VAR=value words
    env RD_BIN="$R" THREADS="${RD_CHAOS_THREADS:-2}" $FAULTS "$CH" "${RD_CHAOS_SECS:-20}" "${RD_CHAOS_SEED:-1}" \
      > "$RAYDIST_TMPDIR/chaos.out" 2>&1 ||
      { grep -E '^\[T[0-9]+\] (BAD|HANG)' "$RAYDIST_TMPDIR/chaos.out" | head -n 30 | cut -c1-600
        tail -n 20 "$RAYDIST_TMPDIR/chaos.out" | cut -c1-300; fail "chaos ($FAULTS)"; }
    grep -E '^(seed|ops:|chaos kills|shutdown)|^\[T[0-9]+\] SLOW' "$RAYDIST_TMPDIR/chaos.out"
    # nothing leaked: with the driver gone, every live node's CPUs, custom
    # resources and store are free again within 10 s (looked at from 1 s
    # on: status shows the other nodes as of their last heartbeat)
    sleep 1
    used() { "$R" status | awk '$1 ~ /^[0-9]+$/ && / alive / { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+\/[0-9.]+(,.*)?$/ && $i !~ /^0\//) print $1 ": " $i }'; }
    for _i in $(seq 1 50); do [ -z "$(used)" ] && break; sleep 0.2; done
    [ -z "$(used)" ] || { "$R" status; fail "chaos: resources or store still held after the driver left"; }
    # a node SIGSTOPped past the heartbeat timeout (2 s here) is declared
    # dead and shuts down when it wakes: then two live at the end
    case " $FAULTS " in
      *" STOP_NODE="*) ;;
      *" REJOIN_AFTER="*)
        grep -q "restarted node .: rc 0" "$RAYDIST_TMPDIR/chaos.out" || { cat "$RAYDIST_TMPDIR/rejoin.out"; fail "chaos: the node did not start again"; }
        "$R" status | grep -q "3 nodes alive" || fail "chaos: not 3 nodes alive after" ;;
    esac
    ;;
  join_fresh)
    # nodes (127.0.0.20-23) join while the driver runs; stopped with the rest
    RD_RAYDIST="$R" "$T" join_fresh || fail "join_fresh"
    ;;
  *)
    "$T" "$CASE" || fail "$CASE"
    ;;
esac

# stop: exactly the recorded processes, and every session directory.  A
# process counts as the recorded one only with its recorded start time:
# pids wrap at 32768 here, and a test running beside this one may be given
# a stopped process's pid (it was, in CI).
RECORDED=$(cat "$ROOT"/node-*/pids 2>/dev/null | awk '{print $2 ":" $3}')
"$R" stop >/dev/null || fail "stop"
sleep 0.5
for e in $RECORDED; do
  still_runs "${e%%:*}" "${e#*:}" && fail "pid ${e%%:*} survived stop"
done
[ -z "$(ls -A "$ROOT" 2>/dev/null)" ] || { ls -la "$ROOT"; fail "stop left sessions behind"; }
if [ -n "${JOB_PID:-}" ] && still_runs "$JOB_PID" "${JOB_START:-}"; then fail "a submitted job (pid $JOB_PID) survived stop"; fi
for f in "$RAYDIST_TMPDIR"/san.*; do
  [ -e "$f" ] || continue
  head -n 60 "$f" >&2
  fail "sanitizer report from $f"
done
echo "ok $CASE"
