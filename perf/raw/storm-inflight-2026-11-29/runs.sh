#!/usr/bin/env bash
# Issue #59: the storm through the cluster's roles before (release build of cbfaa8e: the
# workers' 64 attempts in flight, their outbox read on a generic plan) and after (256 in
# flight, the read and the row locks planned for their arrays), alternating, same session,
# nothing else running; then the single process (SQLite, unchanged by this change) twice for the
# same-session ratio. Binaries: /work/bin-before and /work/bin-after.
set -u
cd "$(dirname "$0")/../../.."
out=perf/raw/storm-inflight-2026-11-29
for n in 1 2 3; do
  for build in before after; do
    echo "== roles $build $n $(date -u +%H:%M:%S)"
    /work/bin-$build/rampart-harness storm --backend roles --rampart /work/bin-$build/rampart \
      --out $out/roles-$build-$n 2>&1 | tail -3
  done
done
for n in 1 2; do
  echo "== sqlite after $n $(date -u +%H:%M:%S)"
  /work/bin-after/rampart-harness storm --backend sqlite --rampart /work/bin-after/rampart --out $out/sqlite-after-$n 2>&1 | tail -3
done
echo "== done $(date -u +%H:%M:%S)"
