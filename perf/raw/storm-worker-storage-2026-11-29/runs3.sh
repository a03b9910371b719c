#!/usr/bin/env bash
# Issue #59, third step: "after3" (the worker change of runs.sh, and each publishing round
# claimed with FOR UPDATE SKIP LOCKED, so the two market nodes' publishers no longer both hand
# over every row) against "after" (the worker change alone), alternating, same session, nothing
# else running. (runs2.sh's "after2", the marks overlapped with the next round, was not kept.)
set -u
cd "$(dirname "$0")/../../.."
out=perf/raw/storm-worker-storage-2026-11-29
for n in 1 2; do
  for build in after3 after; do
    echo "== roles $build r3-$n $(date -u +%H:%M:%S)"
    d=$out/roles-$build-r3-$n
    /work/bin-$build/rampart-harness storm --backend roles --rampart /work/bin-$build/rampart --out $d > $d.log 2>&1
    tail -1 $d.log
  done
done
echo "== sqlite after3 $(date -u +%H:%M:%S)"
/work/bin-after3/rampart-harness storm --backend sqlite --rampart /work/bin-after3/rampart --out $out/sqlite-after3-1 > $out/sqlite-after3-1.log 2>&1
echo "== done $(date -u +%H:%M:%S)"
