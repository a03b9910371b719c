# One line per run: spot messages sent and applied per second, tick → decision p50/p99 (µs),
# tick → webhook p50/p99 (ms), derivatives alerts loaded, probes' correctness.
import glob, json, os
here = os.path.dirname(os.path.abspath(__file__))
for d in sorted(glob.glob(os.path.join(here, '*-[0-9]'))):
    f = glob.glob(os.path.join(d, '*quiet.json'))
    if not f:
        print(f"{os.path.basename(d):6} (no result)")
        continue
    j = json.load(open(f[0]))
    i, t, w = j['ingest'], j['tickToDecisionUs'], j['tickToWebhookUs']
    loaded = j.get('perpAlerts', {}).get('loaded', 0)
    print(f"{os.path.basename(d):6} sent/s={i['sentPerS']:.0f} applied/s={i['appliedPerS']:.0f} "
          f"decision p50/p99 us={t['p50']}/{t['p99']} webhook p50/p99 ms={w['p50']/1000:.2f}/{w['p99']/1000:.2f} "
          f"perpAlerts={loaded} ok={j['correctness']['ok']}")
