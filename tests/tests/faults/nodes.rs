//! The cluster of the fault test, each process in a host (network namespace) of its own:
//! PostgreSQL, nats-server, two partitions (the first with two market nodes, owner and hot
//! standby, on which the owner faults fall; the second with one, `lone`), two api nodes, two
//! delivery processes; the test's client (load, receiver, resuming stream, checker) in a host
//! too. `RAMPART_FAULT_PAIRS` sets the simulated market's pairs (1 000 by default: about 500 per
//! partition, as issue #50 asks of the hot takeover; 120 gives each about 60).
//! A process that exits by itself is started again by [`Cluster::supervise`], as systemd's
//! `Restart=always` would (`deploy/rampart-market@.service`); every such exit is kept.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use rampart_store::db::Db;
use rampart_tests::netns::{Host, Net};
use serde_json::Value;

/// A process of the cluster, run in its host.
pub struct Proc {
    pub name: String,
    pub host: Host,
    program: String,
    args: Vec<String>,
    child: Option<Child>,
    log: PathBuf,
    /// Held down by a fault: not restarted by the supervisor.
    pub held: bool,
}

impl Proc {
    fn new(name: &str, host: &Host, program: &str, args: Vec<String>, dir: &Path) -> Proc {
        let log = dir.join(format!("{name}.log"));
        Proc {
            name: name.to_owned(),
            host: host.clone(),
            program: program.to_owned(),
            args,
            child: None,
            log,
            held: false,
        }
    }

    /// Starts it (its output appended to its log).
    pub fn spawn(&mut self) {
        let log = OpenOptions::new().create(true).append(true).open(&self.log).expect("the log");
        let err = log.try_clone().expect("the log");
        let mut c = self.host.command(&self.program);
        c.args(&self.args).stdin(Stdio::null()).stdout(log).stderr(err).env_remove("RUST_LOG");
        self.child = Some(c.spawn().unwrap_or_else(|e| panic!("start {}: {e}", self.name)));
    }

    /// Sends `signal` and waits (at most 30 s, then SIGKILL) for the exit.
    pub fn stop(&mut self, signal: &str) {
        self.signal(signal);
        self.wait_stopped();
    }

    /// Sends `signal`, not waiting.
    pub fn signal(&mut self, signal: &str) {
        let Some(child) = self.child.as_mut() else { return };
        let _ = Command::new("kill").args([signal, &child.id().to_string()]).status();
    }

    /// Waits (at most 30 s, then SIGKILL) for the exit.
    pub fn wait_stopped(&mut self) {
        let Some(child) = self.child.as_mut() else { return };
        let deadline = Instant::now() + Duration::from_secs(30);
        while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        self.child = None;
    }

    /// Its exit status, once it has exited by itself (the child is then forgotten).
    fn exited(&mut self) -> Option<ExitStatus> {
        let status = self.child.as_mut()?.try_wait().ok().flatten()?;
        self.child = None;
        Some(status)
    }

    /// Whether it runs (or was never started).
    pub fn running(&self) -> bool {
        self.child.is_some()
    }

