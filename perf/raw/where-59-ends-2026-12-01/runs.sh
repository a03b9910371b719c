#!/bin/bash
# The storm on main (5668768), release build in /work/bin-final, one process and the cluster's
# roles alternating, rounds given as arguments: `./runs.sh 1 2 3`.
set -u
OUT=${OUT:-$(dirname "$0")}
BIN=${BIN:-/work/bin-final}
for round in "$@"; do
  for backend in sqlite roles; do
    dir=$OUT/$backend-$round
    rm -rf "$dir"
    "$BIN/rampart-harness" storm --backend "$backend" --rampart "$BIN/rampart" --out "$dir" > "$dir.log" 2>&1
    echo "$backend $round rc=$?"
  done
done
