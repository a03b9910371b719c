#!/usr/bin/env bash
# Issue #59: the storm through the cluster's roles with the market nodes' writer committing at
# most N firings a transaction (N = 4096, today's bound, against smaller bounds), alternating,
# same session, nothing else running; then the single process (SQLite) for the same-session
# ratio. One release build (/work/bin-exp: main at 981784b plus a temporary read of the bound
# from RAMPART_EXP_WRITER_BATCH, inherited by the harness's market nodes).
set -u
cd "$(dirname "$0")/../../.."
out=perf/raw/storm-writer-batch-2026-11-30
rounds=${ROUNDS:-2}
sizes=${SIZES:-"4096 512 1024"}
for n in $(seq 1 "$rounds"); do
  for size in $sizes; do
    echo "== roles batch $size round $n $(date -u +%H:%M:%S)"
    RAMPART_EXP_WRITER_BATCH=$size /work/bin-exp/rampart-harness storm --backend roles \
      --rampart /work/bin-exp/rampart --out $out/roles-$size-$n > $out/roles-$size-$n.log 2>&1
    tail -2 $out/roles-$size-$n.log
  done
done
for n in $(seq 1 "${SQLITE_ROUNDS:-1}"); do
  echo "== sqlite $n $(date -u +%H:%M:%S)"
  /work/bin-exp/rampart-harness storm --backend sqlite --rampart /work/bin-exp/rampart \
    --out $out/sqlite-$n > $out/sqlite-$n.log 2>&1
  tail -2 $out/sqlite-$n.log
done
echo "== done $(date -u +%H:%M:%S)"
