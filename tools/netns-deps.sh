#!/usr/bin/env bash
# What the cluster's fault test (tests/tests/faults) needs beyond cargo: iproute2's `ip` (network
# namespaces, veth pairs, a bridge, blackhole routes) and util-linux's `setpriv` (PostgreSQL run as
# its user inside a namespace). The test makes and removes its own namespaces; it needs root.
# Installs what is missing; does nothing when both are there.
set -euo pipefail
if ! command -v ip >/dev/null 2>&1; then
    echo "installing iproute2 (Debian package)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 >/dev/null
fi
if ! command -v setpriv >/dev/null 2>&1; then
    echo "installing util-linux (Debian package)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq util-linux >/dev/null
fi
command -v ip >/dev/null 2>&1 || { echo "ip still missing" >&2; exit 1; }
command -v setpriv >/dev/null 2>&1 || { echo "setpriv still missing" >&2; exit 1; }
