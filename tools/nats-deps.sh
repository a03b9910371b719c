#!/usr/bin/env bash
# What the cluster tests need beyond cargo: Debian's nats-server (JetStream is built in). The
# tests start their own throwaway server on a loopback port (rampart_testkit::nats).
# Installs it when missing; does nothing when it is there.
set -euo pipefail
if ! command -v nats-server >/dev/null 2>&1; then
    echo "installing nats-server (Debian package)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nats-server >/dev/null
fi
command -v nats-server >/dev/null 2>&1 || { echo "nats-server still missing" >&2; exit 1; }
