#!/usr/bin/env bash
# The API contract check: docs/openapi.json against the running server with schemathesis
# (property-based: every operation, every check, generated valid and invalid requests, stateful
# sequences through the alert links), zero failures allowed.
#
# Usage: bash tools/api-check.sh [path/to/rampart]   (default: the debug build in the target dir)
# Installs schemathesis (pinned) into a virtualenv in the target dir when it is missing; needs
# python3 with venv and PyPI. Starts a server on a free loopback port with its own data dir and
# stops it afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."

SCHEMATHESIS_VERSION=4.32.5
root="$(pwd)"
target="${CARGO_TARGET_DIR:-target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac
bin="${1:-$target/debug/rampart}"
venv="$target/schemathesis-$SCHEMATHESIS_VERSION"

if [ ! -x "$venv/bin/schemathesis" ]; then
    echo "installing schemathesis $SCHEMATHESIS_VERSION into $venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
fi

work="$(mktemp -d)"
server_pid=""
cleanup() {
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
        kill -TERM "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

config=tools/api-check/config.toml
key="$("$bin" keys create --plan contract --label api-check --config "$config" --data-dir "$work/data" --create | tail -n1)"
RUST_LOG=warn "$bin" serve --config "$config" --data-dir "$work/data" --listen 127.0.0.1:0 \
    --sim-pairs 40 --shards 1 --cpus none >"$work/stdout" 2>"$work/stderr" &
server_pid=$!

address=""
for _ in $(seq 1 600); do
    address="$(sed -n 's/^listening on //p' "$work/stdout")"
    [ -n "$address" ] && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/stderr" >&2; echo "the server exited" >&2; exit 1; }
    sleep 0.1
done
[ -n "$address" ] || { echo "the server printed no address" >&2; exit 1; }
for _ in $(seq 1 600); do
    status="$(python3 -c "import urllib.request,sys
try:
    print(urllib.request.urlopen('http://$address/healthz', timeout=2).status)
except Exception as e:
    print(getattr(e, 'code', 0))")"
    [ "$status" = 200 ] && break
    sleep 0.1
done
[ "$status" = 200 ] || { echo "the server did not become ready" >&2; exit 1; }

echo "schemathesis $SCHEMATHESIS_VERSION against http://$address/openapi.json"
# Run from the scratch dir: schemathesis keeps its example database in the working directory.
(cd "$work" && "$venv/bin/schemathesis" --config-file "$root/tools/api-check/schemathesis.toml" \
    run "http://$address/openapi.json" \
    --header "Authorization: Bearer $key" \
    --checks all \
    --max-examples 100 \
    --no-color)
