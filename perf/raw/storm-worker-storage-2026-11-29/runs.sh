#!/usr/bin/env bash
# Issue #59: the storm through the cluster's roles, "before" (release build of a72625e: each
# `rampart deliver` worker thread reads its batches and records its outcomes on its own event
# loop, blocking its attempts and its NATS connection meanwhile) against "after" (this change:
# both on blocking threads, through two connections per worker thread), alternating, same
# session, nothing else running; then the single process (SQLite, untouched by this change) for
# the same-session ratio. Binaries: /work/bin-before and /work/bin-after.
set -u
cd "$(dirname "$0")/../../.."
out=perf/raw/storm-worker-storage-2026-11-29
rounds=${ROUNDS:-3}
for n in $(seq 1 "$rounds"); do
  for build in before after; do
    echo "== roles $build $n $(date -u +%H:%M:%S)"
    /work/bin-$build/rampart-harness storm --backend roles --rampart /work/bin-$build/rampart \
      --out $out/roles-$build-$n > $out/roles-$build-$n.log 2>&1
    tail -3 $out/roles-$build-$n.log
  done
done
for n in 1 2; do
  echo "== sqlite after $n $(date -u +%H:%M:%S)"
  /work/bin-after/rampart-harness storm --backend sqlite --rampart /work/bin-after/rampart \
    --out $out/sqlite-after-$n > $out/sqlite-after-$n.log 2>&1
  tail -3 $out/sqlite-after-$n.log
done
echo "== done $(date -u +%H:%M:%S)"
