#!/usr/bin/env bash
# The CPU a live rampart (one shard, one front, four venues of 500 simulated pairs from
# `rampart sim-venue`) uses over 20 s with nothing asked of it, by --shard-spin-us: utime+stime
# of the process from /proc, in CPU seconds per second. Same release build as runs.sh.
set -u
A=/work/main/target-perf/accept
W=$(mktemp -d)
"$A/rampart" sim-venue --listen 127.0.0.1:0 --sim-pairs 500 > "$W/sim.out" 2>/dev/null &
SIM=$!
sleep 2
URL=$(head -1 "$W/sim.out" | sed 's/^sim-venue listening on //')
WS=${URL/http:/ws:}
: > "$W/cfg.toml"
for v in binance bybit okx bitget; do
  printf '[venues.%s]\nrest = "%s"\nws = "%s"\npairs_per_connection = 100\nrest_weight_per_s = 100000\nconnects_per_s = 100\nrefresh_s = 10\n' "$v" "$URL" "$WS" >> "$W/cfg.toml"
done
ticks() { awk '{print $14 + $15}' /proc/$1/stat; }
for spin in 200 1000000 200 1000000; do
  rm -rf "$W/data"
  "$A/rampart" serve --feed live --config "$W/cfg.toml" --data-dir "$W/data" --listen 127.0.0.1:0 --shards 1 --fronts 1 --shard-spin-us $spin > "$W/serve.out" 2>/dev/null &
  P=$!
  sleep 25
  a=$(ticks $P); sleep 20; b=$(ticks $P)
  echo "shard-spin-us $spin: $(echo "scale=2; ($b - $a) / $(getconf CLK_TCK) / 20" | bc) CPU s/s (rampart process, 20 s after 25 s of start)"
  kill $P; wait $P 2>/dev/null
done
kill $SIM
