#!/usr/bin/env bash
# The spot path with the venues' perpetual feeds on against off (issue #61): `rampart-harness
# quiet` (500 pairs, four venues, 100 000 price alerts, one shard, probes every 200 ms), the
# perpetual feeds turned off through the environment (RAMPART_DERIVATIVES__ENABLED=false),
# alternating on/off so both see the same machine state. Run from the repository root after
# `cargo build --release -p rampart -p rampart-bench`.
set -euo pipefail
out=perf/raw/perp-live-ingest-2026-11-29
for i in 1 2 3; do
  for mode in on off; do
    if [ "$mode" = off ]; then export RAMPART_DERIVATIVES__ENABLED=false; else unset RAMPART_DERIVATIVES__ENABLED; fi
    target/release/rampart-harness quiet --secs 20 --out "$out/$mode-$i" > "$out/$mode-$i.log" 2>&1
    echo "$mode $i done"
  done
done
unset RAMPART_DERIVATIVES__ENABLED
