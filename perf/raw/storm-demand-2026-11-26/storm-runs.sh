#!/usr/bin/env bash
# Same-run comparison for issue #36's shares by demand: the storm before (d2e280a; its product
# code is b17a3a0's, binary /tmp/storm-bins/after-rampart of the last comparison) and after
# (this change), alternating.
set -u
cd /work/main
out=perf/raw/storm-demand-2026-11-26
mkdir -p $out
for n in 1 2 3; do
  for build in before after; do
    echo "== sqlite $build $n $(date -u +%H:%M:%S)"
    ./target/release/rampart-harness storm --rampart /tmp/storm-bins2/$build-rampart --out $out/sqlite-$build-$n 2>&1 | tail -2
  done
done
for n in 1 2; do
  for build in before after; do
    echo "== roles $build $n $(date -u +%H:%M:%S)"
    ./target/release/rampart-harness storm --backend roles --rampart /tmp/storm-bins2/$build-rampart --out $out/roles-$build-$n 2>&1 | tail -2
  done
done
echo "== done $(date -u +%H:%M:%S)"
