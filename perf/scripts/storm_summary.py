# One line per run directory of a storm's raw folder (the argument: e.g.
# perf/raw/storm-own-rows-2026-11-30): deliveries/s, creates/s, tick → webhook p50/p99, stage
# p50s, correctness.
import glob, json, os, sys
here = os.path.abspath(sys.argv[1])
for d in sorted(glob.glob(os.path.join(here, '*-[0-9r]*'))):
    if not os.path.isdir(d):
        continue
    files = glob.glob(os.path.join(d, '*storm.json'))
    if not files:
        print(f"{os.path.basename(d):18} (no result)")
        continue
    j = json.load(open(files[0]))
    s, c, w = j['stages'], j['correctness'], j['requestToWebhookUs']
    creates = j['alerts']['storm'] / j['alerts']['stormCreateS']
    print(f"{os.path.basename(d):18} deliv/s={j['deliveriesPerS']:.0f} creates/s={creates:.0f} "
          f"t2w p50/p99 ms={w['p50']//1000}/{w['p99']//1000} committed={s['toCommittedMs']['p50']} "
          f"published={s['toPublishedMs']['p50']}/{s['toPublishedMs']['p99']} "
          f"{'pulled=' + str(s['toPulledMs']['p50']) + ' ' if 'toPulledMs' in s else ''}"
          f"{'sent=' + str(s['toFirstSendMs']['p50']) + ' ' if 'toFirstSendMs' in s else ''}first={s['toFirstAttemptMs']['p50']} "
          f"ok={c['ok']} missing={c['missing']} dup={c['duplicates']}")
