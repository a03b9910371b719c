# One line per run: rounds, perpetuals per venue, injected liquidations delivered, duplicates,
# bodies, bodies closer than 0.9 s at the receivers (by gap) and as committed by the writer.
import glob, json, os
here = os.path.dirname(os.path.abspath(__file__))
for f in sorted(glob.glob(os.path.join(here, 'r*-*', '*.json'))):
    j = json.load(open(f))['liquidationStorm']
    print(f"{os.path.basename(os.path.dirname(f)):5} rounds={j['rounds']} perps={j['perpetuals']} "
          f"delivered={j['delivered']}/{j['expected']} dup={j['duplicates']} bodies={j['bodies']} "
          f"close@receivers={j['bodiesCloserThanASecond']} {j['closeGapsMs']} "
          f"committed={j.get('bodiesCommitted', '-')} close@commit={j.get('bodiesCommittedCloserThanASecond')} "
          f"maxTriggers={j['triggersPerBodyMax']} last={j['lastBodyAfterS']:.1f}s")
