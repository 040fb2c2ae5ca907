"""bench/collective/ray_allreduce.py - Ray's side of bench_collective.

The same all-reduce of float32 buffers between Ray actors, three ways:
* "ray driver": as a Ray user writes it with tasks and actors alone: every
  actor returns its buffer (a numpy array), the driver sums them, puts the
  sum, and every actor copies it in;
* "torch gloo": what Ray Train's TorchTrainer does on CPUs: the actors form
  a torch.distributed process group (gloo back end, TCP rendezvous) and call
  dist.all_reduce on a tensor over the same memory;
* "ray gloo": Ray's own collective library (ray.util.collective), which
  needs pygloo for CPUs; PyPI has no pygloo for this Python, so it is timed
  only when it imports.
Timing as bench_collective: one untimed all-reduce, then as many as fill
--min-time (rank 0's time).  Then, as bench_collective's second table,
messages from one actor to another: torch.distributed send/recv (gloo)
one way and ping-pong, and through Ray's object store (the driver passes
each ref from one actor's call to the other's), 16 in flight and one at a
time.  A benchmark: it prints figures and checks nothing.

    python ray_allreduce.py [--worlds 2,4] [--sizes 8,65536,...] [--p2p-sizes 8,...] [--min-time S] [--num-cpus 2]
"""

import argparse
import importlib
import os
import time

import numpy as np

np.seterr(over="ignore")  # the repeated sums overflow to inf, as in bench_collective: timing only
import ray


@ray.remote(num_cpus=0)
class Member:
    def __init__(self, rank):
        self.rank = rank
        self.grad = np.zeros(0, dtype=np.float32)

    def fill(self, n):
        self.grad = ((np.arange(n, dtype=np.int64) + self.rank) % 97).astype(np.float32) * 0.25
        return True

    def contribute(self):
        return self.grad

    def receive(self, total):
        np.copyto(self.grad, total)
        return True

    def torch_join(self, world, port):
        import torch.distributed as dist

        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=self.rank,
                                world_size=world)
        return True

    def torch_allreduce(self, min_time):
        import torch
        import torch.distributed as dist

        t = torch.from_numpy(self.grad)
        t0 = time.perf_counter()
        dist.all_reduce(t)
        one = time.perf_counter() - t0
        iters = torch.tensor([max(3, int(min_time / max(one, 1e-6)))], dtype=torch.int64)
        dist.broadcast(iters, 0)  # every member runs rank 0's count
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(int(iters[0])):
            dist.all_reduce(t)
        return (time.perf_counter() - t0) / int(iters[0])

    def torch_p2p(self, n, min_time, pingpong):
        import torch
        import torch.distributed as dist

        t = torch.zeros(n, dtype=torch.uint8)

        def once():
            if self.rank == 0:
                dist.send(t, 1)
            else:
                dist.recv(t, 0)
            if pingpong:
                if self.rank == 1:
                    dist.send(t, 0)
                else:
                    dist.recv(t, 1)

        once()
        t0 = time.perf_counter()
        for _ in range(4):
            once()
        one = (time.perf_counter() - t0) / 4
        iters = torch.tensor([max(3, int(min_time / max(one, 1e-6)))], dtype=torch.int64)
        dist.broadcast(iters, 0)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(int(iters[0])):
            once()
        dist.barrier()
        return (time.perf_counter() - t0) / int(iters[0])

    def emit(self, n):
        return np.ones(n, dtype=np.uint8)

    def take(self, msg):
        return (int(msg[0]), int(msg[-1])) if len(msg) else (0, 0)

    def gloo(self, world, name, n, min_time):
        import ray.util.collective as col

        col.init_collective_group(world, self.rank, backend="gloo", group_name=name)
        col.allreduce(self.grad, group_name=name)
        iters = 20  # a fixed count: every member must make the same calls
        t0 = time.perf_counter()
        for _ in range(iters):
            col.allreduce(self.grad, group_name=name)
        return (time.perf_counter() - t0) / iters


