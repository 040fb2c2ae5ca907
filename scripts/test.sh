#!/bin/sh
# test.sh - build and run the whole test suite, then the runtime, store and
# scheduler tests again under AddressSanitizer + UndefinedBehaviorSanitizer.
# Assumes scripts/install_deps.sh has run.  Exit status: 0 when all pass.
# Tests run two at a time (the machine this is sized for has 2 cores), the
# three-node cluster cases too: each has its own session directory and
# ports, and most of their time is spent waiting (deaths, leases, heartbeats).
# The fair-share test is RUN_SERIAL: it measures shares of the machine.
set -eu
cd "$(dirname "$0")/.."
JOBS=$(nproc)
# Ray's own job CLI, for cluster_jobs_ray_cli (from PyPI, into .venv-raycli)
./tests/cluster/ray_cli_venv.sh >/dev/null
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$JOBS"
ctest --test-dir build -j2 --output-on-failure --timeout 600
cmake -S . -B build-asan -DRD_SANITIZE=ON -DRD_WITH_CUDA=OFF -DCMAKE_BUILD_TYPE=Debug
cmake --build build-asan -j"$JOBS"
ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-asan -j2 --output-on-failure --timeout 900 -LE engine
