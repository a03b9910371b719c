#!/usr/bin/env bash
# Issue #61: the shard's simulated round with the perpetuals after the liquidation feed (the
# stream's ring) joined the tick path. Release build of 6ac8804 (the shard's code as main's).
set -euo pipefail
cargo build --release -p rampart-bench
./target/release/rampart-bench perp --runs 7 | grep '^| sim' > runs.log
