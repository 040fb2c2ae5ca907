#!/bin/sh
# venv.sh - make (idempotently) the Python environment the Ray side runs in and
# print its python.  Ray and Ray Data come from PyPI into .venv-ray; torch and
# sentence-transformers are reused from the project's .venv through a .pth
# file when that venv has them (the CUDA torch wheels are ~6 GB), else they
# are installed into .venv-ray too.  Never modifies .venv.
#   usage: bench/vs_ray/venv.sh   (RAY_VERSION=2.60.0 VENV=.venv-ray BASE_VENV=.venv)
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
RAY_VERSION=${RAY_VERSION:-2.60.0}
VENV=${VENV:-$ROOT/.venv-ray}
BASE_VENV=${BASE_VENV:-$ROOT/.venv}
PY=$VENV/bin/python

ready() {
  "$PY" - "$RAY_VERSION" <<'PY' >/dev/null 2>&1
import sys, importlib.metadata as m
assert m.version("ray") == sys.argv[1]
import ray, ray.data, pyarrow, pandas, sentence_transformers, torch  # noqa: F401
PY
}

if [ -x "$PY" ] && ready; then echo "$PY"; exit 0; fi

[ -x "$PY" ] || python3 -m venv "$VENV" >&2
site=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
if [ -x "$BASE_VENV/bin/python" ] && "$BASE_VENV/bin/python" -c "import torch, sentence_transformers" 2>/dev/null; then
  base_site=$("$BASE_VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  # Appended after .venv-ray's own site-packages, so Ray's pins win.
  echo "$base_site" > "$site/zz_base_venv.pth"
  "$PY" -m pip install -q "ray[data]==$RAY_VERSION" >&2
else
  "$PY" -m pip install -q "ray[data]==$RAY_VERSION" sentence-transformers >&2
fi
ready || { echo "venv.sh: $VENV is not usable for ray[data]==$RAY_VERSION + sentence-transformers" >&2; exit 1; }
echo "$PY"
