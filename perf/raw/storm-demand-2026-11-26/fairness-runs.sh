#!/usr/bin/env bash
# Issue #36's black-box fairness tests, ten runs each (the tests print every latency).
cd /work/main
for n in $(seq 1 10); do
  echo "== run $n $(date -u +%H:%M:%S)"
  cargo test -q -p rampart-tests --test delivery_hardening -- --nocapture --test-threads 1 \
    other_accounts_dead_receivers three_accounts_hanging 2>&1 | grep -E "latencies|test result|panicked|FAILED|hanging attempts|then accounts"
done
echo "== done $(date -u +%H:%M:%S)"
