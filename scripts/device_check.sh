#!/bin/sh
# device_check.sh - issue 7's GPU checks in one run on the `device` tool's GPU
# machine (an H200 whose image has nvcc, CMake, PyTorch and
# sentence-transformers, but not Debian's libraries or the model):
#   1. unpack .device/debs (OpenBLAS) into a private prefix;
#   2. widen .device/model's F16 weights to F32 into models/all-MiniLM-L6-v2;
#   3. build the engine alone (RD_ENGINE_ONLY) for sm_90;
#   4. run the engine tests that hold with F16-rounded weights (the GPU test
#      against the fixture, cosine >= 0.999, and against the CPU path; the
#      CPU test's 1e-4 bound needs the exact F32 weights and is left out);
#   5. run bench/engine/run.sh: the GPU path in fp16 and bf16 (fused, flash
#      and GEMM attention) beside PyTorch bf16 on the same shapes, with the
#      GEMM share of peak; then a per-op profile (RD_GPU_PROFILE) at batch 256;
#   6. compute-sanitizer (memcheck on the GPU test, racecheck on the fused
#      and flash attention kernels) where the machine allows it;
#   7. the CPU path's thread scaling, and at 16 threads its GEMMs split three
#      ways (RD_ENGINE_CPU_SPLIT=rows|tiles|blas).
# Everything it prints also goes to $OUT/device_check.log.  EXTRA=0 leaves out
# ncu and compute-sanitizer; QUICK=1 also leaves out the CPU rows and probe
# (GPU tests and GPU figures only); PROBE=cpu only builds and shows which OpenBLAS
# core the CPU path gets and its speed under other OPENBLAS_CORETYPEs.
#
# Here, once:  scripts/device_pack.sh
# Then the device tool's run: command "sh scripts/device_check.sh",
#   carry [".device"], timeout_s 420.
set -u
if [ "${QUICK:-0}" = 1 ]; then EXTRA=0; THREADS=${THREADS-}; fi
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/device-out}
PY=${PYTHON:-python3}   # needs numpy and safetensors; torch + sentence-transformers for the comparison
mkdir -p "$OUT"
cd "$ROOT"

