#!/usr/bin/env python3
"""One line per run of runs.sh, then the medians per mode (written to summary.txt)."""
import glob, json, statistics, os
here = os.path.dirname(os.path.abspath(__file__))
rows = {}
for f in sorted(glob.glob(os.path.join(here, '*', '*-quiet.json'))):
    run = os.path.basename(os.path.dirname(f))
    d = json.load(open(f))
    i, t, w = d['ingest'], d['tickToDecisionUs'], d['tickToWebhookUs']
    r = (i['appliedPerS'], i['sentPerS'], t['p50'], t['p99'], w['p50'], w['p99'], d['correctness']['ok'])
    rows.setdefault(run.split('-')[0], []).append(r)
    print(f"{run}: spot applied/s {r[0]:.0f}, sim sent/s {r[1]:.0f}, tick->decision p50/p99 {r[2]}/{r[3]} us, tick->webhook p50/p99 {r[4]}/{r[5]} us, correct {r[6]}")
for mode, rs in rows.items():
    med = lambda k: statistics.median(r[k] for r in rs)
    print(f"median {mode}: spot applied/s {med(0):.0f}, tick->decision p50 {med(2)} us p99 {med(3)} us, tick->webhook p50 {med(4)} us p99 {med(5)} us")
