#!/bin/bash
# Storms alternating f4b0a21 (before) and wip-create-below (after), release builds in
# /work/bin-create/{before,after}; three rounds, each backend. Run twice: `./runs.sh 1 2 3`
# (before first in each pair), then `ORDER="after before" ./runs.sh 4 5 6` (after first).
set -u
OUT=${OUT:-$(dirname "$0")}
ORDER=${ORDER:-before after}
for round in "$@"; do
  for backend in sqlite roles; do
    for build in $ORDER; do
      BIN=/work/bin-create/$build
      dir=$OUT/$build-$backend-$round
      rm -rf "$dir"
      "$BIN/rampart-harness" storm --backend "$backend" --rampart "$BIN/rampart" --out "$dir" > "$dir.log" 2>&1
      echo "$build $backend $round rc=$?"
    done
  done
done
