"""bench/vs_ray/compare.py - turn one run of bench/vs_ray/run.sh into its
tables: reads the raw outputs in the run's directory, writes results.json and
results.md there and prints the Markdown.  Standard library only.  Exits 1
when a side's required output is missing (run.sh has already said why).

    python3 compare.py RUN_DIR
"""

import json
import os
import platform
import re
import statistics
import sys

# (metric, unit, note on the shapes).  The libraydist figure comes from
# microbench (or vs_ray_extra), the Ray one from ray_perf.py, same names.
ROWS = [
    ("single_client_tasks_sync", "", ""),
    ("single_client_tasks_async", "", ""),
    ("multi_client_tasks_async", "", "2 client tasks"),
    ("single_client_put_calls", "", ""),
    ("multi_client_put_calls", "", "2 client tasks"),
    ("single_client_get_calls", "", ""),
    ("single_client_put_gigabytes", "GB/s", "100 MiB objects"),
    ("multi_client_put_gigabytes", "GB/s", "2 client tasks, 100 MiB objects"),
    ("single_client_wait_1k_refs", "", "one wait for all 1000"),
    ("single_client_wait_1k_refs_one_at_a_time", "", "Ray's shape: 1000 waits of num_returns=1"),
    ("single_client_get_object_containing_10k_refs", "", "a task's result holding 10k refs: get it, take the refs"),
    ("single_client_get_10k_refs", "", "one get of 10k put refs (values fetched)"),
    ("single_client_stream_items", "", "one streaming task, each item taken and got; window (backpressure) 64"),
    ("single_client_stream_items_unlimited", "", "the same without a window"),
    ("1_1_actor_calls_sync", "", ""),
    ("1_1_actor_calls_async", "", ""),
    ("1_1_actor_calls_concurrent", "", "max_concurrency 16"),
    ("1_n_actor_calls_async", "", "driver -> 4 actors"),
    ("n_n_actor_calls_async", "", "2 clients, each with its own actor"),
    ("n_n_actor_calls_with_arg_async", "", "the same, a put ref as argument"),
    ("actor_creation_per_second", "", "200 actors, one call each"),
    ("placement_group_create_removal", "", "100 groups of 1 bundle"),
]
NOT_IN_LIBRAYDIST = {}
# Rows held to the 10x target: every task, actor and object metric with both
# sides.  The put-bandwidth rows are also held to memcpy (a put is one copy),
# which caps them near 1x Ray when Ray's put already runs at memcpy speed.
TARGET_10X = {r[0] for r in ROWS} - set(NOT_IN_LIBRAYDIST)


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def by_name(entries):
    return {e["name"]: e for e in entries or []}


def fmt(v, unit=""):
    if v is None:
        return "-"
    if unit == "GB/s":
        return "%.2f" % v
    if v >= 100:
        return "{:,.0f}".format(v)
    return "%.2f" % v


def pm(e, unit=""):
    """mean ± sd, the sd printed with the mean's precision."""
    if not e:
        return "-"
    m = e["per_second"]
    if unit != "GB/s" and m >= 100:
        return "{:,.0f} ± {:,.0f}".format(m, e["sd"])
    return "%s ± %.2f" % (fmt(m, unit), e["sd"])


def parse_kv_lines(path, prefix):
    """Lines "prefix k=v k=v" -> list of dicts of floats."""
    out = []
    try:
        for line in open(path):
            if line.startswith(prefix + " "):
                kv = (x.split("=", 1) for x in line.split()[1:] if "=" in x)
                out.append({k: float(v) for k, v in kv if re.fullmatch(r"[-+.\deE]+", v)})
    except OSError:
        pass
    return out


def mean_sd(xs):
    if not xs:
        return None
    return {"mean": statistics.fmean(xs), "sd": statistics.stdev(xs) if len(xs) > 1 else 0.0, "n": len(xs)}


