#!/usr/bin/env bash
# The streams scenario again after the listener's backlog was raised to 4 096 (the build of main
# at that commit), --fronts 1 and --fronts 2, one run each, on this 2-core machine.
set -u
OUT=/work/main/perf/raw/fronts-2026-11-27
A=/work/main/target-perf/backlog
for f in 1 2; do
  echo "== $(date -u +%H:%M:%S) backlog-fronts$f streams --secs 20 --shards 1 --fronts $f"
  "$A/rampart-harness" streams --rampart "$A/rampart" --out "$OUT/backlog-fronts$f" --secs 20 --shards 1 --fronts $f 2>&1 | tail -3
done
echo "== done $(date -u +%H:%M:%S)"
