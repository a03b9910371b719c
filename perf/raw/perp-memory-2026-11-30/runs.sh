#!/usr/bin/env bash
# Issue #61: the memory of the perpetuals of ~2 000 pairs (commit 347397f: 32-byte window slots
# and liquidations), one run per process; the same command as perp-memory-2026-11-29.
set -euo pipefail
cargo build --release -p rampart-bench
for i in 1 2 3; do ./target/release/rampart-bench perp-memory | tail -1; done
