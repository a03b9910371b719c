#!/usr/bin/env bash
# Issue #47, item 3: the storm before (a8f0d93's tree: delivery's storage work on its attempts'
# thread) and after (the storage round on a blocking thread), alternating, three rounds, on this
# 2-core machine with nothing else running.
set -u
OUT=/work/main/perf/raw/delivery-offload-2026-11-27
B=/work/main/target-perf/backlog
A=/work/main/target-perf/offload
for round in 1 2 3; do
  for side in before after; do
    dir=$B; [ $side = after ] && dir=$A
    echo "== $(date -u +%H:%M:%S) $side storm"
    "$dir/rampart-harness" storm --rampart "$dir/rampart" --out "$OUT/$side" 2>&1 | grep -E "Deliveries|tick → webhook|Correctness"
  done
done
echo "== done $(date -u +%H:%M:%S)"
