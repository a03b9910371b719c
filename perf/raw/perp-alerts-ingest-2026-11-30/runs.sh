#!/usr/bin/env bash
# Issue #61: spot ingest with the perpetual feeds on and 100 000 derivatives alerts loaded (1 000
# of them `*`, `rampart-harness quiet --perp-alerts 100000`) against without them (the perpetual
# feeds off, RAMPART_DERIVATIVES__ENABLED=false, no derivatives alert), no price alert loaded in
# either, alternating, three rounds. Release builds of 9a7df8d (rampart) and of this commit's
# harness in /work/bin-after; this 2-vCPU VM, nothing else running.
set -u
cd "$(dirname "$0")/../../.."
out=perf/raw/perp-alerts-ingest-2026-11-30
for n in $(seq 1 "${ROUNDS:-3}"); do
  echo "== off $n $(date -u +%H:%M:%S)"
  RAMPART_DERIVATIVES__ENABLED=false /work/bin-after/rampart-harness quiet --secs 20 --alerts 0 \
    --rampart /work/bin-after/rampart --out $out/off-$n > $out/off-$n.log 2>&1
  tail -1 $out/off-$n.log
  echo "== on $n $(date -u +%H:%M:%S)"
  /work/bin-after/rampart-harness quiet --secs 20 --alerts 0 --perp-alerts 100000 \
    --rampart /work/bin-after/rampart --out $out/on-$n > $out/on-$n.log 2>&1
  tail -1 $out/on-$n.log
done
echo "== done $(date -u +%H:%M:%S)"
