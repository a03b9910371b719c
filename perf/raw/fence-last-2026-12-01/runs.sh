#!/bin/bash
# `--backend roles` storms alternating 5668768 ("before": the fence read first in each writing
# transaction) and 5668768 plus the fence read last ("after"), release builds in
# /work/bin-final and /work/bin-fence; with LOGS set, PostgreSQL logs every statement of 50 ms or
# more (RAMPART_PG_EXTRA, read by the testkit's server) into $LOGS/<run>/ (a folder the postgres
# user can write: /tmp; the server wrote nothing under /work), and `renewals.py $LOGS` reads them.
# Usage: ./runs.sh 1 2 3 (`plain/`: a first three rounds without LOGS), LOGS=/tmp/fence-logs
# ORDER="after before" ./runs.sh 4 5 6 (after first in each pair)
set -u
OUT=${OUT:-$(dirname "$0")}
for round in "$@"; do
  for build in ${ORDER:-before after}; do
    case $build in before) BIN=/work/bin-final ;; after) BIN=/work/bin-fence ;; esac
    dir=$OUT/$build-$round
    rm -rf "$dir"
    if [ -n "${LOGS:-}" ]; then
      logs=$LOGS/$build-$round; rm -rf "$logs"; mkdir -p "$logs"; chmod 777 "$LOGS" "$logs"
      export RAMPART_PG_EXTRA="-c log_min_duration_statement=50 -c log_parameter_max_length=0 -c logging_collector=on -c log_directory=$logs -c log_filename=pg.log"
    fi
    "$BIN/rampart-harness" storm --backend roles --rampart "$BIN/rampart" --out "$dir" > "$dir.log" 2>&1
    echo "$build $round rc=$?"
  done
done
