"""Unauthenticated body flood: starts `rampart serve` (60 simulated pairs, one shard), opens N
connections that each send a POST head and a 64 KiB body without a key, and prints the server's
RSS before, during (2 s after the last connection) and after (2 s after closing them).

Usage: python3 perf/scripts/unauth_flood.py PATH/TO/rampart N
Loopback only; bounded by N connections and a few seconds.
"""
import socket, subprocess, sys, time, os, re, tempfile, resource
resource.setrlimit(resource.RLIMIT_NOFILE, (8192, 8192))
binary = sys.argv[1]; n = int(sys.argv[2])
d = tempfile.mkdtemp()
p = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--data-dir", d, "--sim-pairs", "60", "--shards", "1"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
port = None
while port is None:
    line = p.stdout.readline()
    m = re.match(r"listening on 127.0.0.1:(\d+)", line)
    if m: port = int(m.group(1))
def rss():
    for l in open(f"/proc/{p.pid}/status"):
        if l.startswith("VmRSS:"): return int(l.split()[1])
time.sleep(3)
before = rss()
body = b"x" * 65536
head = b"POST /v1/alerts HTTP/1.1\r\nHost: x\r\nContent-Length: 65536\r\n\r\n"
socks = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port)); s.settimeout(0.2)
    try:
        s.sendall(head); s.sendall(body)
    except Exception: pass
    socks.append(s)
time.sleep(2)
during = rss()
for s in socks: s.close()
time.sleep(2)
after = rss()
print(f"{os.path.basename(binary)}: {n} connections x 64 KiB unauthenticated bodies: RSS before {before//1024} MiB, during {during//1024} MiB, after {after//1024} MiB")
p.terminate(); p.wait()
