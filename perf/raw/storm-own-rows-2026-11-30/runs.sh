#!/usr/bin/env bash
# Issue #59: the storm through the cluster's roles, "before" (/work/bin-exp: the release build of
# 981784b, every market node's publisher publishing every pending row of the shared outbox) against
# "after" (/work/bin-after: each market node's publisher takes its own writer's rows at once and
# another partition's only after they waited 5 s), alternating, same session, nothing else
# running; then the single process (SQLite, untouched) for the same-session ratio.
set -u
cd "$(dirname "$0")/../../.."
out=perf/raw/storm-own-rows-2026-11-30
rounds=${ROUNDS:-3}
first=${FIRST:-1}
for n in $(seq "$first" $((first + rounds - 1))); do
  for build in before after; do
    bin=/work/bin-exp; [ "$build" = after ] && bin=/work/bin-after
    echo "== roles $build $n $(date -u +%H:%M:%S)"
    $bin/rampart-harness storm --backend roles --rampart $bin/rampart \
      --out $out/roles-$build-$n > $out/roles-$build-$n.log 2>&1
    tail -2 $out/roles-$build-$n.log
  done
done
[ -n "${NO_SQLITE:-}" ] && exit 0
echo "== sqlite after $(date -u +%H:%M:%S)"
/work/bin-after/rampart-harness storm --backend sqlite --rampart /work/bin-after/rampart \
  --out $out/sqlite-after-1 > $out/sqlite-after-1.log 2>&1
tail -2 $out/sqlite-after-1.log
echo "== done $(date -u +%H:%M:%S)"
