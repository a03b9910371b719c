#!/usr/bin/env bash
# Issue #47's `scale` run: rampart given 1, 2, 4 and 8 cores (`taskset -c 0..n-1`, through the
# harness's `--rampart-cpus`; the http baseline's axum threads on the same cores), the harness,
# its load generator, the simulator and the receivers on the machine's other cores. For each n it
# runs the http reads (rampart with n/2 front threads and the rest shards, against axum with as
# many threads as rampart has fronts), the storm, streams (1 000 connections x 50 pairs) and the
# quiet probe, and writes each run's result files under OUT/<n>/, then the curve of the figures
# (`rampart-harness curve OUT`, also in OUT/curve.md).
#
# Needs only stripped release binaries (`rampart`, `rampart-harness`) in BIN_DIR, `taskset`
# (util-linux) and bash: no toolchain or package registry. On a 16-core machine it takes about
# 8 minutes (an estimate: n=1 took 2 min 23 s here at SCALE_SECS=2, see perf/README.md; the default is 1).
#
# Usage: perf/scripts/scale.sh BIN_DIR OUT_DIR [n ...]   (default n: 1 2 4 8; an n that would leave
# the harness fewer than n cores is skipped)
set -u
BIN=${1:?BIN_DIR}
OUT=${2:?OUT_DIR}
shift 2
CORES=${*:-1 2 4 8}
SECS=${SCALE_SECS:-1}
TOTAL=$(nproc)
mkdir -p "$OUT"
echo "scale: $(date -u +%FT%TZ) on $TOTAL cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), $("$BIN/rampart" --version)" | tee "$OUT/machine.txt"
for n in $CORES; do
  if [ $((2 * n)) -gt "$TOTAL" ]; then
    echo "== n=$n skipped: $TOTAL cores leave the harness fewer than $n"
    continue
  fi
  cpus="0-$((n - 1))"
  rest="$n-$((TOTAL - 1))"
  fronts=$((n / 2)); [ "$fronts" -ge 1 ] || fronts=1
  shards=$((n - fronts)); [ "$shards" -ge 1 ] || shards=1
  load=$((TOTAL - n)); [ "$load" -le 8 ] || load=8
  run() {
    local sc=$1; shift
    echo "== $(date -u +%T) n=$n ($cpus: $fronts fronts, $shards shards) $sc $*"
    taskset -c "$rest" timeout 240 "$BIN/rampart-harness" "$sc" --rampart "$BIN/rampart" --rampart-cpus "$cpus" \
      --out "$OUT/$n" --shards "$shards" --fronts "$fronts" --load-threads "$load" "$@" 2>&1 | tail -4
  }
  run http --secs "$SECS"
  run storm
  run streams --streams 1000 --secs $((SECS * 5))
  run quiet --alerts 20000 --secs $((SECS * 3))
done
echo "== $(date -u +%T) done; result files under $OUT/<n>/; the curve:"
"$BIN/rampart-harness" curve "$OUT"
