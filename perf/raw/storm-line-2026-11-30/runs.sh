#!/usr/bin/env bash
# Issue #59: the cluster's storm (`--backend roles`), alternating the delivery workers' waiting
# line scanned whole at every attempt's end (before: 587aaa1's product) and queued by slot, each
# slot's oldest firing looked at, a slot left at its first refusal (after). One harness for both.
# Same session, nothing else running.
set -u
cd "$(dirname "$0")/../../.."
out=perf/raw/storm-line-2026-11-30
harness=/work/bin-line/rampart-harness
for n in $(seq ${FIRST:-1} $((${FIRST:-1} + ${ROUNDS:-3} - 1))); do
  for run in before after; do
    case $run in
      before) bin=/work/bin-workers ;;
      after) bin=/work/bin-line ;;
    esac
    echo "== $run $n $(date -u +%H:%M:%S)"
    $harness storm --backend ${BACKEND:-roles} --rampart $bin/rampart --out $out/$run-$n > $out/$run-$n.log 2>&1
    tail -1 $out/$run-$n.log
  done
done
echo "== done $(date -u +%H:%M:%S)"
