#!/bin/bash
# The network-namespace fault test, one round each, 1 000 simulated pairs (about 500 per partition), seeds 2 and 3.
cd /work/main
for seed in 2 3; do
  echo "== seed $seed $(date -u +%FT%TZ)"
  RAMPART_FAULT_SEED=$seed cargo test -q -p rampart-tests --test faults -- --nocapture 2>&1 | grep -vE "^\s*$" | tail -22
done
