#!/usr/bin/env bash
# Issue #49's writer path in the storm: the single process on SQLite at the session's start
# (6667c79) and with #49's lifecycle (91c8d89's build: each batch reads its repeating alerts'
# latest firing times for the flood guard and stores them back, max_fires and the pause in the
# update), alternating, same session.
set -u
cd /work/main
out=perf/raw/storm-lifecycle-2026-11-27
for n in 1 2 3; do
  for build in session-start after; do
    echo "== sqlite $build $n $(date -u +%H:%M:%S)"
    ./target/release/rampart-harness storm --rampart /tmp/storm-bins3/$build-rampart --out $out/sqlite-$build-$n 2>&1 | tail -2
  done
done
echo "== done $(date -u +%H:%M:%S)"
