"""bench/vs_ray/ray_first_task.py - Ray's time from nothing to a first task's
result, in this fresh process: `import ray`, ray.init (start a single-node
cluster with the benchmark's CPUs), one remote call and its ray.get, then
ray.shutdown.  Prints one line in the shape of first_task.c, seconds from
before `import ray`:
  first_task import_s=... init_s=... first_result_s=... shutdown_s=... total_s=...
run.sh runs it several times and also times the whole process from outside."""

import time

t0 = time.perf_counter()
import sys  # noqa: E402

import ray  # noqa: E402

t_import = time.perf_counter()


@ray.remote
def first_noop():
    return b""


ray.init(num_cpus=int(sys.argv[1]) if len(sys.argv) > 1 else 2, include_dashboard=False, log_to_driver=False)
t_init = time.perf_counter()
ray.get(first_noop.remote())
t_task = time.perf_counter()
ray.shutdown()
t_end = time.perf_counter()
print(
    "first_task import_s=%.6f init_s=%.6f first_result_s=%.6f shutdown_s=%.6f total_s=%.6f"
    % (t_import - t0, t_init - t0, t_task - t0, t_end - t_task, t_end - t0)
)
