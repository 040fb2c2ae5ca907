#!/bin/sh
# device_pack.sh - put into .device/ what the GPU machine of the `device` tool
# lacks for scripts/device_check.sh (issue 7's GPU checks), so that one call
# carrying .device does them all:
#   .device/model/  the all-MiniLM-L6-v2 files, its weights rounded to F16
#                   (45 MB: the F32 file, 91 MB, is over the 64 MiB a call
#                   carries); device_check.sh widens them back to F32 there
#   .device/debs/   Debian's OpenBLAS (the engine's CPU path links it) and its
#                   Fortran runtime, unpacked there into a private prefix
# .device/ is added to .git/info/exclude.  Needs the weights
# (scripts/fetch_model.sh), apt-get, and a Python with numpy and safetensors
# (PYTHON, default .venv/bin/python).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
SRC=${RD_MODEL_DIR:-$ROOT/models/all-MiniLM-L6-v2}
D=$ROOT/.device
cd "$ROOT"
grep -qx '/.device/' .git/info/exclude 2>/dev/null || echo '/.device/' >> .git/info/exclude
[ -f "$SRC/model.safetensors" ] || scripts/fetch_model.sh
rm -rf "$D"
mkdir -p "$D/model/1_Pooling" "$D/debs"
for f in vocab.txt config.json tokenizer.json tokenizer_config.json special_tokens_map.json \
         sentence_bert_config.json modules.json config_sentence_transformers.json 1_Pooling/config.json; do
  cp "$SRC/$f" "$D/model/$f"
done
"$PYTHON" - "$SRC/model.safetensors" "$D/model/model.f16.safetensors" <<'PY'
import sys
import numpy as np
from safetensors.numpy import load_file, save_file
t = load_file(sys.argv[1])
if any(v.dtype == np.float16 for v in t.values()):
    sys.exit("the weights already hold F16 tensors: they could not be told apart there")
# F32 tensors narrowed; the rest (position_ids, int64) as they are
save_file({k: v.astype(np.float16) if v.dtype == np.float32 else v for k, v in t.items()}, sys.argv[2],
          metadata={"format": "pt"})
PY
(cd "$D/debs" && apt-get download -q libopenblas0-pthread libopenblas-pthread-dev libgfortran5 libquadmath0 \
  2>&1 | grep -v "^W: Download is performed unsandboxed" || true)
ls "$D"/debs/*.deb >/dev/null
sha256sum "$D/model/model.f16.safetensors" > "$D/model/SHA256SUMS"
echo "device_pack: $(du -sh "$D" | cut -f1) in $D (a call carries at most 64 MiB with the tree)"
