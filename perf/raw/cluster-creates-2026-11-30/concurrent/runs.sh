#!/usr/bin/env bash
# Issue #59: creates from four concurrent clients (the harness's loader, `--alerts 10000`: price
# alerts far from the market on many pairs, made before the storm) through the cluster's roles
# and through one process on SQLite, alternating, two rounds; release build of a12f0c2.
set -u
cd "$(dirname "$0")/../../../.."
out=perf/raw/cluster-creates-2026-11-30/concurrent
bin=/work/bin-after59
for n in 1 2; do
  for backend in roles sqlite; do
    echo "== $backend $n $(date -u +%H:%M:%S)"
    $bin/rampart-harness storm --backend $backend --alerts 10000 --rampart $bin/rampart \
      --out $out/$backend-$n > $out/$backend-$n.log 2>&1
    tail -1 $out/$backend-$n.log
  done
done
echo "== done $(date -u +%H:%M:%S)"
