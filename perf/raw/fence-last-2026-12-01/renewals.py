#!/usr/bin/env python3
"""The owner's lease renewals PostgreSQL logged (50 ms or more) in each run's log: how many,
the longest, and how many took 1 s or more (the lease is 2 s, renewed every 0.5 s)."""
import glob, os, re, sys
root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(__file__)
for d in sorted(glob.glob(os.path.join(root, '*-[0-9]'))):
    durs = []
    for f in glob.glob(os.path.join(d, '*')):
        for line in open(f, errors='replace'):
            m = re.search(r'duration: ([0-9.]+) ms .*UPDATE partition_owners SET expires_ms', line)
            if m:
                durs.append(float(m.group(1)))
    run = os.path.basename(d)
    longest = max(durs) if durs else 0
    print(f"{run:10} renewals>=50ms={len(durs):3} >=1s={sum(d >= 1000 for d in durs):2} longest_ms={longest:.0f}")
