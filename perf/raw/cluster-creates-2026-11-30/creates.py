# The api node's storage connection during a storm's creates, from PostgreSQL's log of every
# statement (log_min_duration_statement=0): jobs per transaction, statements' own time per
# create, wall time from BEGIN to COMMIT's end, and the gap to the next BEGIN.
import re, sys, statistics as st
from datetime import datetime
pid = sys.argv[2]
line = re.compile(r'^(\S+ \S+) UTC_\[(\d+)\]_\S*_LOG:  duration: ([\d.]+) ms  (?:statement|execute \S+|bind \S+|parse \S+): (.*)')
txns = []; cur = None
for l in open(sys.argv[1], errors='replace'):
    m = line.match(l)
    if not m or m.group(2) != pid: continue
    ts = datetime.strptime(m.group(1), '%Y-%m-%d %H:%M:%S.%f').timestamp() * 1000
    dur = float(m.group(3)); sql = m.group(4)
    if sql.startswith('BEGIN'):
        cur = {'start': ts - dur, 'stmts': 0, 'own': 0.0, 'jobs': 0}
    if cur is None: continue
    cur['stmts'] += 1; cur['own'] += dur
    if 'SAVEPOINT job' in sql: cur['jobs'] += 1
    if sql.rstrip().endswith('COMMIT'):
        cur['end'] = ts; txns.append(cur); cur = None
creates = [t for t in txns if t['jobs'] >= 1]
print('transactions', len(creates), 'jobs per transaction', st.mean(t['jobs'] for t in creates))
walls = sorted(t['end'] - t['start'] for t in creates)
owns = sorted(t['own'] for t in creates)
gaps = sorted(b['start'] - a['end'] for a, b in zip(creates, creates[1:]))
q = lambda v, p: v[int(p * (len(v) - 1))]
for name, v in [('BEGIN..COMMIT wall ms', walls), ('statements own ms', owns), ('gap to next BEGIN ms', gaps)]:
    print(f'{name:24} p50 {q(v,.5):.2f} p90 {q(v,.9):.2f} p99 {q(v,.99):.2f} mean {st.mean(v):.2f}')
span = (creates[-1]['end'] - creates[0]['start']) / 1000
print(f'span {span:.1f} s, {len(creates)/span:.0f} transactions/s')

# Each statement's own time (the server's `duration`), by its first words.
kinds = {}
for l in open(sys.argv[1], errors='replace'):
    m = line.match(l)
    if not m or m.group(2) != pid: continue
    kinds.setdefault(' '.join(m.group(4).split()[:3])[:40], []).append(float(m.group(3)))
for k, v in sorted(kinds.items(), key=lambda kv: -len(kv[1]))[:8]:
    v.sort()
    print(f'{k:42} n={len(v):6} p50 {q(v,.5):.3f} p90 {q(v,.9):.3f} ms')
