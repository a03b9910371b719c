#!/usr/bin/env bash
# Issue #59, second step: "after2" (the worker change of runs.sh, and the publisher's marks
# committed on a second connection while the next round is read and published) against "after"
# (the worker change alone), alternating, same session, nothing else running.
set -u
cd "$(dirname "$0")/../../.."
out=perf/raw/storm-worker-storage-2026-11-29
for n in 1 2; do
  for build in after2 after; do
    [ "$build" = after ] && [ "$n" = 2 ] && continue
    echo "== roles $build r2-$n $(date -u +%H:%M:%S)"
    d=$out/roles-$build-r2-$n
    /work/bin-$build/rampart-harness storm --backend roles --rampart /work/bin-$build/rampart --out $d > $d.log 2>&1
    tail -1 $d.log
  done
done
echo "== sqlite after2 $(date -u +%H:%M:%S)"
/work/bin-after2/rampart-harness storm --backend sqlite --rampart /work/bin-after2/rampart --out $out/sqlite-after2-1 > $out/sqlite-after2-1.log 2>&1
echo "== done $(date -u +%H:%M:%S)"
