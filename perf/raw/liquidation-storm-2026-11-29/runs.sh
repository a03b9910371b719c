#!/usr/bin/env bash
# A market-wide liquidation storm on the live feed (issue #61): `rampart-harness liquidations`
# (500 pairs, `rampart sim-venue` and `serve --feed live`, one shard; 100 `*` order alerts per
# venue on Binance, Bybit and OKX; three rounds 1.3 s apart of one liquidation on every perpetual
# of each venue). Run from the repository root after
# `cargo build --release -p rampart -p rampart-bench`. Run 1 predates the gap breakdown.
set -euo pipefail
out=perf/raw/liquidation-storm-2026-11-29
for i in 1 2 3; do
  target/release/rampart-harness liquidations --out "$out/run-$i" > "$out/run-$i.log" 2>&1
done