    /// The last `n` bytes of its log.
    pub fn log_tail(&self, n: u64) -> String {
        let Ok(mut f) = File::open(&self.log) else { return String::new() };
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        let _ = f.seek(SeekFrom::Start(len.saturating_sub(n)));
        let mut s = String::new();
        let _ = f.read_to_string(&mut s);
        s
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The whole cluster. Fields drop in order: the processes before the namespaces.
pub struct Cluster {
    pub pg: Proc,
    pub nats: Proc,
    /// The first partition's owner and standby.
    pub markets: Vec<Proc>,
    /// The second partition's only market node.
    pub lone: Proc,
    pub apis: Vec<Proc>,
    pub delivers: Vec<Proc>,
    pub client: Host,
    /// The nodes' connection string.
    pub pg_url: String,
    pub config: String,
    /// Exits nobody asked for: (process, status, seconds since the start).
    pub exits: Vec<(String, ExitStatus, f64)>,
    /// What went wrong in a step the test drove itself (the rolling restart), for the end.
    pub problems: Vec<String>,
    started: Instant,
    dir: PathBuf,
    pub net: Net,
}

/// The API port of market and api nodes; a delivery process's health port.
pub const API_PORT: u16 = 8080;
pub const DELIVER_PORT: u16 = 8081;

/// The simulated market's pairs (`RAMPART_FAULT_PAIRS`, 1 000 by default), split between the
/// two partitions.
pub fn pairs() -> u64 {
    std::env::var("RAMPART_FAULT_PAIRS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000)
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// PostgreSQL's data directory, made by `initdb` as the `postgres` user.
fn initdb(dir: &Path) -> PathBuf {
    let ok = Command::new("chown").arg("postgres:postgres").arg(dir).status().is_ok_and(|s| s.success());
    assert!(ok, "chown {} to postgres (is Debian's postgresql installed?)", dir.display());
    let bin = rampart_testkit::pg::bin_dir().expect("PostgreSQL's binaries");
    let data = dir.join("data");
    let out = Command::new("runuser")
        .args(["-u", "postgres", "--"])
        .arg(bin.join("initdb"))
        .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "-D"])
        .arg(&data)
        .output()
        .expect("initdb");
    assert!(out.status.success(), "initdb: {}", String::from_utf8_lossy(&out.stderr));
    // The hosts' network, trusted as loopback is (test data only).
    let hba = data.join("pg_hba.conf");
    let rules = std::fs::read_to_string(&hba).expect("pg_hba.conf") + "host all all 10.99.0.0/24 trust\n";
    std::fs::write(&hba, rules).expect("pg_hba.conf");
    data
}

impl Cluster {
    /// Makes the hosts and starts every process; returns once the owner, both api nodes and
    /// both delivery processes answer (the standby waits for its turn). The calling thread is
    /// moved into the client's host.
    pub fn start(bin: &str) -> Cluster {
        let mut net = Net::new();
        let dir = std::env::temp_dir().join(format!("rampart-faults-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("the test's directory");
        let (pg_host, nats_host, client) = (net.host("pg"), net.host("nats"), net.host("client"));
        client.enter();
        let data = initdb(&dir);
        let postgres = rampart_testkit::pg::bin_dir().expect("PostgreSQL's binaries").join("postgres");
        let pg_args = vec![
            "--reuid=postgres".into(),
            "--regid=postgres".into(),
            "--clear-groups".into(),
            postgres.display().to_string(),
            "-D".into(),
            data.display().to_string(),
            "-p".into(),
            "5432".into(),
            "-k".into(),
            dir.display().to_string(),
            "-c".into(),
            format!("listen_addresses={}", pg_host.addr),
            "-c".into(),
            "max_connections=200".into(),
            "-c".into(),
            "fsync=off".into(),
        ];
        let pg = Proc::new("postgres", &pg_host, "setpriv", pg_args, &dir);
        let nats_args = format!("-js -a {} -p 4222 -sd {}", nats_host.addr, dir.join("js").display());
        let nats =
            Proc::new("nats", &nats_host, "nats-server", nats_args.split(' ').map(str::to_owned).collect(), &dir);
        let pg_url = format!("host={} port=5432 user=postgres dbname=postgres connect_timeout=3", pg_host.addr);
        let config = rampart_tests::cluster::roomy_config("faults");
        let lone_host = net.host("m2");
        let lone = Proc::new("m2", &lone_host, bin, Vec::new(), &dir);
        let mut cluster = Cluster {
            pg,
            nats,
            markets: Vec::new(),
            lone,
            apis: Vec::new(),
            delivers: Vec::new(),
            client,
            pg_url,
            config,
            exits: Vec::new(),
            problems: Vec::new(),
            started: Instant::now(),
            dir,
            net,
        };
        cluster.start_nodes(bin);
        cluster
    }
}

impl Cluster {
    fn serve_args(&self, host: &Host, name: &str, role: &[&str]) -> Vec<String> {
        let (listen, data) = (format!("{}:{API_PORT}", host.addr), self.dir.join(name).display().to_string());
        let nats = format!("nats://{}:4222", self.nats.host.addr);
        let mut a = strings(&["serve", "--listen", &listen, "--data-dir", &data]);
        a.extend(strings(&["--sim-pairs", &pairs().to_string(), "--shards", "1", "--config", &self.config]));
        a.extend(strings(&["--postgres", &self.pg_url, "--nats", &nats]));
        a.extend(strings(role));
        a
    }

    fn start_nodes(&mut self, bin: &str) {
        self.pg.spawn();
        self.nats.spawn();
        let (pg, url) = (&self.pg, &self.pg_url);
        let what = || format!("PostgreSQL: {}", pg.log_tail(2_000));
        wait_for(what, Duration::from_secs(30), || Db::postgres(url).is_ok());
        let nats = format!("{}:4222", self.nats.host.addr);
        let what = || format!("NATS: {}", self.nats.log_tail(2_000));
        wait_for(what, Duration::from_secs(30), || std::net::TcpStream::connect(&nats).is_ok());
        for i in 0..2 {
            let (name, host) = (format!("m{i}"), self.net.host(&format!("m{i}")));
            let args = self.serve_args(&host, &name, &["--role", "market", "--partition", "0/2"]);
            self.markets.push(Proc::new(&name, &host, bin, args, &self.dir));
            let (name, host) = (format!("a{i}"), self.net.host(&format!("a{i}")));
            let args = self.serve_args(&host, &name, &["--role", "api", "--partitions", "2"]);
            self.apis.push(Proc::new(&name, &host, bin, args, &self.dir));
            let (name, host) = (format!("d{i}"), self.net.host(&format!("d{i}")));
            let nats = format!("nats://{}:4222", self.nats.host.addr);
            let listen = format!("{}:{DELIVER_PORT}", host.addr);
            let args = strings(&["deliver", "--postgres", &self.pg_url, "--nats", &nats, "--config", &self.config]);
            let args = [args, strings(&["--workers", "2", "--listen", &listen])].concat();
            self.delivers.push(Proc::new(&name, &host, bin, args, &self.dir));
        }
        self.lone.args = self.serve_args(&self.lone.host, "m2", &["--role", "market", "--partition", "1/2"]);
        self.markets[0].spawn();
        self.lone.spawn();
        self.wait_healthy(&self.markets[0].host, API_PORT);
        self.wait_healthy(&self.lone.host, API_PORT);
        for p in self.apis.iter_mut().chain(self.delivers.iter_mut()) {
            p.spawn();
        }
        for p in self.apis.iter().chain(&self.delivers) {
            let port = if p.name.starts_with('d') { DELIVER_PORT } else { API_PORT };
            self.wait_healthy(&p.host, port);
        }
        self.markets[1].spawn();
    }

    fn wait_healthy(&self, host: &Host, port: u16) {
        let url = format!("http://{}:{port}/healthz", host.addr);
        wait_for(|| url.clone(), Duration::from_secs(90), || crate::load::get(&url).is_ok_and(|(s, _)| s == 200));
    }

    /// Every process of the cluster.
    pub fn procs_mut(&mut self) -> impl Iterator<Item = &mut Proc> {
        let servers = [&mut self.pg, &mut self.nats].into_iter();
        let markets = self.markets.iter_mut().chain(std::iter::once(&mut self.lone));
        servers.chain(markets).chain(self.apis.iter_mut()).chain(self.delivers.iter_mut())
    }

    /// Starts again every process that exited by itself (not held down by a fault), keeping
    /// what it exited with.
    pub fn supervise(&mut self) {
        let at = self.started.elapsed().as_secs_f64();
        let mut exits = Vec::new();
        for p in self.procs_mut().filter(|p| !p.held) {
            if let Some(status) = p.exited() {
                exits.push((p.name.clone(), status, at));
                p.spawn();
            }
        }
        self.exits.extend(exits);
    }

    /// The market node of the first partition that says it owns it now.
    pub fn owner(&self) -> Option<usize> {
        self.markets.iter().position(|m| {
            let url = format!("http://{}:{API_PORT}/healthz", m.host.addr);
            crate::load::get(&url).is_ok_and(|(_, b)| b["cluster"]["owner"]["current"] == true)
        })
    }

    /// `http://<api node i>:8080`.
    pub fn api_base(&self, i: usize) -> String {
        format!("http://{}:{API_PORT}", self.apis[i].host.addr)
    }

    /// Whether every api node's replica is fresh: NATS connected and each partition's last
    /// snapshot younger than the api node's stale bound (`node::STALE_MS`, 3 s).
    pub fn reads_fresh(&self) -> bool {
        (0..self.apis.len()).all(|i| {
            crate::load::get(&format!("{}/healthz", self.api_base(i))).is_ok_and(|(_, b)| {
                let c = &b["cluster"];
                let parts = c["partitions"].as_array().cloned().unwrap_or_default();
                c["natsConnected"] == true
                    && !parts.is_empty()
                    && parts.iter().all(|p| p["snapshotAgeMs"].as_i64().is_some_and(|a| a < 3_000))
            })
        })
    }

    /// Whether every node answers `/healthz` 200 with status `ok` (the standby binds no port:
    /// it counts when it runs).
    pub fn all_healthy(&self) -> bool {
        let node = |p: &Proc, port: u16| {
            let url = format!("http://{}:{port}/healthz", p.host.addr);
            crate::load::get(&url).is_ok_and(|(s, b): (u16, Value)| s == 200 && b["status"] != "degraded")
        };
        let owner = self.owner();
        let markets =
            self.markets.iter().enumerate().all(|(i, m)| m.running() && (Some(i) != owner || node(m, API_PORT)));
        owner.is_some()
            && markets
            && node(&self.lone, API_PORT)
            && self.apis.iter().all(|p| node(p, API_PORT))
            && self.delivers.iter().all(|p| node(p, DELIVER_PORT))
    }

    /// The tails of every process's log, for a failure's message.
    pub fn logs(&mut self) -> String {
        self.procs_mut().map(|p| format!("--- {} ---\n{}\n", p.name, p.log_tail(3_000))).collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for p in self.procs_mut() {
            p.stop("-KILL");
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Polls `ready` every 100 ms for at most `bound`.
pub fn wait_for(what: impl Fn() -> String, bound: Duration, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + bound;
    while !ready() {
        assert!(Instant::now() < deadline, "{}: not ready after {bound:?}", what());
        thread::sleep(Duration::from_millis(100));
    }
}