main() {
  set -e
  [ -d .device/model ] && [ -d .device/debs ] || { echo "no .device/: run scripts/device_pack.sh here first"; exit 2; }
  P=/tmp/rd-devroot
  rm -rf "$P"
  mkdir -p "$P"
  for f in .device/debs/*.deb; do
    if command -v dpkg >/dev/null 2>&1; then dpkg -x "$f" "$P"
    else (cd "$P" && ar p "$ROOT/$f" "$(ar t "$ROOT/$f" | grep '^data.tar')" | tar -xJf -); fi
  done
  for pc in $(find "$P" -name '*.pc'); do sed -i "s#=/usr/#=$P/usr/#" "$pc"; done
  BLASPC=$(dirname "$(find "$P" -name openblas.pc | head -1)")
  export PKG_CONFIG_PATH="$BLASPC${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export LD_LIBRARY_PATH="$P/usr/lib/x86_64-linux-gnu/openblas-pthread:$P/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

  M=models/all-MiniLM-L6-v2
  mkdir -p "$M/1_Pooling"
  (cd .device/model && sha256sum -c --quiet SHA256SUMS)
  (cd .device/model && find . -type f ! -name 'model.f16.safetensors' ! -name SHA256SUMS -exec cp --parents {} "$ROOT/$M/" \;)
  "$PY" - .device/model/model.f16.safetensors "$M/model.safetensors" <<'PY'
import sys
import numpy as np
from safetensors.numpy import load_file, save_file
t = load_file(sys.argv[1])
n = sum(v.dtype == np.float16 for v in t.values())
save_file({k: v.astype(np.float32) if v.dtype == np.float16 else v for k, v in t.items()}, sys.argv[2],
          metadata={"format": "pt"})
print("weights: %d of %d tensors widened from F16 to F32" % (n, len(t)))
PY

  nvidia-smi -L || true
  nvcc --version | tail -2 || true
  B=$ROOT/build-device
  cmake -S . -B "$B" -DRD_ENGINE_ONLY=ON -DRD_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$P/usr" >"$OUT/configure.log" 2>&1 ||
    { tail -30 "$OUT/configure.log"; exit 1; }
  grep -q "CUDA path ON" "$OUT/configure.log" || { echo "CUDA path not enabled:"; tail -20 "$OUT/configure.log"; exit 1; }
  cmake --build "$B" -j "$(nproc)" >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
  set +e
  if [ "${PROBE:-}" = cpu ]; then  # PROBE=cpu: only which OpenBLAS kernels the CPU path gets, and their speed
    grep -m1 "model name" /proc/cpuinfo
    for f in avx2 avx512f avx512_bf16 amx_tile; do grep -qw $f /proc/cpuinfo && echo "cpu has $f"; done
    for ct in "" Haswell SkylakeX Zen; do
      for th in 1 16; do
        echo "OPENBLAS_CORETYPE=${ct:-(detected)} threads $th:"
        OPENBLAS_VERBOSE=2 OPENBLAS_CORETYPE=$ct timeout 60 "$B/bench/engine/bench_engine" --threads $th \
          --batches 256 --lens 32 --min-time 0.5 2>&1 | grep -E "^  cpu|Core|core" || true
      done
    done
    return 0
  fi
  echo "== tests"
  ctest --test-dir "$B" -R 'engine_(gpu_embed|flash_emu|norm_emu|tokenizer|safetensors|stages|bad_input)|rt_labels' \
    --output-on-failure \
    --timeout 150
  t=$?
  echo "ctest exit $t"
  echo "== benchmark"
  BUILD="$B" PYTHON="$PY" THREADS="${THREADS-16}" MIN_TIME="${MIN_TIME:-0.5}" TORCH_LOG="$OUT/torch.log" \
    timeout 300 sh bench/engine/run.sh
  b=$?
  echo "bench exit $b"
  if nvidia-smi -L >/dev/null 2>&1; then
    echo "== per-op profile, batch 256"
    for a in auto flash gemm; do
      RD_GPU_PROFILE=1 timeout 60 "$B/bench/engine/bench_engine" --device 0 --bf16 --attn $a --batches 256 \
        --lens 32,128 --min-time 0.3 2>&1 | grep -v '^RESULT' || true
    done
    echo "== the experiments, batch 256, bf16: GELU in the FFN-in GEMM's epilogue (RD_GPU_GELU_EPILOGUE=1),"
    echo "   the residual stream in bf16 (RD_GPU_T_RESIDUAL=1), each alone and all with flash attention"
    for x in "RD_GPU_GELU_EPILOGUE=1" "RD_GPU_T_RESIDUAL=1" "RD_GPU_GELU_EPILOGUE=1 RD_GPU_T_RESIDUAL=1"; do
      for a in auto flash; do
        env $x timeout 60 "$B/bench/engine/bench_engine" --device 0 --bf16 --attn $a \
          --batches 256 --lens 32,128 --min-time 0.5 2>&1 | grep -v '^RESULT' || true
      done
    done
    RD_GPU_GELU_EPILOGUE=1 RD_GPU_T_RESIDUAL=1 RD_GPU_PROFILE=1 timeout 60 "$B/bench/engine/bench_engine" \
      --device 0 --bf16 --attn flash --batches 256 --lens 128 --min-time 0.3 2>&1 | grep -v '^RESULT' || true
    if [ "${EXTRA:-1}" = 1 ] && command -v ncu >/dev/null 2>&1; then
      for k in attention flash; do
        echo "== ncu: the $k kernel at 256 x 128 (one launch)"
        a=fused; [ $k = flash ] && a=flash
        timeout 90 ncu --clock-control none --kernel-name regex:${k}_kernel --launch-skip 6 --launch-count 1 \
          --section SpeedOfLight --section Occupancy --section WarpStateStats \
          "$B/bench/engine/bench_engine" --device 0 --bf16 --attn $a --batches 256 --lens 128 --min-time 0 \
          >"$OUT/ncu-$k.txt" 2>&1
        grep -E "Duration|Throughput|Achieved Occupancy|Theoretical Occupancy|Block Limit|Stall|cycles being stalled" \
          "$OUT/ncu-$k.txt" | head -30
      done
    fi
    if [ "${EXTRA:-1}" = 1 ] && command -v compute-sanitizer >/dev/null 2>&1; then
      echo "== compute-sanitizer"
      for k in flash attention; do
        a=fused; [ $k = flash ] && a=flash
        for l in 40 128 300; do  # one tile, two tiles, a partial last tile
          timeout 60 compute-sanitizer --tool racecheck --racecheck-report all --kernel-name kns=${k}_kernel \
            "$B/bench/engine/bench_engine" --device 0 --attn $a --batches 3 --lens $l --min-time 0 \
            >"$OUT/racecheck-$k-$l.txt" 2>&1
          echo "racecheck $k at $l tokens: exit $?"
          grep -E "RACECHECK SUMMARY|Race reported|hazard|rror" "$OUT/racecheck-$k-$l.txt" | head -8
        done
      done
      timeout 150 compute-sanitizer --tool memcheck --print-limit 5 "$B/tests/engine/test_engine_gpu_embed" \
        2>&1 | tail -4 || true
    fi
  fi
  if [ "${QUICK:-0}" = 1 ]; then [ $t = 0 ] && [ $b = 0 ]; return; fi
  echo "== CPU path thread scaling (batch 256 x 32) and the environment that might cap it"
  nproc; env | grep -iE "omp|blas|gomp|mkl|affinity" || true
  for th in 1 4 16; do
    timeout 60 "$B/bench/engine/bench_engine" --threads $th --batches 256 --lens 32 --min-time 0.5 | grep '^  cpu' || true
    OMP_WAIT_POLICY=passive timeout 60 "$B/bench/engine/bench_engine" --threads $th --batches 256 --lens 32 \
      --min-time 0.5 | grep '^  cpu' | sed 's/$/  (OMP_WAIT_POLICY=passive)/' || true
  done
  echo "== CPU path at 16 threads, the GEMMs split three ways (RD_ENGINE_CPU_SPLIT: row blocks, the default;"
  echo "   row x column tiles; OpenBLAS's own threads), batch 256 x 32 and x 128"
  for sp in rows tiles blas rows; do
    RD_ENGINE_CPU_SPLIT=$sp timeout 90 "$B/bench/engine/bench_engine" --threads 16 --batches 256 --lens 32,128 \
      --min-time 0.5 | grep '^  cpu' | sed "s/$/  (split $sp)/" || true
  done
  [ $t = 0 ] && [ $b = 0 ]
}

{ main; echo $? > "$OUT/.rc"; } 2>&1 | tee "$OUT/device_check.log"
rc=$(cat "$OUT/.rc" 2>/dev/null || echo 1)
rm -f "$OUT/.rc"
exit "$rc"
