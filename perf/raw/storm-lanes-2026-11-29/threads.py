# Polls per-thread CPU (utime+stime ticks) of processes named rampart and rampart-harness every 50 ms; prints threads' busy share over each 200ms window when total > threshold
import os,time,sys,collections
HZ=os.sysconf('SC_CLK_TCK')
def procs():
    out=[]
    for p in os.listdir('/proc'):
        if p.isdigit():
            try:
                c=open(f'/proc/{p}/comm').read().strip()
            except: continue
            if c.startswith('rampart'): out.append((p,c))
    return out
def snap():
    d={}
    for p,c in procs():
        try: tasks=os.listdir(f'/proc/{p}/task')
        except: continue
        for t in tasks:
            try:
                s=open(f'/proc/{p}/task/{t}/stat').read()
                name=s[s.index('(')+1:s.rindex(')')]
                f=s[s.rindex(')')+2:].split()
                d[(c,t,name)]=int(f[11])+int(f[12])
            except: pass
    return d
end=time.time()+float(sys.argv[1])
prev=snap(); pt=time.time()
while time.time()<end:
    time.sleep(0.2)
    cur=snap(); ct=time.time()
    agg=collections.Counter()
    for k,v in cur.items():
        dv=v-prev.get(k,v)
        if dv>0: agg[(k[0],k[2])]+=dv
    tot=sum(agg.values())/HZ/(ct-pt)
    if tot>0.8:
        print(f"{ct:.1f} total {tot:.2f} cores: "+", ".join(f"{c[:9]}/{n}:{v/HZ/(ct-pt):.2f}" for (c,n),v in agg.most_common(8)),flush=True)
    prev,pt=cur,ct
