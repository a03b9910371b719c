#!/usr/bin/env bash
# Issue #59: the storm's stages with "pulled" (attempts.pulled_ms: a worker's fetch of its
# message, one process's read of its due row), both backends alternating, same build (the
# release build of this commit's code), same session, nothing else running.
set -u
cd "$(dirname "$0")/../../.."
out=perf/raw/storm-pulled-2026-11-30
bin=/work/bin-pulled
for n in $(seq ${FIRST:-1} $((${FIRST:-1} + ${ROUNDS:-2} - 1))); do
  for backend in roles sqlite; do
    echo "== $backend $n $(date -u +%H:%M:%S)"
    $bin/rampart-harness storm --backend $backend --rampart $bin/rampart \
      --out $out/$backend-$n > $out/$backend-$n.log 2>&1
    tail -1 $out/$backend-$n.log
  done
done
echo "== done $(date -u +%H:%M:%S)"
