#!/usr/bin/env bash
# Issue #61: the shard's simulated round with §17's perpetuals and 100 000 derivatives alerts,
# two release builds alternating: 12440a3 (every mid copied each round) and this change (only the
# due contracts' mids read). Build each with `cargo build --release -p rampart-bench` and copy
# the binary to /tmp/bench-12440a3 and /tmp/bench-lazy-mids.
set -euo pipefail
uname -a
nproc
for round in 1 2 3 4 5 6 7; do
  for b in 12440a3 lazy-mids; do
    echo "== round $round, build $b"
    /tmp/bench-$b perp --runs 1 2>&1 | grep '(run 1)'
  done
done
