#!/usr/bin/env bash
# Issue #61: the shard's simulated round with the perpetuals, before (81edb5a: 40-byte window
# slots and liquidations) and after (347397f: 32-byte slots, the ring's newest start, the USD
# computed), alternating seven rounds, one run per process. Release builds:
#   old: git worktree add /work/old-wt 81edb5a && (cd /work/old-wt && CARGO_TARGET_DIR=$PWD/../main/target/old-bench cargo build --release -p rampart-bench)
#   new: cargo build --release -p rampart-bench (at 347397f)
set -euo pipefail
for i in 1 2 3 4 5 6 7; do
  echo "== round $i old"; target/old-bench/release/rampart-bench perp --runs 1 | grep '^| sim'
  echo "== round $i new"; target/release/rampart-bench perp --runs 1 | grep '^| sim'
done
