#!/usr/bin/env bash
# Issue #61: the market-wide liquidation storm (`rampart-harness liquidations`), one round of
# `POST /sim/liquidation {"symbol":"*"}` per venue (the issue's scenario) against three rounds
# 1.3 s apart (the 2026-11-29 runs'), alternating; the bodies' spacing as they reached the
# receivers and as the writer committed them (`outbox.committed_ms`). Release builds of 9a7df8d
# (rampart) and of this commit's harness in /work/bin-after; nothing else running. Run 4 (FIRST=4
# LAST=4) was taken with the harness that also counts the bodies found in the outbox.
set -u
cd "$(dirname "$0")/../../.."
out=perf/raw/liquidation-storm-2026-11-30
for n in $(seq "${FIRST:-1}" "${LAST:-3}"); do
  for rounds in 1 3; do
    echo "== rounds $rounds run $n $(date -u +%H:%M:%S)"
    /work/bin-after/rampart-harness liquidations --rounds $rounds --rampart /work/bin-after/rampart \
      --out $out/r$rounds-$n > $out/r$rounds-$n.log 2>&1
    tail -1 $out/r$rounds-$n.log
  done
done
echo "== done $(date -u +%H:%M:%S)"
