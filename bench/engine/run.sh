#!/bin/sh
# run.sh - the engine benchmark side by side: bench_engine (C, rd_engine) and
# bench_torch.py (sentence-transformers, PyTorch eager) on the same shapes and
# thread counts, then one table with the ratio C / PyTorch.  On a machine with
# a CUDA device it adds the GPU path (fp16 and bf16) against PyTorch bf16 and
# the achieved GEMM TFLOP/s as a share of the GPU's peak.
#
# usage: bench/engine/run.sh            (defaults below; all overridable)
#   BUILD=build-dir   THREADS="1 2"   MIN_TIME=2   BATCHES=1,32,256   LENS=32,128
#   PYTHON=.venv/bin/python (needs torch + sentence-transformers; skipped if absent)
#   GPU_PEAK_TFLOPS=989 (dense fp16/bf16 peak of an H200 SXM)
#   TORCH_LOG=/dev/null (where PyTorch's stderr goes)
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build}
THREADS=${THREADS:-"1 2"}
MIN_TIME=${MIN_TIME:-2}
BATCHES=${BATCHES:-1,32,256}
LENS=${LENS:-32,128}
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
GPU_PEAK_TFLOPS=${GPU_PEAK_TFLOPS:-989}
BENCH=$BUILD/bench/engine/bench_engine
[ -x "$BENCH" ] || { echo "run.sh: $BENCH not built (cmake --build $BUILD --target bench_engine)" >&2; exit 1; }
OUT=$(mktemp)
# PyTorch's warnings and errors (TORCH_LOG=/dev/stderr shows them as they come)
TORCH_LOG=${TORCH_LOG:-/dev/null}
trap 'rm -f "$OUT"' EXIT

# a bare name (python3) is looked up on PATH
case $PYTHON in */*) ;; *) PYTHON=$(command -v "$PYTHON" || echo "$PYTHON") ;; esac
have_torch=0
if [ -x "$PYTHON" ] && "$PYTHON" -c "import torch, sentence_transformers" 2>/dev/null; then have_torch=1; fi
[ $have_torch = 1 ] || echo "run.sh: no torch/sentence-transformers in $PYTHON: C figures only" >&2

# C and PyTorch alternate per sequence length so that both see the same
# machine (other load on a shared host skews whichever runs alone).
for t in $THREADS; do
  for len in $(echo "$LENS" | tr ',' ' '); do
    "$BENCH" --threads "$t" --min-time "$MIN_TIME" --batches "$BATCHES" --lens "$len" | tee -a "$OUT"
    if [ $have_torch = 1 ]; then
      "$PYTHON" "$ROOT/bench/engine/bench_torch.py" --threads "$t" --min-time "$MIN_TIME" \
        --batches "$BATCHES" --lens "$len" 2>>"$TORCH_LOG" | tee -a "$OUT"
    fi
  done
done

ngpu=$("$PYTHON" -c "import torch; print(torch.cuda.device_count())" 2>/dev/null || echo 0)
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  "$BENCH" --device 0 --min-time "$MIN_TIME" --batches "$BATCHES" --lens "$LENS" | tee -a "$OUT"
  "$BENCH" --device 0 --bf16 --min-time "$MIN_TIME" --batches "$BATCHES" --lens "$LENS" | tee -a "$OUT"
  # the other attention paths, for comparison (the default is fused where it fits)
  "$BENCH" --device 0 --bf16 --attn gemm --min-time "$MIN_TIME" --batches "$BATCHES" --lens "$LENS" | tee -a "$OUT"
  "$BENCH" --device 0 --attn flash --min-time "$MIN_TIME" --batches "$BATCHES" --lens "$LENS" | tee -a "$OUT"
  "$BENCH" --device 0 --bf16 --attn flash --min-time "$MIN_TIME" --batches "$BATCHES" --lens "$LENS" | tee -a "$OUT"
  if [ $have_torch = 1 ] && [ "$ngpu" != 0 ]; then
    "$PYTHON" "$ROOT/bench/engine/bench_torch.py" --device cuda --dtype bf16 --min-time "$MIN_TIME" \
      --batches "$BATCHES" --lens "$LENS" 2>>"$TORCH_LOG" | tee -a "$OUT"
  fi
fi

python3 - "$OUT" "$GPU_PEAK_TFLOPS" <<'PY'
import sys
rows = []
for line in open(sys.argv[1]):
    if line.startswith("RESULT "):
        rows.append(dict(kv.split("=", 1) for kv in line.split()[1:]))
peak = float(sys.argv[2])
def find(impl, path, threads, b, s):
    for r in rows:
        if r["impl"] == impl and r["path"] == path and r["batch"] == b and r["seq"] == s and \
           (threads is None or r["threads"] == threads):
            return r
print()
print("%-9s %7s %5s %4s | %12s %12s | %12s | %6s | %s" % (
    "path", "threads", "batch", "seq", "C sent/s", "C tok/s", "torch sent/s", "C/torch", "GEMM"))
for r in rows:
    if r["impl"] != "c":
        continue
    if r["path"] == "cpu":
        t = find("torch", "torch-cpu-fp32", r["threads"], r["batch"], r["seq"])
        th = r["threads"]
    else:
        t = find("torch", "torch-cuda-bf16", None, r["batch"], r["seq"])
        th = "-"
    ts = float(t["sent_s"]) if t else None
    g = float(r["gemm_gflops"])
    gemm = "%.1f GF/s" % g if r["path"] == "cpu" else "%.1f TF/s (%.1f%% of %g)" % (g / 1e3, g / 1e3 / peak * 100, peak)
    print("%-9s %7s %5s %4s | %12.1f %12.0f | %12s | %6s | %s" % (
        r["path"], th, r["batch"], r["seq"], float(r["sent_s"]), float(r["tok_s"]),
        "%.1f" % ts if ts else "-", "%.2f" % (float(r["sent_s"]) / ts) if ts else "-", gemm))
PY
