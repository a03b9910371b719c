#!/usr/bin/env bash
# Issue #47 on this 2-core machine: one release build (main after the front threads), HTTP reads
# with --fronts 1 and --fronts 2 (one shard each), alternating, two rounds; then the streams
# scenario once with each. Nothing else running.
set -u
OUT=/work/main/perf/raw/fronts-2026-11-27
A=/work/main/target-perf/fronts
run() { # label scenario args...
  local label=$1 sc=$2; shift 2
  echo "== $(date -u +%H:%M:%S) $label $sc $*"
  "$A/rampart-harness" "$sc" --rampart "$A/rampart" --out "$OUT/$label" "$@" 2>&1 | tail -12
}
for round in 1 2; do
  run fronts1 http --secs 10 --shards 1 --fronts 1
  run fronts2 http --secs 10 --shards 1 --fronts 2
done
run fronts1 streams --secs 20 --shards 1 --fronts 1
run fronts2 streams --secs 20 --shards 1 --fronts 2
echo "== done $(date -u +%H:%M:%S)"
