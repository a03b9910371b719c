#!/usr/bin/env bash
# Issue #46's last step (the front's handlers as resources, 1099997) against the release build
# before it (fc673b8), HTTP reads, alternating, on this 2-core machine with nothing else running.
set -u
OUT=/work/main/perf/raw/front-resources-2026-11-27
B=/work/main/target-perf/before   # fc673b8
A=/work/main/target-perf/after46  # 1099997
run() { # label dir scenario args...
  local label=$1 dir=$2 sc=$3; shift 3
  echo "== $(date -u +%H:%M:%S) $label $sc $*"
  "$dir/rampart-harness" "$sc" --rampart "$dir/rampart" --out "$OUT/$label" "$@" 2>&1 | tail -12
}
for round in 1 2; do
  run before $B http --secs 10
  run after $A http --secs 10
done
echo "== done $(date -u +%H:%M:%S)"
