#!/usr/bin/env bash
# Issue #61: the memory of the perpetuals of ~2 000 pairs (commit 7bfe925), one run per process.
set -euo pipefail
cargo build --release -p rampart-bench
for i in 1 2 3; do ./target/release/rampart-bench perp-memory | tail -1; done
