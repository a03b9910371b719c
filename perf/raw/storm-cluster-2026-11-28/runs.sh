#!/usr/bin/env bash
# Issue #59: the storm through the cluster's roles and through one process (SQLite), before
# (release build of 15085f4, #58's commit) and after (this change: set statements on
# PostgreSQL, whole-batch publish rounds, the commit stamp), alternating, same session, nothing
# else running. Binaries: /work/bin-58 and /work/bin-59 (each build's own harness: the stages'
# query reads the new `committed_ms` column only in the after build).
set -u
cd "$(dirname "$0")/../../.."
out=perf/raw/storm-cluster-2026-11-28
for n in 1 2 3; do
  for build in 58 59; do
    for backend in roles sqlite; do
      echo "== $backend $build $n $(date -u +%H:%M:%S)"
      /work/bin-$build/rampart-harness storm --backend $backend --rampart /work/bin-$build/rampart \
        --out $out/$backend-$build-$n 2>&1 | tail -3
    done
  done
done
echo "== done $(date -u +%H:%M:%S)"
# Then the after build with background stores planning each statement for its parameters
# (`plan_cache_mode = force_custom_plan`, /work/bin-59b), two cluster runs and one SQLite run.
for n in 1 2; do
  echo "== roles 59b $n $(date -u +%H:%M:%S)"
  /work/bin-59b/rampart-harness storm --backend roles --rampart /work/bin-59b/rampart --out $out/roles-59b-$n 2>&1 | tail -3
done
echo "== sqlite 59b 1 $(date -u +%H:%M:%S)"
/work/bin-59b/rampart-harness storm --backend sqlite --rampart /work/bin-59b/rampart --out $out/sqlite-59b-1 2>&1 | tail -3
# Then the build that plans only the statements joining a batch's arrays for their parameters
# (`SET LOCAL plan_cache_mode = force_custom_plan` in those transactions, /work/bin-59c).
for n in 1 2; do
  echo "== roles 59c $n $(date -u +%H:%M:%S)"
  /work/bin-59c/rampart-harness storm --backend roles --rampart /work/bin-59c/rampart --out $out/roles-59c-$n 2>&1 | tail -3
done
echo "== sqlite 59c 1 $(date -u +%H:%M:%S)"
/work/bin-59c/rampart-harness storm --backend sqlite --rampart /work/bin-59c/rampart --out $out/sqlite-59c-1 2>&1 | tail -3
