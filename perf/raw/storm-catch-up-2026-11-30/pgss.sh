#!/bin/bash
# One `--backend roles` storm with pg_stat_statements loaded (RAMPART_PG_EXTRA, read by the
# testkit's PostgreSQL), its 40 statements with the most time copied every second while the
# harness runs (the last copy, taken 0-1 s before the harness stops PostgreSQL, is kept).
# Usage: pgss.sh <bin dir of rampart> <out file>; the harness is /work/bin-catch's.
set -u
bin=$1; keep=$2
export RAMPART_PG_EXTRA="-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all -c pg_stat_statements.max=2000"
dir=$(mktemp -d)
/work/bin-catch/rampart-harness storm --backend roles --rampart $bin/rampart --out $dir/roles > $dir/log 2>&1 &
h=$!
made=
while kill -0 $h 2>/dev/null; do
  port=$(ss -ltnp 2>/dev/null | grep postgres | grep -o '127.0.0.1:[0-9]*' | head -1 | cut -d: -f2)
  if [ -n "$port" ]; then
    [ -z "$made" ] && psql -h 127.0.0.1 -p $port -U postgres -d postgres -qc "create extension if not exists pg_stat_statements" 2>/dev/null && made=1
    psql -h 127.0.0.1 -p $port -U postgres -d postgres -At -F $'\t' -c "select calls, total_exec_time::numeric(10,1), rows, left(regexp_replace(query,'\s+',' ','g'),160) from pg_stat_statements order by total_exec_time desc limit 40" > $dir/now 2>/dev/null && [ -s $dir/now ] && cp $dir/now $keep
  fi
  sleep 1
done
tail -4 $dir/log | head -2
