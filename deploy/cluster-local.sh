#!/usr/bin/env bash
# Runs a rampart cluster on one host, from Debian's postgresql and nats-server
# (tools/postgres-deps.sh and tools/nats-deps.sh install them): a PostgreSQL server and a NATS
# server with JetStream in a fresh directory, two market nodes (`serve --role market`,
# partitions 0/2 and 1/2), two api nodes (`serve --role api --partitions 2`) and two
# `rampart deliver` processes. Ctrl-C (or SIGTERM to the script) stops everything and removes the directory.
#
# Usage: deploy/cluster-local.sh [path/to/rampart]   (default: target/release/rampart)
# Ports: API 127.0.0.1:8080 and 8081; market nodes' /healthz and /metrics 8090 and 8091;
# deliver health 9466 and 9467; PostgreSQL 55432, NATS 54222.
set -euo pipefail
bin=${1:-target/release/rampart}
[ -x "$bin" ] || { echo "no rampart binary at $bin (cargo build --release first)" >&2; exit 2; }
pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
dir=$(mktemp -d /tmp/rampart-cluster.XXXXXX)
pids=()
# PostgreSQL refuses to run as root: as root, it runs as the package's `postgres` user.
as_pg=()
if [ "$(id -u)" = 0 ]; then as_pg=(runuser -u postgres --); fi
# The nodes and NATS get SIGTERM (each stops cleanly on it), then PostgreSQL a fast shutdown
# through pg_ctl (a signal to runuser would not reach it). SIGINT alone is not enough: a script
# started in the background has it ignored.
stop() {
    trap - EXIT INT TERM
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    wait "${pids[@]}" 2>/dev/null || true
    "${as_pg[@]}" "$pgbin/pg_ctl" -D "$dir/pg" stop -m fast >/dev/null 2>&1 || true
    rm -rf "$dir"
}
trap stop EXIT INT TERM
if [ "$(id -u)" = 0 ]; then chown postgres: "$dir"; fi
"${as_pg[@]}" "$pgbin/initdb" -U postgres --auth=trust -D "$dir/pg" >/dev/null
"${as_pg[@]}" "$pgbin/postgres" -D "$dir/pg" -p 55432 -k "$dir" -c listen_addresses=127.0.0.1 >"$dir/pg.log" 2>&1 &
nats-server -js -a 127.0.0.1 -p 54222 -sd "$dir/nats" >"$dir/nats.log" 2>&1 &
pids+=($!)
until "$pgbin/pg_isready" -q -h 127.0.0.1 -p 55432; do sleep 0.2; done
until grep -q "Server is ready" "$dir/nats.log"; do sleep 0.2; done
db="host=127.0.0.1 port=55432 user=postgres dbname=postgres"
nats=nats://127.0.0.1:54222
# The first api node makes the schema and prints the first key; the market nodes make the
# firings stream before the workers need it.
"$bin" serve --role api --partitions 2 --postgres "$db" --nats "$nats" --listen 127.0.0.1:8080 &
pids+=($!)
sleep 2
for i in 0 1; do
    "$bin" serve --role market --partition "$i/2" --postgres "$db" --nats "$nats" --listen "127.0.0.1:809$i" &
    pids+=($!)
done
"$bin" serve --role api --partitions 2 --postgres "$db" --nats "$nats" --listen 127.0.0.1:8081 &
pids+=($!)
sleep 2
for port in 9466 9467; do
    "$bin" deliver --postgres "$db" --nats "$nats" --listen "127.0.0.1:$port" &
    pids+=($!)
done
echo "cluster up: API http://127.0.0.1:8080 and :8081, market nodes :8090 and :8091, deliver :9466 and :9467; Ctrl-C stops it"
wait
