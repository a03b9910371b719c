#!/usr/bin/env bash
# Issue #59: the cluster's storm (`--backend roles`), alternating the market nodes' catch-up
# reading every recent active alert whole each second (before: b221d3a's product) and reading
# their ids first, whole only the ones whose command it missed (after). One harness for both
# (this commit's: stages by commit, its stage query after ANALYZE). Same session, nothing else
# running.
set -u
cd "$(dirname "$0")/../../.."
out=perf/raw/storm-catch-up-2026-11-30
harness=/work/bin-catch/rampart-harness
for n in $(seq ${FIRST:-1} $((${FIRST:-1} + ${ROUNDS:-3} - 1))); do
  for run in before after; do
    case $run in
      before) bin=/work/bin-past ;;
      after) bin=/work/bin-catch ;;
    esac
    echo "== $run $n $(date -u +%H:%M:%S)"
    $harness storm --backend roles --rampart $bin/rampart --out $out/$run-$n > $out/$run-$n.log 2>&1
    tail -1 $out/$run-$n.log
  done
done
echo "== done $(date -u +%H:%M:%S)"
