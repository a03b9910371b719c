#!/usr/bin/env bash
# Runs a rampart cluster on one host, from Debian's postgresql and nats-server
# (tools/postgres-deps.sh and tools/nats-deps.sh install them): a PostgreSQL server and a NATS
# server with JetStream in a directory of their own, market nodes (`serve --role market`: one
# owner per partition, and with --standby a standby each), api nodes (`serve --role api`) and
# `rampart deliver` processes. Market nodes run under a restart loop, as a supervisor would run
# them: one that ends (status 75 when its standby took its partition, or killed) comes back as
# the new standby. Ctrl-C (or SIGTERM to the script) stops everything; the directory is removed
# unless --keep.
#
# Usage: deploy/cluster-local.sh [options]
#   --bin PATH          the rampart binary (default target/release/rampart)
#   --dir DIR           where PostgreSQL, NATS and the nodes keep their files (default: a fresh
#                       directory under /tmp; an existing DIR is refused, so nothing is overwritten)
#   --keep              leave DIR behind at the stop
#   --config FILE       rampart's configuration file, given to every node and deliver process
#   --partitions N      market partitions (default 2)
#   --standby           a second market node per partition (its standby)
#   --api N             api nodes (default 2)
#   --deliver N         deliver processes (default 2)
#   --host ADDR         the address everything listens on (default 127.0.0.1)
#   --port P            first port (default 8080): api nodes P, P+1, ...; market nodes P+10,
#                       P+11, ... (standbys P+30, ...); deliver P+50, ...; PostgreSQL P+70;
#                       NATS P+71
#   -- ARGS             everything after `--` is passed to every `serve` (e.g. -- --feed live)
set -euo pipefail

bin=target/release/rampart dir="" keep=0 config="" partitions=2 standby=0 apis=2 delivers=2
host=127.0.0.1 port=8080 extra=()
while [ $# -gt 0 ]; do
    case "$1" in
        --bin) bin=$2; shift 2 ;;
        --dir) dir=$2; shift 2 ;;
        --keep) keep=1; shift ;;
        --config) config=$2; shift 2 ;;
        --partitions) partitions=$2; shift 2 ;;
        --standby) standby=1; shift ;;
        --api) apis=$2; shift 2 ;;
        --deliver) delivers=$2; shift 2 ;;
        --host) host=$2; shift 2 ;;
        --port) port=$2; shift 2 ;;
        --) shift; extra=("$@"); break ;;
        -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
        *) echo "unknown option $1 (--help lists them)" >&2; exit 2 ;;
    esac
done
[ -x "$bin" ] || { echo "no rampart binary at $bin (cargo build --release first, or --bin)" >&2; exit 2; }
[ -z "$config" ] || [ -r "$config" ] || { echo "cannot read the configuration $config" >&2; exit 2; }
for n in "$partitions" "$apis" "$delivers" "$port"; do
    [[ "$n" =~ ^[0-9]+$ ]] || { echo "not a number: $n" >&2; exit 2; }
done
[ "$partitions" -ge 1 ] && [ "$partitions" -le 20 ] || { echo "--partitions: 1 to 20 here" >&2; exit 2; }
[ "$apis" -ge 1 ] && [ "$apis" -le 10 ] && [ "$delivers" -ge 1 ] && [ "$delivers" -le 10 ] || {
    echo "--api and --deliver: 1 to 10 here" >&2; exit 2; }
if [ -z "$dir" ]; then
    dir=$(mktemp -d /tmp/rampart-cluster.XXXXXX)
else
    [ -e "$dir" ] && { echo "$dir exists; give a new directory" >&2; exit 2; }
    mkdir -p "$dir"
