#!/bin/bash
# Alternating storm runs: before (2f88ee6), after with 1, 2 and 4 delivery threads.
cd /work/main
for round in 1 2 3; do
  for v in before t1 t2 t4; do
    case $v in
      before) bin=/tmp/st/rampart-before; env=;;
      t*) bin=/tmp/st/rampart-after; env="RAMPART_WEBHOOKS__DELIVERY_THREADS=${v#t}";;
    esac
    env $env ./target/release/rampart-harness storm --rampart $bin --out /tmp/st/runs/$v-$round > /tmp/st/runs/$v-$round.log 2>&1
    python3 - $v $round <<'PY'
import json,glob,sys
f=glob.glob(f'/tmp/st/runs/{sys.argv[1]}-{sys.argv[2]}/*.json')[0]
d=json.load(open(f)); s=d.get('stages',{})
print(sys.argv[1], sys.argv[2], round(d['deliveriesPerS']), 'p50/p99 ms', d['tickToWebhookUs']['p50']//1000, d['tickToWebhookUs']['p99']//1000, 'committed p50', s.get('toCommittedMs',{}).get('p50'), 'first p50', s.get('toFirstAttemptMs',{}).get('p50'), 'ok', d['correctness']['ok'], flush=True)
PY
  done
done
