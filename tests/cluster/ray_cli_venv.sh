#!/bin/sh
# ray_cli_venv.sh - make (idempotently) the Python environment whose `ray`
# CLI and JobSubmissionClient the cluster_jobs_ray_cli test drives against a
# node's jobs API: Ray's own job tools, from PyPI (ray[default], pinned), in
# .venv-raycli at the project root.  Prints the path of its `ray`.
#   usage: tests/cluster/ray_cli_venv.sh   (RAY_VERSION=2.60.0 VENV=.venv-raycli)
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
RAY_VERSION=${RAY_VERSION:-2.60.0}
VENV=${VENV:-$ROOT/.venv-raycli}
PY=$VENV/bin/python

ready() {
  "$PY" - "$RAY_VERSION" <<'PY' >/dev/null 2>&1
import sys, importlib.metadata as m
assert m.version("ray") == sys.argv[1]
import ray.job_submission, aiohttp  # noqa: F401  (the CLI's log tail is an aiohttp WebSocket)
PY
}

if [ -x "$PY" ] && ready; then echo "$VENV/bin/ray"; exit 0; fi
[ -x "$PY" ] || python3 -m venv "$VENV" >&2
"$PY" -m pip install -q --disable-pip-version-check "ray[default]==$RAY_VERSION" >&2
ready || { echo "ray_cli_venv.sh: $VENV has no usable ray[default]==$RAY_VERSION" >&2; exit 1; }
echo "$VENV/bin/ray"
