#!/bin/bash
# The hand-over after issue #50's claim rule: five runs on the simulated market, three on the live-format feed, 500 pairs.
cd /work/main
for i in 1 2 3 4 5; do
  echo "== sim run $i $(date -u +%FT%TZ)"
  RAMPART_FAILOVER_SIM_PAIRS=500 cargo test -q -p rampart-tests --test cluster_failover a_standby_takes -- --nocapture 2>&1 | grep -E "served|killed at|standby:|test result|panicked"
done
for i in 1 2 3; do
  echo "== live run $i $(date -u +%FT%TZ)"
  RAMPART_FAILOVER_LIVE_PAIRS=500 cargo test -q -p rampart-tests --test cluster_failover a_standby_takes -- --nocapture 2>&1 | grep -E "served|killed at|standby:|test result|panicked"
done
echo "== cut-off $(date -u +%FT%TZ)"
cargo test -q -p rampart-tests --test cluster_failover an_owner_cut 2>&1 | grep -E "test result|panicked"
