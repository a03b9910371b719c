#!/usr/bin/env bash
# What the site's browser test needs beyond cargo: Debian's Chromium (/usr/bin/chromium), Node.js
# with npm, and playwright-core at the version tests/browser/package-lock.json pins (installed
# into tests/browser/node_modules; no browser download: the test drives Debian's Chromium).
# Installs whatever is missing; does nothing when everything is there.
set -euo pipefail
cd "$(dirname "$0")/.."
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]} (Debian packages)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
lock=tests/browser/package-lock.json
stamp=tests/browser/node_modules/.installed-lock
if ! cmp -s "$lock" "$stamp" 2>/dev/null; then
    echo "installing the browser test's npm packages (npm ci)"
    (cd tests/browser && npm ci --no-audit --no-fund --loglevel=error)
    cp "$lock" "$stamp"
fi