def driver_once(members):
    arrays = ray.get([m.contribute.remote() for m in members])
    total = arrays[0].copy()
    for a in arrays[1:]:
        total += a
    ref = ray.put(total)
    ray.get([m.receive.remote(ref) for m in members])


def driver_time(members, min_time):
    t0 = time.perf_counter()
    driver_once(members)
    one = time.perf_counter() - t0
    iters = max(3, int(min_time / max(one, 1e-6)))
    t0 = time.perf_counter()
    for _ in range(iters):
        driver_once(members)
    return (time.perf_counter() - t0) / iters


def store_time(a, n, inflight, min_time):
    pend, done, t0 = [], 0, time.perf_counter()
    while True:
        stop = time.perf_counter() - t0 >= min_time and done >= 3
        if pend and (len(pend) == inflight or stop):
            ray.get(pend.pop(0))
            done += 1
            continue
        if stop:
            break
        pend.append(a[1].take.remote(a[0].emit.remote(n)))
    return (time.perf_counter() - t0) / done


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worlds", default="2,4")
    ap.add_argument("--sizes", default="8,65536,4194304,67108864")
    ap.add_argument("--p2p-sizes", default="8,65536,1048576,16777216")
    ap.add_argument("--min-time", type=float, default=1.0)
    ap.add_argument("--num-cpus", type=int, default=2)
    a = ap.parse_args()
    ray.init(num_cpus=a.num_cpus, include_dashboard=False, log_to_driver=False,
             object_store_memory=1 << 30)
    try:
        importlib.import_module("ray.util.collective")
        importlib.import_module("pygloo")
        have_gloo = True
    except Exception:
        have_gloo = False
    print("%-6s %12s | %14s %14s %16s" % ("world", "bytes", "ray driver ms", "torch gloo ms", "ray gloo ms"))
    seq = 0
    for wi, world in enumerate([int(w) for w in a.worlds.split(",")]):
        members = [Member.remote(k) for k in range(world)]
        port = 20000 + (os.getpid() * 7 + wi) % 20000
        ray.get([m.torch_join.remote(world, port) for m in members])
        for size in [int(s) for s in a.sizes.split(",")]:
            n = max(1, size // 4)
            ray.get([m.fill.remote(n) for m in members])
            drv = driver_time(members, a.min_time)
            tg = ray.get([m.torch_allreduce.remote(a.min_time) for m in members])[0]
            gloo = "n/a (no pygloo)"
            if have_gloo:
                seq += 1
                per = ray.get([m.gloo.remote(world, "g%d" % seq, n, a.min_time) for m in members])
                gloo = "%14.4f" % (per[0] * 1e3)
            print("%-6d %12d | %14.4f %14.4f %16s" % (world, n * 4, drv * 1e3, tg * 1e3, gloo), flush=True)
        for m in members:
            ray.kill(m)
    if a.p2p_sizes:
        print("\nfrom one actor to another, ms per message:")
        print("%12s | %14s %14s | %18s %12s" % ("bytes", "torch send/recv", "ping-pong/2", "store, 16 in flight",
                                               "store, 1"))
        pair = [Member.remote(k) for k in range(2)]
        port = 20000 + (os.getpid() * 7 + 99) % 20000
        ray.get([m.torch_join.remote(2, port) for m in pair])
        for n in [int(s) for s in a.p2p_sizes.split(",")]:
            one_way = ray.get([m.torch_p2p.remote(n, a.min_time, False) for m in pair])[1]
            half = ray.get([m.torch_p2p.remote(n, a.min_time, True) for m in pair])[1] / 2
            st16, st1 = store_time(pair, n, 16, a.min_time), store_time(pair, n, 1, a.min_time)
            print("%12d | %14.4f %14.4f | %18.4f %12.4f" % (n, one_way * 1e3, half * 1e3, st16 * 1e3, st1 * 1e3),
                  flush=True)
    ray.shutdown()


if __name__ == "__main__":
    main()
