#!/usr/bin/env bash
# One command checks everything, locally and in CI: formatting, lints, the engine's no-I/O
# boundary, the docs, every test (unit, black-box, and the benchmarks in their cheap mode), and the
# OpenAPI document against the running server.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

echo "== engine boundary: no runtime, socket, clock-driving or storage crate under rampart-engine"
forbidden='^(glommio|tokio|hyper|hyper-util|may|may_minihttp|mio|socket2|rusqlite|tungstenite|rustls) '
if cargo tree -p rampart-engine -e normal --prefix none | grep -E "$forbidden"; then
    echo "rampart-engine must stay sans-I/O (see ARCHITECTURE.md)" >&2
    exit 1
fi

echo "== cargo doc (broken links and missing docs are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet

echo "== browser test dependencies (Chromium, Node.js, playwright-core)"
bash tools/browser-deps.sh

echo "== PostgreSQL server for the storage tests (Debian's postgresql)"
bash tools/postgres-deps.sh

echo "== NATS server for the cluster tests (Debian's nats-server)"
bash tools/nats-deps.sh

echo "== network namespaces for the cluster's fault test (iproute2, util-linux)"
bash tools/netns-deps.sh

echo "== cargo test (every binary of cargo test --workspace, three at a time: tools/test-all.py)"
python3 tools/test-all.py

echo "== API contract: docs/openapi.json against the running server (schemathesis)"
# The binary the test build made (`rampart-under-test` is `rampart::cli_main`, the same program as
# `rampart`): building `rampart` again here took about 25 s of the run.
bash tools/api-check.sh "${CARGO_TARGET_DIR:-target}/debug/rampart-under-test"

echo "== the Python client (clients/python): ruff, mypy --strict, wheel and sdist, pytest against the server"
bash clients/python/ci.sh "${CARGO_TARGET_DIR:-target}/debug/rampart-under-test"
