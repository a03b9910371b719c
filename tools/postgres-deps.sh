#!/usr/bin/env bash
# What the storage tests on PostgreSQL need beyond cargo: Debian's PostgreSQL server binaries
# (/usr/lib/postgresql/<version>/bin: initdb, postgres, pg_isready) and, when the tests run as
# root, the `postgres` user the package creates (the server refuses to run as root). The tests
# start their own throwaway server (rampart_testkit::pg); the package's own cluster is not used.
# Installs whatever is missing; does nothing when everything is there.
set -euo pipefail
have_server() { compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; }
if ! have_server || { [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; }; then
    echo "installing postgresql (Debian package)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
have_server || { echo "PostgreSQL server binaries still missing under /usr/lib/postgresql" >&2; exit 1; }
