#!/bin/sh
# bench/store/spill.sh - bench_spill with spilling inside creates only
# (RAYDIST_SPILL_THRESHOLD=0) and in the background (the default, 0.8),
# alternating, ROUNDS times.  Usage: bench/store/spill.sh [BUILD_DIR] [ROUNDS] [bench_spill options: --store MiB --objects N --mib MiB or --kib KiB]
set -e
BUILD=${1:-build}
ROUNDS=${2:-2}
[ $# -ge 2 ] && shift 2 || shift $#
BIN="$BUILD/bench/store/bench_spill"
[ -x "$BIN" ] || { echo "no $BIN: build first (cmake --build $BUILD --target bench_spill)" >&2; exit 1; }
i=0
while [ "$i" -lt "$ROUNDS" ]; do
  RAYDIST_SPILL_THRESHOLD=0 "$BIN" "$@"
  "$BIN" "$@"
  i=$((i + 1))
done
