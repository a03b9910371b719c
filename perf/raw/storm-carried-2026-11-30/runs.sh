#!/usr/bin/env bash
# Issue #59, docs/design/cluster.md step (a): the storm through the cluster's roles, "before"
# (/work/bin-before59: the release build of 6f14a6f, a worker reads every firing's outbox row)
# against "after" (/work/bin-after59: a market node's publisher sends its own writer's rows with
# the whole delivery in the message, and a worker sends a first delivery from it without reading
# the row), alternating, same session, nothing else running; then the single process (SQLite,
# whose path the change does not touch) for the same-session ratio.
set -u
cd "$(dirname "$0")/../../.."
out=perf/raw/storm-carried-2026-11-30
rounds=${ROUNDS:-3}
first=${FIRST:-1}
for n in $(seq "$first" $((first + rounds - 1))); do
  for build in before after; do
    bin=/work/bin-before59; [ "$build" = after ] && bin=/work/bin-after59
    echo "== roles $build $n $(date -u +%H:%M:%S)"
    $bin/rampart-harness storm --backend roles --rampart $bin/rampart \
      --out $out/roles-$build-$n > $out/roles-$build-$n.log 2>&1
    tail -2 $out/roles-$build-$n.log
  done
done
[ -n "${NO_SQLITE:-}" ] && exit 0
echo "== sqlite after $(date -u +%H:%M:%S)"
/work/bin-after59/rampart-harness storm --backend sqlite --rampart /work/bin-after59/rampart \
  --out $out/sqlite-after-1 > $out/sqlite-after-1.log 2>&1
tail -2 $out/sqlite-after-1.log
echo "== done $(date -u +%H:%M:%S)"
