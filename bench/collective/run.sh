#!/bin/sh
# bench/collective/run.sh - all-reduce between actors, libraydist and Ray side
# by side in one run: bench_collective (rd_allreduce around the ring, and the
# same through the driver) then ray_allreduce.py (Ray through the driver, and
# Ray's gloo collective when pygloo imports) with the same worlds, sizes and
# minimum time.  Ray comes from PyPI into .venv-ray (bench/vs_ray/venv.sh).
#   usage: bench/collective/run.sh [BUILD_DIR]   (WORLDS=2,4 SIZES=8,65536,4194304,67108864 MIN_TIME=1)
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build}
WORLDS=${WORLDS:-2,4}
SIZES=${SIZES:-8,65536,4194304,67108864}
MIN_TIME=${MIN_TIME:-1}
cmake --build "$BUILD" --target bench_collective raydist_cli -j2 >/dev/null
PY=$("$ROOT/bench/vs_ray/venv.sh")
echo "== libraydist (bench_collective)"
RAYDIST_BIN="$BUILD/runtime/raydist" "$BUILD/bench/collective/bench_collective" \
  --worlds "$WORLDS" --sizes "$SIZES" --min-time "$MIN_TIME"
echo "== Ray ($("$PY" -c 'import ray; print(ray.__version__)'), ray_allreduce.py)"
"$PY" "$ROOT/bench/collective/ray_allreduce.py" --worlds "$WORLDS" --sizes "$SIZES" --min-time "$MIN_TIME"
