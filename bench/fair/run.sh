#!/bin/sh
# bench/fair/run.sh [BUILD_DIR] [TRIALS] - what fair share between jobs buys
# the second job on a busy node, and what it costs the first: a head with 4
# CPUs; job A (tests/fair/fair_test, 80 tasks of 100 ms) fills it, and job B
# (a copy: another executable, so another job; 16 tasks) starts 0.3 s after
# A's first result.  Prints, per trial, B's wait from its driver's start to
# its first task, B's completion and A's, with fair share on and then off
# (RAYDIST_FAIR_SHARE=0), alternating so both see the same machine.
set -eu
B=${1:-build}
N=${2:-3}
R="$B/runtime/raydist"
T="$B/tests/fair/fair_test"
[ -x "$R" ] && [ -x "$T" ] || { echo "build first: $R and $T" >&2; exit 2; }
export RAYDIST_TMPDIR="$(mktemp -d /tmp/rdfairb.XXXXXX)" RAYDIST_LOG_LEVEL=0
ROOT="$RAYDIST_TMPDIR/raydist-$(id -u)"
D="$RAYDIST_TMPDIR/out"
mkdir -p "$D"
trap '"$R" stop >/dev/null 2>&1; rm -rf "$RAYDIST_TMPDIR"' EXIT
OTHER="$RAYDIST_TMPDIR/other_job"
cp "$T" "$OTHER" && printf 'x' >> "$OTHER" && chmod +x "$OTHER"

trial() {   # LABEL ENV...
  label=$1
  shift
  "$R" stop >/dev/null 2>&1 || true
  env "$@" "$R" start --head --port 0 --node-ip 127.0.0.1 --num-cpus 4 >/dev/null
  RAYDIST_ADDRESS=$(sed -n 's/^gcs=//p' "$ROOT/node-127.0.0.1/cluster")
  export RAYDIST_ADDRESS
  rm -f "$D"/x.*
  "$T" run 80 100 "$D/x.a" >/dev/null 2>&1 &
  pa=$!
  while [ ! -f "$D/x.a.started" ]; do sleep 0.05; done
  sleep 0.3
  "$OTHER" run 16 100 "$D/x.b" >/dev/null 2>&1
  wait $pa
  printf '%-9s ' "$label"
  "$T" expect "$D/x.a" "$D/x.b" b_first 2>/dev/null | sed -n 's/^B: //p'
}

echo "fair share between two jobs on 4 CPUs: A 80 x 100 ms, B 16 x 100 ms (ideal: B alone 0.4 s, A alone 2.0 s)"
i=0
while [ $i -lt "$N" ]; do
  trial "fair" RAYDIST_FAIR_SHARE=1
  trial "unfair" RAYDIST_FAIR_SHARE=0
  i=$((i + 1))
done
