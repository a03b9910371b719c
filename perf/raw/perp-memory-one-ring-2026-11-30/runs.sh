#!/usr/bin/env bash
# Issue #61: the memory of a pair's perpetual before (84e40ff: the book's own 128, the snapshot's
# copy and a stream ring of 64) and after (one ring of 128), and the shard's simulated round, each
# build's release `rampart-bench` alternating, one run per process. BEFORE and AFTER are the two
# binaries (built with `cargo build --release -p rampart-bench --bin rampart-bench` at each commit).
set -euo pipefail
BEFORE=${BEFORE:-/tmp/bench-before}
AFTER=${AFTER:-/tmp/bench-after}
for i in 1 2 3; do
  echo "before $("$BEFORE" perp-memory | tail -1)"
  echo "after $("$AFTER" perp-memory | tail -1)"
done > memory.log
for i in 1 2 3; do
  "$BEFORE" perp --runs 1 2>&1 | grep "^| sim" | sed "s/^/before $i /"
  "$AFTER" perp --runs 1 2>&1 | grep "^| sim" | sed "s/^/after $i /"
done > round.log
