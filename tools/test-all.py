#!/usr/bin/env python3
"""Runs every test of the workspace, as `cargo test --workspace` does, several binaries at once.

`cargo test` runs its test binaries one after another; most of ours spend their time waiting on
servers, venues and clocks, so on a 2-core machine the run took about 15 minutes of which the
processors were busy for less than half. This builds exactly what `cargo test --workspace` builds
(`--no-run`), runs the doc tests through cargo, then runs every test binary (unit tests of every
crate, every integration test, with no filter and no skipped test) from its package's directory,
as cargo does, `RAMPART_TEST_JOBS` at a time (default 3), the slowest first; those named in
`ALONE` (latency bounds) one at a time after the rest. Each binary's output
is printed whole when it ends, with its time; the run fails if any binary fails, and the failing
ones are named again at the end.

Bound: at most `RAMPART_TEST_JOBS` binaries run at once; each binary runs its own tests on as
many threads as `cargo test` gives it (`RUST_TEST_THREADS` is passed through untouched).
"""

import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

# The slowest binaries first (seconds measured alone on the 2-core CI machine, 2026-11-26), so
# the longest one does not start last. A binary not named here runs after these, in build order.
SLOWEST_FIRST = [
    "live_hardening",  # 127 s
    "faults",  # 104 s (with the rolling restart)
    "trust",  # 86 s
    "backpressure",  # 51 s
    "cluster_market_alerts",  # 45 s
    "cluster",  # 42 s
    "live",  # 36 s
    "site_browser",  # 34 s
    "cluster_failover",  # 33 s
    "harness",  # 30 s
    "streams",  # 30 s
    "cluster_roles",  # 22 s
    "hardening",  # 21 s
    "robustness",  # 21 s
]

# Binaries whose tests hold a delivery's latency to a bound (a healthy webhook within 500 ms of its
# firing beside thousands of hanging ones): run alone after the others, so that three binaries at
# once on two cores do not decide their figures (under that load the cluster's four-hop path took
# up to 1.6 s; alone 0.1-0.6 s).
ALONE = ["delivery_hardening"]


def build():
    """Builds every test target of the workspace; returns (name, kind, package dir, executable)."""
    cmd = ["cargo", "test", "--workspace", "--no-run", "--message-format=json-render-diagnostics"]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, check=True, text=True).stdout
    found = []
    for line in out.splitlines():
        m = json.loads(line)
        if m.get("reason") != "compiler-artifact" or not m.get("executable"):
            continue
        if not m["profile"]["test"]:
            continue
        target = m["target"]
        found.append((target["name"], target["kind"][0], os.path.dirname(m["manifest_path"]), m["executable"]))
    assert found, "cargo built no test binary"
    return found


def order(binaries):
    """The slowest first, then the rest in build order."""
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    return sorted(binaries, key=lambda b: rank.get(b[0] if b[1] == "test" else "", len(rank)))


def run_one(binary, lock):
    name, kind, cwd, exe = binary
    env = dict(os.environ, CARGO_MANIFEST_DIR=cwd)
    started = time.monotonic()
    proc = subprocess.run([exe], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    took = time.monotonic() - started
    label = f"{name} ({kind}, {os.path.relpath(exe)})"
    with lock:
        verdict = "ok" if proc.returncode == 0 else f"FAILED (exit {proc.returncode})"
        print(f"\n     Running {label}: {verdict} in {took:.1f}s", flush=True)
        sys.stdout.write(proc.stdout.decode("utf-8", "replace"))
        sys.stdout.flush()
    return label, proc.returncode, took


def main():
    jobs = int(os.environ.get("RAMPART_TEST_JOBS", "3"))
    assert 1 <= jobs <= 16, f"RAMPART_TEST_JOBS={jobs}: between 1 and 16"
    binaries = order(build())
    print(f"== doc tests (cargo test --workspace --doc)", flush=True)
    doc = subprocess.run(["cargo", "test", "--workspace", "--doc"])
    print(f"== {len(binaries)} test binaries, {jobs} at a time", flush=True)
    lock = threading.Lock()
    started = time.monotonic()
    alone = [b for b in binaries if b[1] == "test" and b[0] in ALONE]
    shared = [b for b in binaries if b not in alone]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(lambda b: run_one(b, lock), shared))
    print(f"\n== {len(alone)} test binaries alone", flush=True)
    results += [run_one(b, lock) for b in alone]
    failed = [r for r in results if r[1] != 0]
    print(f"\n== {len(results)} test binaries in {time.monotonic() - started:.0f}s; slowest:")
    for label, _, took in sorted(results, key=lambda r: -r[2])[:8]:
        print(f"   {took:6.1f}s {label}")
    if doc.returncode != 0:
        print("doc tests FAILED", file=sys.stderr)
    for label, code, _ in failed:
        print(f"FAILED: {label} (exit {code})", file=sys.stderr)
    return 1 if failed or doc.returncode != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
