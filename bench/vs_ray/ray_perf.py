"""bench/vs_ray/ray_perf.py - Ray's side of the side-by-side microbenchmark.

The workloads of `ray microbenchmark` (ray/_private/ray_perf.py), rewritten
with the shapes and the timing method of libraydist's bench/microbench.c so
that each figure can be set next to the C one: one untimed warm-up trial,
then --trials trials that each run for at least --duration seconds; mean and
sample standard deviation.  Where Ray's own shape differs from microbench's,
the C shape is the compared metric and Ray's shape is measured as an extra
row (see docs/benchmarks.md for every metric's exact shape on both sides).
A benchmark: it prints figures and checks nothing.

    python ray_perf.py [--duration S] [--trials N] [--filter SUBSTR]
                       [--json FILE] [--num-cpus 2]
"""

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import ray
from ray.util.placement_group import placement_group, remove_placement_group

NUM_CLIENTS = 2  # microbench's multi_client and n_n metrics use 2 clients
BATCH = 1000  # calls per batch in the async metrics
BIG = 100 << 20  # 100 MiB per put in the bandwidth metrics
NUM_ACTORS_CREATED = 200
NUM_PGS = 100

DURATION = 2.0
TRIALS = 3


# --------------------------------------------------------------- remote code


@ray.remote
def noop():
    return b""


@ray.remote(num_cpus=0)
class Bench:
    def noop(self):
        return b""

    def noop_arg(self, x):
        return b""


def _async_batch(n=BATCH):
    ray.get([noop.remote() for _ in range(n)])


@ray.remote(num_cpus=0)
def client_tasks_async(secs):
    ops = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < secs:
        _async_batch()
        ops += BATCH
    return ops


@ray.remote(num_cpus=0)
def client_put_calls(secs):
    ops = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < secs:
        for _ in range(1000):
            ray.put(0)
        ops += 1000
    return ops


@ray.remote(num_cpus=0)
def client_put_gigabytes(secs):
    buf = np.full(BIG, 1, dtype=np.uint8)
    nbytes = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < secs:
        ray.put(buf)
        nbytes += BIG
    return nbytes


@ray.remote(num_cpus=0)
def client_actor_calls(secs, with_arg):
    """n:n: a client with its own actor, 1000-call batches for `secs`."""
    a = Bench.remote()
    arg = ray.put(0) if with_arg else None

    def batch(n):
        if with_arg:
            ray.get([a.noop_arg.remote(arg) for _ in range(n)])
        else:
            ray.get([a.noop.remote() for _ in range(n)])

    batch(100)  # warm: the constructor has run
    ops = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < secs:
        batch(BATCH)
        ops += BATCH
    ray.kill(a)
    return ops


@ray.remote
def create_object_containing_ref():
    return [ray.put(1) for _ in range(10000)]


# ------------------------------------------------------------------ harness

results = []
latencies = {}


@ray.remote(num_returns="streaming")
def stream_forever(n):
    for i in range(n):
        yield i


def stream_items(backpressure):
    """microbench's single_client_stream_items: one streaming task, every
    item taken and got in turn, for DURATION; then the task is cancelled."""
    opts = {} if backpressure < 0 else {"_generator_backpressure_num_objects": backpressure}
    gen = stream_forever.options(**opts).remote(1 << 40)
    ops = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < DURATION:
        v = ray.get(next(gen))
        assert v == ops, (v, ops)
        ops += 1
    rate = ops / (time.perf_counter() - t0)
    ray.cancel(gen)
    del gen
    return rate


def report(name, fn, unit="", flt=None, warmup=None, trials=None):
    if flt and flt not in name:
        return
    (warmup or fn)()
    v = [fn() for _ in range(trials or TRIALS)]
    mean = statistics.fmean(v)
    sd = statistics.stdev(v) if len(v) > 1 else 0.0
    print("%s per second %.2f +- %.2f%s" % (name, mean, sd, " " + unit if unit else ""), flush=True)
    results.append({"name": name, "per_second": mean, "sd": sd, "unit": unit, "trials": v})


