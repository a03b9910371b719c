# Per-process-and-thread CPU while a storm runs: every 0.5 s, the cores used over the window by
# each (process name, thread name) of rampart*, postgres* and nats-server, the top ten, when the
# total passes 0.8 core. Usage: python3 procs.py SECONDS
import collections, os, sys, time
HZ = os.sysconf('SC_CLK_TCK')
KEEP = ('rampart', 'postgres', 'nats-server')
def snap():
    d = {}
    for p in os.listdir('/proc'):
        if not p.isdigit():
            continue
        try:
            comm = open(f'/proc/{p}/comm').read().strip()
            if not comm.startswith(KEEP):
                continue
            if comm.startswith('postgres'):
                # postgres backends name themselves in their command line
                cmd = open(f'/proc/{p}/cmdline').read().replace('\0', ' ').strip()
                comm = 'pg:' + cmd.split(':', 1)[-1].strip().split(' ')[0][:20] if ':' in cmd else 'pg:main'
            for t in os.listdir(f'/proc/{p}/task'):
                s = open(f'/proc/{p}/task/{t}/stat').read()
                name = s[s.index('(') + 1:s.rindex(')')]
                f = s[s.rindex(')') + 2:].split()
                d[(p, t, comm, name)] = int(f[11]) + int(f[12])
        except (FileNotFoundError, ProcessLookupError, IndexError):
            pass
    return d
end = time.time() + float(sys.argv[1])
prev, pt = snap(), time.time()
total = collections.Counter()
while time.time() < end:
    time.sleep(0.5)
    cur, ct = snap(), time.time()
    agg = collections.Counter()
    for k, v in cur.items():
        dv = v - prev.get(k, v)
        if dv > 0:
            agg[(k[2], k[3])] += dv
    tot = sum(agg.values()) / HZ / (ct - pt)
    if tot > 0.8:
        total.update(agg)
        print(f"{ct:.1f} total {tot:.2f} cores: " + ", ".join(f"{c[:12]}/{n}:{v / HZ / (ct - pt):.2f}" for (c, n), v in agg.most_common(10)), flush=True)
    prev, pt = cur, ct
print("busy windows, CPU seconds by process/thread:")
for (c, n), v in total.most_common(25):
    print(f"  {c}/{n}: {v / HZ:.2f}")
