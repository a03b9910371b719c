#!/usr/bin/env bash
# Issue #59: is the single process's storm slower than when the issue was written (17 800/s at
# b6df440) because of the code or because of this VM? Release builds of b6df440 (/tmp/bin-old)
# and of 5a5b448 (/tmp/bin-head, main at the start of the session), each with its own
# rampart-harness, alternating, one session, nothing else running.
set -u
for n in 1 2; do for b in old head; do
  /tmp/bin-$b/rampart-harness storm --backend sqlite --rampart /tmp/bin-$b/rampart --out /tmp/st/$b-$n 2>&1 | tail -2
done; done
