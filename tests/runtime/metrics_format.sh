#!/bin/sh
# tests/runtime/metrics_format.sh RT_TEST - the node's /metrics text, taken
# by `rt_test metrics` after some tasks, read by the Prometheus project's own
# parser (python3-prometheus-client, from Debian): every sample parses, each
# family the node documents is there with its type, histogram buckets are
# cumulative and end at the count.  Then /timeline from `rt_test timeline`
# read as JSON: Chrome trace complete events.  Skips (77) without the parser.
set -eu
PY=/usr/bin/python3
[ -x "$PY" ] && "$PY" -c "import prometheus_client.parser" 2>/dev/null || { echo "no prometheus_client: skipped"; exit 77; }
OUT=$(mktemp /tmp/rd-metrics.XXXXXX)
TL=$(mktemp /tmp/rd-timeline.XXXXXX)
DB=$(mktemp /tmp/rd-dashboard.XXXXXX)
AM=$(mktemp /tmp/rd-app-metrics.XXXXXX)
trap 'rm -f "$OUT" "$TL" "$DB" "$AM"' EXIT
RD_METRICS_DUMP="$OUT" RD_DASHBOARD_DUMP="$DB" "$1" metrics
RD_APP_METRICS_DUMP="$AM" "$1" app_metrics
# the application's metrics (rd_metric_*) after the node's, as the parser reads them
"$PY" - "$AM" <<'PY'
import sys
from prometheus_client.parser import text_string_to_metric_families
fams = {f.name: f for f in text_string_to_metric_families(open(sys.argv[1]).read())}
assert fams["app_requests"].type == "counter" and fams["app_queue_depth"].type == "gauge", fams.keys()
assert fams["app_latency_seconds"].type == "histogram", fams["app_latency_seconds"].type
req = {tuple(sorted(s.labels.items())): s.value for s in fams["app_requests"].samples}
assert req == {(("route", "a"),): 12.5, (("route", "b"),): 10, (("route", "c"), ("zone", "x")): 2}, req
assert fams["app_queue_depth"].documentation == "Queued \\ waiting\nrequests.", fams["app_queue_depth"].documentation
g = {tuple(sorted(s.labels.items())): s.value for s in fams["app_queue_depth"].samples}
assert g == {(("pool", "main"), ("zone", "x y")): 5, (): -3.25}, g
h = [s for s in fams["app_latency_seconds"].samples if s.name.endswith("_count")]
assert sorted((s.labels["route"], s.value) for s in h) == [('"q"', 1), ("a", 10), ("b", 10)], h
assert [s.value for s in fams["raydist_app_metric_rejected"].samples] == [0]
print(f"app metrics: {len(fams)} families parsed, the application's with their tags")
PY
RD_TIMELINE_DUMP="$TL" "$1" timeline
"$PY" - "$TL" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
assert len(ev) == 11, len(ev)
for e in ev:
    assert e["ph"] == "X" and e["cat"] == "task" and e["dur"] >= 0 and e["ts"] > 0, e
    assert isinstance(e["pid"], int) and "task_id" in e["args"], e
