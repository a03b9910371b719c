"""Per-stage times of a storm's firings from rampart's own trace lines (target rampart::firing:
'taken from its shard's queue', 'committed', 'attempt started', 'attempt answered', each with the
alert's id), as written to stderr by

    RUST_LOG=info,rampart::access=off,rampart::firing=trace rampart-harness storm ... 2> trace.log

Usage: python3 stages.py trace.log   (prints the percentiles, milliseconds)
"""
import datetime, re, sys

ev = {}
pat = re.compile(r'^(\S+Z) TRACE rampart::firing: (.+?) alert=(\d+)')
for line in open(sys.argv[1]):
    m = pat.match(line)
    if not m:
        continue
    t = datetime.datetime.fromisoformat(m.group(1).replace('Z', '+00:00')).timestamp() * 1e3
    what = m.group(2).strip()
    ev.setdefault(int(m.group(3)), {}).setdefault(what, t)

def q(xs):
    xs = sorted(xs); n = len(xs)
    return f"n {n}, p50 {xs[n // 2]:.1f}, p90 {xs[int(n * 0.9)]:.1f}, p99 {xs[int(n * 0.99)]:.1f}, max {xs[-1]:.1f}"

TAKEN, COMMITTED, STARTED, ANSWERED = "taken from its shard's queue", "committed", "attempt started", "attempt answered"
print(len(ev), "alerts traced")
for a, b in [(TAKEN, COMMITTED), (COMMITTED, STARTED), (STARTED, ANSWERED)]:
    print(f"{a} -> {b}: {q([e[b] - e[a] for e in ev.values() if a in e and b in e])}")
t0 = min(e[TAKEN] for e in ev.values() if TAKEN in e)
for k in [TAKEN, COMMITTED, STARTED, ANSWERED]:
    print(f"first taken -> {k}: {q([e[k] - t0 for e in ev.values() if k in e])}")
