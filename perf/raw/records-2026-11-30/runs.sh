#!/bin/sh
# Issue #59: a worker's record of 256 outcomes, before (d2366bf's store: failures one by one)
# and after (failures in one statement on PostgreSQL), five rounds alternating. Both binaries
# are release builds of the same bench code (`bench/src/records.rs`), the store's outbox.rs at
# d2366bf for "before" and at this commit for "after":
#   cargo build --release -p rampart-bench --bin rampart-bench   (each tree; copied to BIN/{before,after})
# Then summary.txt from the rows (p50 per batch, outcomes per second).
BIN=${BIN:-/work/bin-rec}
for i in 1 2 3 4 5; do
  "$BIN/before/rampart-bench" records --runs 1 > before-$i.txt 2> before-$i.err
  "$BIN/after/rampart-bench" records --runs 1 > after-$i.txt 2> after-$i.err
done
