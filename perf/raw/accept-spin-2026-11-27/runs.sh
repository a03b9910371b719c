#!/usr/bin/env bash
# Issue #47 on this 2-core machine, one release build (main + --accept/--shard-spin-us, before
# their commit): HTTP reads with --fronts 2 accepting on one shared socket vs a socket per
# thread (SO_REUSEPORT), alternating, three rounds; then the quiet probe with a shard spinning
# 200 us before it parks (the default) vs 1 s (busy-poll), alternating, three rounds. One shard.
set -u
OUT=/work/main/perf/raw/accept-spin-2026-11-27
A=/work/main/target-perf/accept
run() { # label env scenario args...
  local label=$1 env=$2 sc=$3; shift 3
  echo "== $(date -u +%H:%M:%S) $label $env $sc $*"
  env $env "$A/rampart-harness" "$sc" --rampart "$A/rampart" --out "$OUT/$label" "$@" 2>&1 | tail -14
}
for round in 1 2 3; do
  run shared RAMPART_ACCEPT=shared http --secs 3 --shards 1 --fronts 2
  run reuseport RAMPART_ACCEPT=reuseport http --secs 3 --shards 1 --fronts 2
done
for round in 1 2 3; do
  run spin200us RAMPART_SHARD_SPIN_US=200 quiet --alerts 20000 --secs 20 --shards 1 --fronts 1
  run spin1s RAMPART_SHARD_SPIN_US=1000000 quiet --alerts 20000 --secs 20 --shards 1 --fronts 1
done
echo "== done $(date -u +%H:%M:%S)"