def timed_loop(body, ops_per_call):
    """Run body() until DURATION has passed; ops per second."""
    ops = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < DURATION:
        body()
        ops += ops_per_call
    return ops / (time.perf_counter() - t0)


def multi_client(fn, *args):
    t0 = time.perf_counter()
    total = sum(ray.get([fn.remote(DURATION, *args) for _ in range(NUM_CLIENTS)]))
    return total / (time.perf_counter() - t0)


def latency(name, call):
    samples = []
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < DURATION:
        t = time.perf_counter()
        call()
        samples.append(time.perf_counter() - t)
    samples.sort()
    p50, p99 = samples[len(samples) // 2] * 1e6, samples[int(len(samples) * 0.99)] * 1e6
    print("%s latency p50 %.1f us p99 %.1f us (%d samples)" % (name, p50, p99, len(samples)), flush=True)
    latencies[name] = {"p50_us": p50, "p99_us": p99, "samples": len(samples)}


def _bench_workers():
    """Live processes of Bench actors on this machine (from /proc)."""
    n = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as fp:
                    n += fp.read().startswith(b"ray::Bench")
            except OSError:
                pass
    return n


def actor_creation(n):
    """Create n actors and make one call on each; actors ready per second.
    Then kill them and wait (up to 120 s) for their processes to exit."""
    base = _bench_workers()
    t0 = time.perf_counter()
    hs = [Bench.remote() for _ in range(n)]
    ray.get([h.noop.remote() for h in hs])
    dt = time.perf_counter() - t0
    for h in hs:
        ray.kill(h)
    del hs
    deadline = time.time() + 120
    while _bench_workers() > base and time.time() < deadline:
        time.sleep(0.5)
    return n / dt


def main():
    global DURATION, TRIALS
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=float, default=2.0)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--filter", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--num-cpus", type=int, default=2)
    ap.add_argument("--creation-trials", type=int, default=1)
    ap.add_argument("--creation-warmup", type=int, default=20, help="actors in the warm-up")
    args = ap.parse_args()
    DURATION, TRIALS = args.duration, max(1, args.trials)
    f = args.filter

    ray.init(
        num_cpus=args.num_cpus,
        object_store_memory=2 << 30,  # microbench's store size
        resources={"custom": 100},  # for the placement groups, as in ray_perf.py
        include_dashboard=False,
        log_to_driver=False,
    )
    print(
        "# Ray %s microbenchmark: %d CPUs, %d trials of %.1f s after a warm-up"
        % (ray.__version__, args.num_cpus, TRIALS, DURATION),
        flush=True,
    )

    def tasks_sync():
        return timed_loop(lambda: ray.get(noop.remote()), 1)

    report("single_client_tasks_sync", tasks_sync, flt=f)
    report("single_client_tasks_async", lambda: timed_loop(_async_batch, BATCH), flt=f)
    report("multi_client_tasks_async", lambda: multi_client(client_tasks_async), flt=f)

    def put_calls():
        def body():
            for _ in range(1000):
                ray.put(0)

        return timed_loop(body, 1000)

    report("single_client_put_calls", put_calls, flt=f)
    report("multi_client_put_calls", lambda: multi_client(client_put_calls), flt=f)

    small = ray.put(7)

    def get_calls():
        def body():
            for _ in range(1000):
                ray.get(small)

        return timed_loop(body, 1000)

    report("single_client_get_calls", get_calls, flt=f)

    big = np.full(BIG, 3, dtype=np.uint8)

    def put_gb():
        def body():
            for _ in range(8):  # 800 MiB per round, as microbench
                ray.put(big)

        return timed_loop(body, 8 * BIG) / 1e9

    report("single_client_put_gigabytes", put_gb, "GB/s", flt=f)
    report("multi_client_put_gigabytes", lambda: multi_client(client_put_gigabytes) / 1e9, "GB/s", flt=f)
    del big

    def wait_1k():
        refs = [noop.remote() for _ in range(1000)]
        ready, _ = ray.wait(refs, num_returns=1000)
        assert len(ready) == 1000

    report("single_client_wait_1k_refs", lambda: timed_loop(wait_1k, 1), flt=f)

    def wait_1k_one_at_a_time():  # ray_perf.py's shape
        not_ready = [noop.remote() for _ in range(1000)]
        fetch_local = True
        for _ in range(1000):
            _, not_ready = ray.wait(not_ready, fetch_local=fetch_local)
            fetch_local = False

    report("single_client_wait_1k_refs_one_at_a_time", lambda: timed_loop(wait_1k_one_at_a_time, 1), flt=f)

    report("single_client_stream_items", lambda: stream_items(64), flt=f)
    report("single_client_stream_items_unlimited", lambda: stream_items(-1), flt=f)

    if not f or "10k" in f:
        holder = create_object_containing_ref.remote()
        ray.get(holder)
        report("single_client_get_object_containing_10k_refs", lambda: timed_loop(lambda: ray.get(holder), 1))
        del holder
        tenk = [ray.put(1) for _ in range(10000)]
        report("single_client_get_10k_refs", lambda: timed_loop(lambda: ray.get(tenk), 1))
        del tenk

    if not f or "actor" in f:
        actor = Bench.remote()
        actor_conc = Bench.options(max_concurrency=16).remote()
        actors4 = [Bench.remote() for _ in range(4)]
        ray.get([a.noop.remote() for a in [actor, actor_conc] + actors4])

        def actor_batch(handles):
            n = len(handles)
            ray.get([handles[i % n].noop.remote() for i in range(BATCH)])

        report("1_1_actor_calls_sync", lambda: timed_loop(lambda: ray.get(actor.noop.remote()), 1))
        report("1_1_actor_calls_async", lambda: timed_loop(lambda: actor_batch([actor]), BATCH))
        report("1_1_actor_calls_concurrent", lambda: timed_loop(lambda: actor_batch([actor_conc]), BATCH))
        report("1_n_actor_calls_async", lambda: timed_loop(lambda: actor_batch(actors4), BATCH))
        report("n_n_actor_calls_async", lambda: multi_client(client_actor_calls, False))
        report("n_n_actor_calls_with_arg_async", lambda: multi_client(client_actor_calls, True))

    def pg_create_removal():
        def body():
            pgs = [placement_group([{"custom": 0.001}]) for _ in range(NUM_PGS)]
            for pg in pgs:
                pg.wait(timeout_seconds=30)
            for pg in pgs:
                remove_placement_group(pg)

        return timed_loop(body, NUM_PGS)

    report("placement_group_create_removal", pg_create_removal, flt=f)

    if not f or "actor" in f:
        latency("1_1_actor_calls_sync", lambda: ray.get(actor.noop.remote()))
    if not f or "tasks_sync" in f:
        latency("single_client_tasks_sync", lambda: ray.get(noop.remote()))

    # Last, because every actor is a new Python worker process (about one a
    # second here) and 200 of them dying take a while: a smaller warm-up and,
    # by default, one timed trial (--creation-trials).
    report(
        "actor_creation_per_second",
        lambda: actor_creation(NUM_ACTORS_CREATED),
        "(200 actors, one call each)",
        flt=f,
        warmup=lambda: actor_creation(args.creation_warmup),
        trials=args.creation_trials,
    )

    ray.shutdown()
    if args.json:
        with open(args.json, "w") as fp:
            json.dump(
                {
                    "ray_version": ray.__version__,
                    "num_cpus": args.num_cpus,
                    "duration": DURATION,
                    "trials": TRIALS,
                    "metrics": results,
                    "latency": latencies,
                },
                fp,
                indent=1,
            )


if __name__ == "__main__":
    sys.exit(main())