def main():
    d = sys.argv[1]
    p = lambda n: os.path.join(d, n)  # noqa: E731
    meta = load(p("meta.json")) or {}
    c = by_name(load(p("c_microbench.json")))
    c.update(by_name(load(p("c_extra.json"))))
    ray = load(p("ray_perf.json")) or {}
    r = by_name(ray.get("metrics"))
    ok = bool(c) and bool(r)

    res = {"meta": meta, "ray_version": ray.get("ray_version"), "rows": [], "references": {}, "first_task": {},
           "latency": {}, "batch": None, "targets": []}

    md = []
    md.append("## libraydist vs Ray %s, %s" % (ray.get("ray_version", "?"), meta.get("date", "")))
    md.append("")
    md.append("%s CPUs (%s), %s trials of %s s after a warm-up on both sides; load average %s at the start."
              % (meta.get("cpus", "?"), meta.get("cpu_model", platform.machine()), meta.get("trials", "?"),
                 meta.get("duration", "?"), meta.get("loadavg_start", "?")))
    md.append("")
    md.append("| metric | Ray ops/s | libraydist ops/s | libraydist ÷ Ray | shape |")
    md.append("|---|---:|---:|---:|---|")
    for name, unit, note in ROWS:
        re_, ce = r.get(name), c.get(name)
        row = {"name": name, "unit": unit or "ops/s", "ray": re_, "libraydist": ce}
        if name in NOT_IN_LIBRAYDIST:
            cs, ratio = NOT_IN_LIBRAYDIST[name], "-"
        else:
            cs = pm(ce, unit)
            ratio = "-"
            if ce and re_ and re_["per_second"]:
                x = ce["per_second"] / re_["per_second"]
                ratio = "{:,.0f}x".format(x) if x >= 100 else "%.1fx" % x
            if ce and re_ and re_["per_second"]:
                row["ratio"] = ce["per_second"] / re_["per_second"]
        if re_ and len(re_.get("trials", [])) == 1:
            note = (note + "; " if note else "") + "Ray: 1 timed trial"
        label = name + (" (GB/s)" if unit == "GB/s" else "")
        md.append("| %s | %s | %s | %s | %s |" % (label, pm(re_, unit), cs, ratio, note or ""))
        res["rows"].append(row)

    # time to start a cluster and run a first task (fresh process each run)
    cf = parse_kv_lines(p("c_first_task.txt"), "first_task")
    rf = parse_kv_lines(p("ray_first_task.txt"), "first_task")
    cw = [x["wall_s"] for x in parse_kv_lines(p("c_first_task.txt"), "process")]
    rw = [x["wall_s"] for x in parse_kv_lines(p("ray_first_task.txt"), "process")]
    ft = {
        "libraydist": {k: mean_sd([x[k] for x in cf]) for k in ("init_s", "first_result_s", "total_s")} if cf else None,
        "ray": {k: mean_sd([x[k] for x in rf]) for k in ("import_s", "init_s", "first_result_s", "total_s")}
        if rf else None,
        "libraydist_process_wall_s": mean_sd(cw),
        "ray_process_wall_s": mean_sd(rw),
    }
    res["first_task"] = ft

    def sec(m):
        return "%.3f ± %.3f s" % (m["mean"], m["sd"]) if m else "-"

    def tratio(a, b):
        return "%.0fx" % (a["mean"] / b["mean"]) if a and b and b["mean"] > 0 else "-"

    if cf and rf:
        rows_t = [
            ("first_task: init (rd_init / ray.init)", ft["ray"]["init_s"], ft["libraydist"]["init_s"],
             "Ray's includes `import ray` (%.2f s)" % ft["ray"]["import_s"]["mean"]),
            ("first_task: init + one task + get", ft["ray"]["first_result_s"], ft["libraydist"]["first_result_s"], ""),
            ("first_task: ... + shutdown", ft["ray"]["total_s"], ft["libraydist"]["total_s"], ""),
            ("first_task: whole process", ft["ray_process_wall_s"], ft["libraydist_process_wall_s"],
             "exec to exit, timed outside"),
        ]
        for label, rv, cv, note in rows_t:
            md.append("| %s (seconds, lower is better) | %s | %s | %s faster | %s |"
                      % (label, sec(rv), sec(cv), tratio(rv, cv), note))
    md.append("")

    # targets
    tg = []
    for row in res["rows"]:
        if row["name"] in TARGET_10X and "ratio" in row:
            tg.append({"target": "%s >= 10x Ray" % row["name"], "value": row["ratio"], "met": row["ratio"] >= 10})
    memcpy = c.get("memcpy_gigabytes_single_thread")
    put = c.get("single_client_put_gigabytes")
    if memcpy and put:
        share = put["per_second"] / memcpy["per_second"]
        tg.append({"target": "single_client_put_gigabytes >= 80% of memcpy", "value": share, "met": share >= 0.8})
    res["targets"] = tg
    missed = [t for t in tg if not t["met"]]
    md.append("Targets (10x Ray per task, actor and object metric; put within 80%% of memcpy): %d of %d met.%s"
              % (len(tg) - len(missed), len(tg),
              (" Missed: " + "; ".join("%s (%s)" % (t["target"], ("%.2f" % t["value"]) if "memcpy" in t["target"]
                                                      else "%.1fx" % t["value"]) for t in missed)) if missed else ""))
    md.append("")

    # physical references
    md.append("### Physical references (same run)")
    md.append("")
    md.append("| reference | figure |")
    md.append("|---|---|")
    if memcpy:
        md.append("| memcpy, single thread, 100 MiB | %s GB/s |" % pm(memcpy, "GB/s"))
        res["references"]["memcpy_gigabytes_single_thread"] = memcpy
    if memcpy and put:
        md.append("| libraydist put bandwidth ÷ memcpy | %.2f |" % (put["per_second"] / memcpy["per_second"]))
        if r.get("single_client_put_gigabytes"):
            md.append("| Ray put bandwidth ÷ memcpy | %.2f |"
                      % (r["single_client_put_gigabytes"]["per_second"] / memcpy["per_second"]))
    for fn, label in (("sockping.json", "Unix-socket round trip, 64 B, 2 processes, any CPUs"),
                      ("sockping_same_cpu.json", "the same, both processes on CPU 0")):
        s = load(p(fn))
        if s:
            res["references"][s["name"]] = s
            md.append("| %s | %s round trips/s; p50 %.1f µs, p99 %.1f µs |"
                      % (label, fmt(s["per_second"]), s["p50_us"], s["p99_us"]))
    md.append("")

    # latency distributions of the sync round trips
    clat = {}
    for line in open(p("c_microbench.txt")) if os.path.exists(p("c_microbench.txt")) else []:
        m = re.match(r"(\S+) latency p50 ([\d.]+) us p99 ([\d.]+) us \((\d+) samples\)", line)
        if m:
            clat[m.group(1)] = {"p50_us": float(m.group(2)), "p99_us": float(m.group(3)), "samples": int(m.group(4))}
    rlat = ray.get("latency", {})
    res["latency"] = {"libraydist": clat, "ray": rlat}
    if clat or rlat:
        md.append("| sync round trip | Ray p50 / p99 | libraydist p50 / p99 |")
        md.append("|---|---:|---:|")
        for k in ("single_client_tasks_sync", "1_1_actor_calls_sync"):
            a, b = rlat.get(k), clat.get(k)
            md.append("| %s | %s | %s |" % (k, "%.1f / %.1f µs" % (a["p50_us"], a["p99_us"]) if a else "-",
                                           "%.1f / %.1f µs" % (b["p50_us"], b["p99_us"]) if b else "-"))
        md.append("")

    # batch inference
    b = None
    if meta.get("batch"):
        b = dict(meta["batch"])
        for k, fn in (("ray", "ray_batch.txt"), ("libraydist", "c_batch.txt")):
            lines = parse_kv_lines(p(fn), "summary:")
            b[k] = {"items": lines[-1]["items"], "seconds": lines[-1]["seconds"],
                    "items_per_s": lines[-1]["items_per_s"]} if lines else None
    if b:
        res["batch"] = b
        md.append("### Batch inference: all-MiniLM-L6-v2 over %s (%d items, %d replicas x %g CPU, %d thread each, batch %d)"
                  % (b["corpus"], b["limit"], b["replicas"], b["cpus_per_replica"], b["threads_per_replica"],
                     b["batch"]))
        md.append("")
        md.append("| pipeline | items | seconds | items/s |")
        md.append("|---|---:|---:|---:|")
        for k, label in (("ray", "Ray Data map_batches, actor pool, sentence-transformers"),
                         ("libraydist", "libraydist batch_embed, actor pool, rd_engine")):
            s = b.get(k)
            md.append("| %s | %s | %s | %s |" % (label, int(s["items"]) if s else "-",
                                                 "%.1f" % s["seconds"] if s else "-",
                                                 "%.1f" % s["items_per_s"] if s else "failed"))
        if b.get("ray") and b.get("libraydist"):
            ratio = b["libraydist"]["items_per_s"] / b["ray"]["items_per_s"]
            b["ratio"] = ratio
            md.append("")
            md.append("libraydist ÷ Ray: %.2fx (target: at least 1x: %s)." % (ratio, "met" if ratio >= 1 else "missed"))
            res["targets"].append({"target": "batch inference items/s >= Ray", "value": ratio, "met": ratio >= 1})
            agree = p("batch_agreement.txt")
            if os.path.exists(agree):
                md.append(open(agree).read().strip() + " (libraydist rows against Ray rows).")
        else:
            ok = False
    elif meta.get("batch_skipped"):
        md.append("Batch inference: %s." % meta["batch_skipped"])
    md.append("")

    text = "\n".join(md)
    with open(p("results.md"), "w") as f:
        f.write(text)
    with open(p("results.json"), "w") as f:
        json.dump(res, f, indent=1)
    print(text)
    if not ok or not cf or not rf:
        print("compare.py: a side is missing its results (see the logs in %s)" % d, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
