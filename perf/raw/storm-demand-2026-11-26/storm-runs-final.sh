#!/usr/bin/env bash
# The cluster's storm before this stop (d2e280a's code) and after its last delivery change
# (1d5f7ba: shares by demand and the consumer's max_ack_pending), alternating.
set -u
cd /work/main
out=perf/raw/storm-demand-2026-11-26
for n in 3 4; do
  for build in before final; do
    echo "== roles $build $n $(date -u +%H:%M:%S)"
    ./target/release/rampart-harness storm --backend roles --rampart /tmp/storm-bins2/$build-rampart --out $out/roles-$build-$n 2>&1 | tail -2
  done
done
echo "== done $(date -u +%H:%M:%S)"
