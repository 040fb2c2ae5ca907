#!/bin/sh
# bench/state/state_latency.sh [RAYDIST] [TASKS] [raydist|ray-native] - how
# long Ray's state API takes to answer `ray list` and `ray summary` with
# TASKS tasks waiting for an argument and one actor in the cluster.
#
# raydist: a one-node cluster (2 CPUs) in a private RAYDIST_TMPDIR and
# bench/state/state_hold (build/bench/state/state_hold; STATE_HOLD=path)
# holding the tasks; ray-native: a real Ray head (`ray start --head` from
# .venv-raycli, tests/cluster/ray_cli_venv.sh; RAY=path of its `ray`) and a
# Python driver holding the same.  Then, from one Python process, REPS
# (default 20) GETs of each endpoint below, each on a new connection as
# Ray's CLI makes them, and the mean, median and largest time of each,
# with the rows and the total the answer gave.  The CLI's own start
# (about a second of Python imports) is left out.  Not a test.
R=${1:-build/runtime/raydist}
TASKS=${2:-1000}
MODE=${3:-raydist}
REPS=${REPS:-20}
case $R in /*) ;; *) R=$PWD/$R ;; esac
RAY=${RAY:-$PWD/.venv-raycli/bin/ray}
HOLD=${STATE_HOLD:-$(dirname "$(dirname "$R")")/bench/state/state_hold}
T=$(mktemp -d /tmp/rdstate.XXXXXX)
# measure URL TOKEN: the timings (TOKEN may be empty)
measure() {
  python3 - "$1" "$2" "$TASKS" "$REPS" "$MODE" <<'PY'
import json, sys, time, urllib.request
base, tok, n, reps, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
hdr = {"Authorization": "Bearer " + tok} if tok else {}
def get(path):
    return json.load(urllib.request.urlopen(urllib.request.Request(base + path, headers=hdr), timeout=120))
deadline = time.time() + 120   # Ray reports task events about once a second
while time.time() < deadline:
    r = get("/api/v0/tasks?limit=1&filter_keys=state&filter_predicates=%3D&filter_values=PENDING_ARGS_AVAIL")
    if r["data"]["result"]["num_filtered"] >= n:
        break
    time.sleep(0.5)
else:
    sys.exit("%s: the %d tasks were never all listed (last answer: %s)" % (mode, n, r["data"]["result"]["num_filtered"]))
eps = ["/api/v0/nodes", "/api/v0/actors", "/api/v0/tasks?limit=100", "/api/v0/tasks?limit=%d" % n,
       "/api/v0/tasks?limit=100&filter_keys=state&filter_predicates=%3D&filter_values=RUNNING",
       "/api/v0/tasks/summarize"]
for ep in eps:
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        r = get(ep)["data"]["result"]
        ts.append(1000 * (time.perf_counter() - t0))
    ts.sort()
    rows = len(r["result"]) if isinstance(r.get("result"), list) else "-"
    print("%s: %-90s mean %7.1f ms, median %7.1f ms, max %7.1f ms (rows %s, total %s)"
          % (mode, ep, sum(ts) / len(ts), ts[len(ts) // 2], ts[-1], rows, r["total"]))
PY
}
if [ "$MODE" = ray-native ]; then
  [ -x "$RAY" ] || { echo "no Ray CLI at $RAY: run tests/cluster/ray_cli_venv.sh"; exit 1; }
  export RAY_USAGE_STATS_ENABLED=0
  "$RAY" start --head --num-cpus 2 --dashboard-port 8265 --disable-usage-stats > /dev/null 2>&1 ||
    { echo "cannot start Ray"; exit 1; }
  cat > "$T/hold.py" <<PY
import os, time, ray
ray.init(address="auto")
@ray.remote
def blocker():
    while not os.path.exists("$T/done"):
        time.sleep(0.05)
    return b"x" * 16
@ray.remote(num_cpus=0.01)
def arg_size(b):
    return len(b)
@ray.remote
class Counter:
    def ping(self):
        return 1
c = Counter.remote()
ray.get(c.ping.remote())
arg = blocker.remote()
refs = [arg_size.remote(arg) for _ in range($TASKS)]
open("$T/ready", "w").write("%d\n" % os.getpid())
assert sum(ray.get(refs)) == 16 * $TASKS
PY
  "$(dirname "$RAY")/python" "$T/hold.py" > "$T/hold.log" 2>&1 &
  H=$!
  for _i in $(seq 1 600); do [ -s "$T/ready" ] && break; sleep 0.1; done
  measure http://127.0.0.1:8265 ""
  touch "$T/done"
  wait $H || cat "$T/hold.log"
  "$RAY" stop > /dev/null 2>&1
else
  [ -x "$HOLD" ] || { echo "no $HOLD: build bench/state (cmake --build build)"; exit 1; }
  export RAYDIST_TMPDIR="$T"
  "$R" start --head --node-ip 127.0.0.1 --num-cpus 2 > /dev/null 2>&1 || { echo "cannot start a node"; exit 1; }
  S="$T/raydist-$(id -u)/node-127.0.0.1"
  RAYDIST_ADDRESS=$(sed -n 's/^gcs=//p' "$S/cluster")
  RAYDIST_ADDRESS="$RAYDIST_ADDRESS" "$HOLD" "$TASKS" "$T/ready" "$T/done" > "$T/hold.log" 2>&1 &
  H=$!
  for _i in $(seq 1 600); do [ -s "$T/ready" ] && break; sleep 0.1; done
  measure "http://$(cat "$S/metrics")" "$(cat "$S/token")"
  touch "$T/done"
  wait $H || cat "$T/hold.log"
  "$R" stop > /dev/null
fi
rm -rf "$T"
