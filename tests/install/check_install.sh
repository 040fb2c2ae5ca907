#!/bin/sh
# check_install.sh BUILD_DIR SOURCE_DIR: install into a temporary prefix, then
# build and run a consumer with find_package(raydist) and with pkg-config,
# with no path into the build tree (the library finds `raydist` next to it).
set -eu
build=$1; src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log"
# the configured build and install paths must not be what makes this work
unset RAYDIST_BIN || true
cmake -S "$src/tests/install" -B "$tmp/cm" -DCMAKE_PREFIX_PATH="$tmp/prefix" > "$tmp/cm.log"
cmake --build "$tmp/cm" > "$tmp/cmb.log"
"$tmp/cm/consumer"
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
cc -o "$tmp/pc_consumer" "$src/tests/install/consumer.c" $(pkg-config --cflags --libs raydist) -Wl,-rpath,"$tmp/prefix/lib"
"$tmp/pc_consumer"
test -x "$tmp/prefix/bin/raydist"
echo "install: ok"
