#!/usr/bin/env bash
# CI of the Python client (issue #63): lint, types, build, and the tests against a server.
#
#   clients/python/ci.sh <path-to-rampart-binary>
#
# The venv lives in ${CARGO_TARGET_DIR:-<repo>/target}/pyclient-venv and is reused; the package is
# installed from the repository the way a user installs it (pip install ./clients/python).
set -euo pipefail

if [ $# -ne 1 ] || [ ! -x "$1" ]; then
    echo "usage: $0 <path-to-rampart-binary>" >&2
    exit 2
fi
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
venv="${CARGO_TARGET_DIR:-$repo/target}/pyclient-venv"
export PYTHONDONTWRITEBYTECODE=1

step() { printf '\n== %s (%ss)\n' "$1" "$SECONDS"; }

step "venv $venv"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
py="$venv/bin/python"
"$py" -m pip install --quiet --disable-pip-version-check -r "$here/requirements-dev.txt"

step "install the package from the repository"
cd "$repo"
# --force-reinstall: the same version number, new code; its dependencies come pinned above.
"$py" -m pip install --quiet --disable-pip-version-check --no-build-isolation --force-reinstall \
    --no-deps ./clients/python
"$py" -m pip check

cd "$here"
step "ruff check"
"$venv/bin/ruff" check --no-cache .
step "ruff format --check"
"$venv/bin/ruff" format --check --no-cache .
step "mypy --strict"
"$venv/bin/mypy" --strict --cache-dir "$venv/mypy-cache" src/rampart tests examples tools

step "build a wheel and an sdist"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
"$py" -m build --no-isolation --outdir "$out" . >"$out/build.log" 2>&1 || { cat "$out/build.log"; exit 1; }
ls "$out"/rampart_client-*.whl "$out"/rampart_client-*.tar.gz

step "pytest against $bin"
RAMPART_BIN="$bin" "$py" -m pytest -p no:cacheprovider -q
step "done"
