#!/bin/sh
# Fails if libraydist.so exports a defined symbol without the rd_ prefix.
lib="$1"
[ -f "$lib" ] || { echo "no library at $lib"; exit 1; }
bad=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | grep -v '^rd_' )
total=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/' | wc -l)
if [ -n "$bad" ]; then
  echo "symbols exported without the rd_ prefix:"; echo "$bad"; exit 1
fi
[ "$total" -gt 10 ] || { echo "only $total exported symbols: the check would pass vacuously"; exit 1; }
echo "$total exported symbols, all rd_"