print(f"timeline: {len(ev)} events parse as Chrome trace JSON")
PY
"$PY" - "$DB" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
n = d["node"]
assert d["cluster"] is None
assert n["resources"]["total"]["CPU"] == 2 and n["tasks"]["run"] >= 21 and n["tasks"]["failed"] >= 1, n
assert set(n["workers"]) == {"starting", "idle", "leased", "dying", "blocked"}, n["workers"]
assert n["store"]["capacity"] > 0 and n["drivers"] == 1
o = n["owned_tasks"]
assert o["waiting"] == 0 and o["sent"] == 0 and o["settled"] == 27 and o["failed"] == 1, o
assert o["latency_p99_s_at_most"] >= 1 and o["latency_mean_s"] > 0, o   # the 1.5 s task and the one behind it
jobs = d["node_jobs"]
assert len(jobs) == 1 and jobs[0]["drivers"] == 1 and jobs[0]["weight"] == 1 and jobs[0]["yields"] == 0, jobs
# the one job: every task ran in its workers and was submitted by its driver
j = jobs[0]
assert j["tasks_run"] == n["tasks"]["run"] and j["tasks_failed"] == n["tasks"]["failed"], (j, n["tasks"])
assert j["owned_settled"] == 27 and j["owned_failed"] == 1 and j["owned_waiting"] == 0 and j["latency_mean_s"] > 0, j
fns = {f["name"]: f for f in d["functions"]}
assert fns["ignore_args"]["latency_mean_s"] >= 1.4 and fns["ignore_args"]["mean_s"] < 1, fns["ignore_args"]
assert sum(f["submitted"] for f in d["functions"]) == 27, d["functions"]
assert fns["add_one"]["calls"] == 20 and fns["fail_always"]["failed"] == 1 and 'odd "name"\\' in fns, fns
totals = [f["total_s"] for f in d["functions"]]
assert totals == sorted(totals, reverse=True), totals   # longest total first
print(f"dashboard: /api/cluster parses as JSON ({len(json.dumps(d))} bytes)")
PY
"$PY" - "$OUT" <<'PY'
import sys
from prometheus_client.parser import text_string_to_metric_families
fams = {f.name: f for f in text_string_to_metric_families(open(sys.argv[1]).read())}
want = {"raydist_uptime_seconds": "gauge", "raydist_resources_total": "gauge",
        "raydist_resources_available": "gauge", "raydist_workers": "gauge",
        "raydist_leases_granted": "counter", "raydist_fair_share_yields": "counter",
        "raydist_requests_respilled": "counter", "raydist_job_nodes_avoided": "gauge",
        "raydist_lease_wait_seconds": "histogram",
        "raydist_task_run_seconds": "histogram", "raydist_tasks_failed": "counter",
        "raydist_stream_items": "counter",
        "raydist_object_store_bytes": "gauge", "raydist_memory_monitor_kills": "counter",
        "raydist_actors": "gauge", "raydist_drivers": "gauge",
        "raydist_function_run_seconds": "histogram", "raydist_function_failed": "counter",
        "raydist_task_latency_seconds": "histogram", "raydist_owned_tasks_failed": "counter",
        "raydist_owned_tasks": "gauge", "raydist_job_info": "gauge", "raydist_job_tasks_run": "counter",
        "raydist_job_task_run_seconds": "counter", "raydist_job_tasks_failed": "counter",
        "raydist_job_owned_tasks_settled": "counter", "raydist_job_task_latency_seconds": "counter",
        "raydist_job_owned_tasks_failed": "counter", "raydist_job_owned_tasks": "gauge",
        "raydist_function_latency_seconds": "histogram"}
for name, typ in want.items():
    assert name in fams, f"missing family {name}"
    assert fams[name].type == typ, f"{name}: type {fams[name].type}, want {typ}"
for f in fams.values():
    if f.type != "histogram":
        continue
    series = {}   # one histogram per set of labels other than le
    for s in f.samples:
        key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
        series.setdefault(key, []).append(s)
    for key, samples in series.items():
        buckets = [s for s in samples if s.name.endswith("_bucket")]
        count = [s.value for s in samples if s.name.endswith("_count")][0]
        vals = [s.value for s in buckets]
        assert vals == sorted(vals), f"{f.name}{key}: buckets not cumulative: {vals}"
        assert buckets[-1].labels["le"] == "+Inf" and vals[-1] == count, f"{f.name}{key}: +Inf bucket != count"
# by function: the label values come back as the names, and add up to the total
runs = {s.labels["function"]: s.value for s in fams["raydist_function_run_seconds"].samples if s.name.endswith("_count")}
failed = {s.labels["function"]: s.value for s in fams["raydist_function_failed"].samples}
assert runs.get("add_one") == 20 and runs.get('odd "name"\\') == 3 and failed.get("fail_always") == 1, (runs, failed)
total = [s.value for s in fams["raydist_task_run_seconds"].samples if s.name.endswith("_count")][0]
assert sum(runs.values()) == total, (runs, total)
assert sum(failed.values()) == [s.value for s in fams["raydist_tasks_failed"].samples][0], failed
lats = {s.labels["function"]: s.value for s in fams["raydist_function_latency_seconds"].samples if s.name.endswith("_count")}
lat_total = [s.value for s in fams["raydist_task_latency_seconds"].samples if s.name.endswith("_count")][0]
assert sum(lats.values()) == lat_total == 27 and lats['odd "name"\\'] == 3, (lats, lat_total)
# by job: one job, its program this test, no GCS; its figures are the node's
one = lambda fam: [s for s in fams[fam].samples]
info = one("raydist_job_info")
assert len(info) == 1 and info[0].labels["gcs_job"] == "0" and info[0].labels["program"].endswith("rt_test"), info
nj = info[0].labels["node_job"]
val = lambda fam: [s.value for s in one(fam) if s.labels["node_job"] == nj][0]
assert val("raydist_job_tasks_run") == total and val("raydist_job_tasks_failed") >= 1, total
assert val("raydist_job_owned_tasks_settled") == 27 and val("raydist_job_owned_tasks_failed") == 1
lat = [s.value for s in fams["raydist_task_latency_seconds"].samples if s.name.endswith("_sum")][0]
assert abs(val("raydist_job_task_latency_seconds") - lat) < 1e-6, (val("raydist_job_task_latency_seconds"), lat)
assert sorted(s.labels["state"] for s in one("raydist_job_owned_tasks")) == ["sent", "waiting"]
print(f"metrics_format: {len(fams)} families, {sum(len(f.samples) for f in fams.values())} samples parsed")
PY
