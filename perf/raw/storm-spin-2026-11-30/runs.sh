#!/usr/bin/env bash
# Issue #59: the storm through the cluster's roles with the shards' spin before they park at its
# default (200 µs) and off (RAMPART_SHARD_SPIN_US=0, inherited by every node the harness starts),
# alternating, same build (the release build of a12f0c2), same session, nothing else running.
set -u
cd "$(dirname "$0")/../../.."
out=perf/raw/storm-spin-2026-11-30
bin=/work/bin-after59
for n in $(seq ${FIRST:-1} $((${FIRST:-1} + ${ROUNDS:-2} - 1))); do
  for spin in 200 0; do
    echo "== roles spin $spin $n $(date -u +%H:%M:%S)"
    RAMPART_SHARD_SPIN_US=$spin $bin/rampart-harness storm --backend roles --rampart $bin/rampart \
      --out $out/roles-spin$spin-$n > $out/roles-spin$spin-$n.log 2>&1
    tail -1 $out/roles-spin$spin-$n.log
  done
done
echo "== done $(date -u +%H:%M:%S)"
