#!/usr/bin/env bash
# Issue #59: the storm through the cluster's roles with the publisher's marks waiting for the
# workers' row locks (release build of 8872c07, /work/bin-after) against marks that skip rows
# locked elsewhere (`FOR UPDATE SKIP LOCKED`, /work/bin-skip), alternating, same session,
# nothing else running; then the single process (SQLite, untouched) twice for the ratio.
set -u
cd "$(dirname "$0")/../../.."
out=perf/raw/storm-skiplocked-2026-11-29
for n in 1 2 3; do
  for build in after skip; do
    echo "== roles $build $n $(date -u +%H:%M:%S)"
    /work/bin-$build/rampart-harness storm --backend roles --rampart /work/bin-$build/rampart \
      --out $out/roles-$build-$n 2>&1 | tail -3
  done
done
for n in 1 2; do
  echo "== sqlite skip $n $(date -u +%H:%M:%S)"
  /work/bin-skip/rampart-harness storm --backend sqlite --rampart /work/bin-skip/rampart --out $out/sqlite-skip-$n 2>&1 | tail -3
done
echo "== done $(date -u +%H:%M:%S)"
