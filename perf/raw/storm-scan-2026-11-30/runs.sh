#!/usr/bin/env bash
# Issue #59: one process's storm, alternating: the build before (b221d3a's code: a scan reads the
# held rows whole and skips them) and after (the held rows' ids read first, only the rows to
# start read whole), the latter at the default width and at `webhooks.in_flight_max` 512 and
# 1024 (set through the environment). Same session, nothing else running.
set -u
cd "$(dirname "$0")/../../.."
out=perf/raw/storm-scan-2026-11-30
for n in $(seq ${FIRST:-1} $((${FIRST:-1} + ${ROUNDS:-4} - 1))); do
  for run in before after after512 after1024; do
    case $run in
      before) bin=/work/bin-past; width= ;;
      after) bin=/work/bin-scan; width= ;;
      after512) bin=/work/bin-scan; width=512 ;;
      after1024) bin=/work/bin-scan; width=1024 ;;
    esac
    echo "== $run $n $(date -u +%H:%M:%S)"
    ${width:+env RAMPART_WEBHOOKS__IN_FLIGHT_MAX=$width} $bin/rampart-harness storm --backend sqlite \
      --rampart $bin/rampart --out $out/$run-$n > $out/$run-$n.log 2>&1
    tail -1 $out/$run-$n.log
  done
done
echo "== done $(date -u +%H:%M:%S)"
