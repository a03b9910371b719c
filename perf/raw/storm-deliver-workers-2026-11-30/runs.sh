#!/usr/bin/env bash
# Issue #59: the cluster's storm (`--backend roles`) with each of the two `rampart deliver`
# processes running 1, 2 (the documented topology) and 4 worker threads (`--deliver-workers`),
# alternating; the release build of this commit's harness and product. Does the workers' pace
# follow their threads (each thread's 256 firings in hand) or the machine's two cores?
set -u
cd "$(dirname "$0")/../../.."
out=perf/raw/storm-deliver-workers-2026-11-30
bin=/work/bin-workers
for n in $(seq ${FIRST:-1} $((${FIRST:-1} + ${ROUNDS:-3} - 1))); do
  for w in 1 2 4; do
    echo "== w$w $n $(date -u +%H:%M:%S)"
    $bin/rampart-harness storm --backend roles --deliver-workers $w --rampart $bin/rampart \
      --out $out/w$w-$n > $out/w$w-$n.log 2>&1
    tail -1 $out/w$w-$n.log
  done
done
echo "== done $(date -u +%H:%M:%S)"
