#!/usr/bin/env bash
# Issue #50: the storm through the cluster's delivery role before (91c8d89~1's worker: fetch only
# as many as free slots, lines of 1 024) and after (91c8d89: read on past held-back firings, 256
# at a time, lines of 8 192), alternating, same session, one account (nothing held back by fairness).
set -u
cd /work/main
out=perf/raw/fetch-behind-2026-11-27
for n in 1 2 3; do
  for build in before after; do
    echo "== roles $build $n $(date -u +%H:%M:%S)"
    ./target/release/rampart-harness storm --backend roles --rampart /tmp/storm-bins3/$build-rampart --out $out/roles-$build-$n 2>&1 | tail -2
  done
done
echo "== done $(date -u +%H:%M:%S)"
