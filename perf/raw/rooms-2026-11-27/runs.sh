#!/usr/bin/env bash
# Issue #46's same-run comparison: the release builds of 24d521d (before #46's restructuring) and of
# main after it, alternating, on this 2-core machine with nothing else running.
set -u
OUT=/work/main/perf/raw/rooms-2026-11-27
B=/tmp/target-before/release
A=/work/main/target/release
mkdir -p "$OUT"
run() { # label dir scenario args...
  local label=$1 dir=$2 sc=$3; shift 3
  echo "== $(date -u +%H:%M:%S) $label $sc $*"
  "$dir/rampart-harness" "$sc" --rampart "$dir/rampart" --out "$OUT/$label" "$@" 2>&1 | tail -25
}
for round in 1 2; do
  run before $B http --secs 20
  run after $A http --secs 20
  run before $B storm
  run after $A storm
done
run before $B quiet --alerts 20000 --secs 20
run after $A quiet --alerts 20000 --secs 20
echo "== done $(date -u +%H:%M:%S)"