fi
bin=$(realpath "$bin")
[ -z "$config" ] || config=$(realpath "$config")
pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
pg_port=$((port + 70)) nats_port=$((port + 71))
conf=()
[ -z "$config" ] || conf=(--config "$config")
pids=()
# PostgreSQL refuses to run as root: as root, it runs as the package's `postgres` user.
as_pg=()
if [ "$(id -u)" = 0 ]; then as_pg=(runuser -u postgres --); fi
# Every process gets SIGTERM (each stops cleanly on it; a market node releases its partition
# for its standby), then PostgreSQL a fast shutdown through pg_ctl (a signal to runuser would not
# reach it). SIGINT alone is not enough: a script started in the background has it ignored.
stop() {
    trap - EXIT INT TERM
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    wait "${pids[@]}" 2>/dev/null || true
    "${as_pg[@]}" "$pgbin/pg_ctl" -D "$dir/pg" stop -m fast >/dev/null 2>&1 || true
    if [ "$keep" = 1 ]; then echo "kept $dir"; else rm -rf "$dir"; fi
}
trap stop EXIT INT TERM
if [ "$(id -u)" = 0 ]; then chown postgres: "$dir"; fi
"${as_pg[@]}" "$pgbin/initdb" -U postgres --auth=trust -D "$dir/pg" >/dev/null
"${as_pg[@]}" "$pgbin/postgres" -D "$dir/pg" -p "$pg_port" -k "$dir" -c listen_addresses="$host" >"$dir/pg.log" 2>&1 &
nats-server -js -a "$host" -p "$nats_port" -sd "$dir/nats" >"$dir/nats.log" 2>&1 &
pids+=($!)
until "$pgbin/pg_isready" -q -h "$host" -p "$pg_port"; do sleep 0.2; done
until grep -q "Server is ready" "$dir/nats.log"; do sleep 0.2; done
db="host=$host port=$pg_port user=postgres dbname=postgres"
nats=nats://$host:$nats_port
mkdir -p "$dir/logs"

# A market node under a restart loop, as `Restart=always` runs it: whatever ended it (status 75:
# its partition was taken; a crash; a kill), it starts again a second later and waits as the
# standby. SIGTERM to the loop stops the node and the loop.
# Market nodes' shards do not spin before they park unless told (RAMPART_SHARD_SPIN_US or
# --shard-spin-us after `--`): every node shares this host's cores, and a spinning shard takes them
# from PostgreSQL and the other nodes (perf/README.md, issue #59: creates 1.36x without the spin).
market() {
    local name=$1; shift
    (
        export RAMPART_SHARD_SPIN_US="${RAMPART_SHARD_SPIN_US:-0}"
        child=0
        trap 'kill -TERM $child 2>/dev/null; wait $child; exit 0' TERM
        while :; do
            "$bin" serve "${conf[@]}" --data-dir "$dir/$name" "$@" "${extra[@]}" >>"$dir/logs/$name.log" 2>&1 &
            child=$!
            rc=0; wait $child || rc=$?
            echo "$name: ended with status $rc; starting again (as the standby if its partition is owned)" >>"$dir/logs/$name.log"
            sleep 1
        done
    ) &
    pids+=($!)
}

# The first api node makes the schema and prints the first key.
"$bin" serve "${conf[@]}" --role api --partitions "$partitions" --postgres "$db" --nats "$nats" \
    --data-dir "$dir/api-0" --listen "$host:$port" "${extra[@]}" >"$dir/logs/api-0.log" 2>&1 &
pids+=($!)
until grep -q "listening on" "$dir/logs/api-0.log" 2>/dev/null; do sleep 0.2; done
for ((i = 0; i < partitions; i++)); do
    market "market-$i" --role market --partition "$i/$partitions" --postgres "$db" --nats "$nats" --listen "$host:$((port + 10 + i))"
done
if [ "$standby" = 1 ]; then
    for ((i = 0; i < partitions; i++)); do
        market "standby-$i" --role market --partition "$i/$partitions" --postgres "$db" --nats "$nats" --listen "$host:$((port + 30 + i))"
    done
fi
for ((i = 1; i < apis; i++)); do
    "$bin" serve "${conf[@]}" --role api --partitions "$partitions" --postgres "$db" --nats "$nats" \
        --data-dir "$dir/api-$i" --listen "$host:$((port + i))" "${extra[@]}" >"$dir/logs/api-$i.log" 2>&1 &
    pids+=($!)
done
for ((i = 0; i < delivers; i++)); do
    "$bin" deliver "${conf[@]}" --postgres "$db" --nats "$nats" --listen "$host:$((port + 50 + i))" >"$dir/logs/deliver-$i.log" 2>&1 &
    pids+=($!)
done
grep -m1 "api key" "$dir/logs/api-0.log" || true
echo "cluster up in $dir (logs in $dir/logs): API http://$host:$port to :$((port + apis - 1));" \
    "market nodes :$((port + 10))..$((port + 9 + partitions))$([ "$standby" = 1 ] && echo ", standbys :$((port + 30))..$((port + 29 + partitions))");" \
    "deliver :$((port + 50))..$((port + 49 + delivers)); PostgreSQL $host:$pg_port, NATS $nats; Ctrl-C stops it"
wait
