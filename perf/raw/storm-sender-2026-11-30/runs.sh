#!/usr/bin/env bash
# Issue #59: the single process's storm, its sender before and after this change, alternating,
# same session, nothing else running. "before": the release build with the harness's "pulled"
# stage and the old sender (one storage round at a time, the scan's share of one account taken
# by its rows in flight); "after": the record and the scan on two connections at once, the scan
# reading past the rows the sender holds.
set -u
cd "$(dirname "$0")/../../.."
out=perf/raw/storm-sender-2026-11-30
for n in $(seq ${FIRST:-1} $((${FIRST:-1} + ${ROUNDS:-4} - 1))); do
  for build in before after; do
    bin=/work/bin-past; [ $build = before ] && bin=/work/bin-pulled
    echo "== sqlite $build $n $(date -u +%H:%M:%S)"
    $bin/rampart-harness storm --backend sqlite --rampart $bin/rampart \
      --out $out/sqlite-$build-$n > $out/sqlite-$build-$n.log 2>&1
    tail -1 $out/sqlite-$build-$n.log
  done
done
echo "== done $(date -u +%H:%M:%S)"
