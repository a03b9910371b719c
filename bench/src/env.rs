//! One run's processes for the latency harness (`scenarios`, `streams`): the options, the
//! simulator and the service (one process, or the cluster's roles) started with a key of an
//! unlimited plan, the calls every scenario makes to them, and the histogram helpers.

use std::collections::HashMap;
use std::path::PathBuf;
use std::thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde_json::{json, Value};

use crate::harness::{self, Http, Proc, TempDir};

pub(crate) type Res<T> = Result<T, String>;

/// What to run.
#[derive(Clone, Debug)]
pub struct Opts {
    /// `quiet`, `burst`, `storm`, `http`, `writes` or `ingest`.
    pub scenario: String,
    /// The `rampart` binary.
    pub rampart: PathBuf,
    /// Where result files go.
    pub out: PathBuf,
    /// Simulated pairs.
    pub pairs: usize,
    /// Background alerts (quiet, burst; storm adds its own).
    pub alerts: usize,
    /// Measurement seconds (quiet; burst is 10 s; http per endpoint and writes per load, at most
    /// 10 s).
    pub secs: u64,
    /// Alerts fired at once in `storm`.
    pub storm_alerts: usize,
    /// Receivers in `storm` (the first hangs).
    pub storm_receivers: usize,
    /// `liquidations`: injection rounds (each one liquidation on every perpetual of the stormed
    /// venues).
    pub liq_rounds: usize,
    /// `quiet`, `burst`: derivatives alerts loaded besides `alerts` (`perp_load`).
    pub perp_alerts: usize,
    /// `storm` with the account's webhooks signed (`POST /v1/webhook-secret` before the alerts
    /// are made); every healthy delivery's signature is then verified after the run.
    pub signed: bool,
    /// Interval between two probes (quiet, burst).
    pub probe_every: Duration,
    /// Messages of the in-process ingest run.
    pub ingest_messages: usize,
    /// Where the service keeps its state: `sqlite` (the default), `postgres` (`--postgres`, on
    /// a PostgreSQL server the harness starts), or `cluster` (`--postgres --nats`, with two
    /// `rampart deliver` processes of two workers each sending the webhooks).
    pub backend: String,
    /// `cluster`, `roles`: worker threads of each of the two `rampart deliver` processes
    /// (`--workers`; 2 unless told).
    pub deliver_workers: usize,
    /// The command line, for the result file.
    pub command: String,
    /// `streams`: the stream connections opened.
    pub streams: usize,
    /// rampart's `--shards` (1 unless told, as every figure before issue #47 was taken).
    pub shards: usize,
    /// rampart's `--fronts`, passed only when given (older binaries do not know the flag; without
    /// it rampart takes its default, a quarter of the cores).
    pub fronts: Option<usize>,
    /// Threads of the HTTP load generator (`http`, `writes`; 2 unless told).
    pub load_threads: usize,
    /// The CPUs rampart's processes run on (`taskset -c`, e.g. `0-3`), and the `http` baseline's
    /// threads with them; `None`: wherever the scheduler puts them, beside the harness.
    pub rampart_cpus: Option<String>,
}

/// Starts `rampart args…` as [`harness::spawn`] does, on `o.rampart_cpus` when given.
fn spawn_rampart(o: &Opts, args: &[&str], wanted: &[&str], timeout: Duration) -> Res<(harness::Proc, Vec<String>)> {
    match &o.rampart_cpus {
        None => harness::spawn(&o.rampart, args, wanted, timeout),
        Some(cpus) => {
            let bin = o.rampart.to_str().ok_or("a rampart path that is not UTF-8")?;
            let pinned = [&["-c", cpus.as_str(), bin], args].concat();
            harness::spawn(std::path::Path::new("taskset"), &pinned, wanted, timeout)
        }
    }
}

/// The `--backend` values.
/// `cluster`: one `serve --nats` and two `rampart deliver`; `roles`: two market nodes
/// (partitions 0/2 and 1/2, `--shard-spin-us 0`), two api nodes (the scenario talks to the
/// first) and two `rampart deliver`.
pub const BACKENDS: [&str; 4] = ["sqlite", "postgres", "cluster", "roles"];

/// A fresh schema on the harness's PostgreSQL server (`rampart_testkit::pg::durable_server`:
/// default durability, like SQLite's `FULL` for creates); its connection string.
fn postgres_schema() -> String {
    let server = rampart_testkit::pg::durable_server();
    let schema = server.fresh_schema_name();
    let admin = rampart_store::db::Db::postgres(&server.admin_url()).expect("connect as admin");
    admin.batch(&format!("CREATE SCHEMA {schema}")).expect("a schema");
    server.url_in_schema(&schema)
}

/// The processes of one run.
pub(crate) struct Env {
    _sim_proc: Proc,
    pub(crate) srv_proc: Proc,
    /// `roles`: the market nodes and the second api node.
    _nodes: Vec<Proc>,
    /// `roles`: the second api node's base URL.
    pub(crate) api2: Option<String>,
    /// `rampart deliver` processes (`cluster`).
    _workers: Vec<Proc>,
    _dir: TempDir,
    /// Where the service keeps its state: its PostgreSQL URL, or its SQLite data directory.
    store: Result<String, PathBuf>,
    pub(crate) sim: Http,
    pub(crate) api: Http,
    /// `http://127.0.0.1:PORT` of the service.
    pub(crate) base: String,
    pub(crate) key: String,
}

const VENUES: [&str; 4] = ["binance", "bybit", "okx", "bitget"];

impl Env {
    pub(crate) fn start(o: &Opts) -> Res<Env> {
        let dir = TempDir::new(&o.scenario).map_err(|e| e.to_string())?;
        let pairs = o.pairs.to_string();
        let (sim_proc, found) = harness::spawn(
            &o.rampart,
            &["sim-venue", "--listen", "127.0.0.1:0", "--sim-pairs", &pairs, "--queue-messages-max", "65536"],
            &["sim-venue listening on "],
            Duration::from_secs(60),
        )?;
        let sim_url = found[0].clone();
        let ws = sim_url.replacen("http://", "ws://", 1);
        let mut cfg = String::from(
            "[plans.bench]\napi = true\nprice_alert_cap = 10000000\npct_alerts = true\nrepeat = true\nburst_per_min = 1000000000\ndaily_quota = 1000000000000\noperator = true\nstream_connections = 100000\n\n[webhooks]\nallow_private = true\n\n",
        );
        for v in VENUES {
            cfg.push_str(&format!(
                "[venues.{v}]\nrest = \"{sim_url}\"\nws = \"{ws}\"\nrest_weight_per_s = 100000\nconnects_per_s = 100\n\n"
            ));
        }
        let cfg_path = dir.0.join("rampart.toml");
        std::fs::write(&cfg_path, cfg).map_err(|e| e.to_string())?;
        let cfg_s = cfg_path.display().to_string();
        let data = dir.0.join("data").display().to_string();
        let postgres = (o.backend != "sqlite").then(postgres_schema);
        let store: Vec<&str> = match &postgres {
            None => vec!["--data-dir", &data],
            Some(url) => vec!["--postgres", url, "--data-dir", &data],
        };
        let out = std::process::Command::new(&o.rampart)
            .args(["keys", "create", "--plan", "bench", "--create", "--config", &cfg_s])
            .args(&store)
            .output()
            .map_err(|e| e.to_string())?;
        let key = String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or_default().trim().to_owned();
        if !out.status.success() || key.is_empty() {
            return Err(format!("keys create failed: {}", String::from_utf8_lossy(&out.stderr)));
        }
        let roles = o.backend == "roles";
        let nats = (o.backend == "cluster" || roles).then(|| rampart_testkit::nats::server().url());
        let shards = o.shards.to_string();
        let fronts = o.fronts.map(|n| n.to_string());
        let mut serve =
            vec!["serve", "--feed", "live", "--config", &cfg_s, "--listen", "127.0.0.1:0", "--shards", &shards];
        if let Some(f) = &fronts {
            serve.extend(["--fronts", f.as_str()]);
        }
        serve.extend(&store);
        if let Some(n) = &nats {
            serve.extend(["--nats", n.as_str()]);
        }
        let mut nodes = Vec::new();
        if roles {
            // The market nodes' shards do not spin before they park: every role shares this
            // host's cores (docs/design/cluster.md, "Running one"; perf/README.md, issue #59).
            for p in ["0/2", "1/2"] {
                let args = [serve.as_slice(), &["--role", "market", "--partition", p, "--shard-spin-us", "0"]].concat();
                nodes.push(spawn_rampart(o, &args, &["listening on "], Duration::from_secs(120))?.0);
            }
            serve.extend(["--role", "api", "--partitions", "2"]);
        }
        let (srv_proc, found) = spawn_rampart(o, &serve, &["listening on "], Duration::from_secs(120))?;
        let mut api2 = None;
        if roles {
            let (p, f) = spawn_rampart(o, &serve, &["listening on "], Duration::from_secs(120))?;
            nodes.push(p);
            api2 = Some(format!("http://{}", f[0]));
        }
        let mut workers = Vec::new();
        if let (Some(n), Some(url)) = (&nats, &postgres) {
            let threads = o.deliver_workers.to_string();
            for _ in 0..2 {
                let args = [
                    "deliver",
                    "--postgres",
                    url,
                    "--nats",
                    n,
                    "--config",
                    &cfg_s,
                    "--workers",
                    &threads,
                    "--listen",
                    "127.0.0.1:0",
                ];
                workers.push(spawn_rampart(o, &args, &["delivering with "], Duration::from_secs(30))?.0);
            }
        }
        let base = format!("http://{}", found[0]);
        let env = Env {
            _sim_proc: sim_proc,
            srv_proc,
            _nodes: nodes,
            api2,
            _workers: workers,
            store: postgres.clone().ok_or_else(|| dir.0.join("data")),
            _dir: dir,
            sim: Http::new(&format!("{sim_url}/sim"), None),
            api: Http::new(&base, Some(&key)),
            base,
            key,
        };
        env.wait_ready(Duration::from_secs(180))?;
        Ok(env)
    }

    fn health(&self) -> Res<Value> {
        Http::new(&self.base, None).get("/healthz")
    }

    /// Ends a scenario's result: the service's `/healthz` after the run, and the `/version` of
    /// the binary measured (its build's revision: the harness's own `commit` is the checkout it
    /// runs in, which need not be the binary's).
    pub(crate) fn describe(&self, result: &mut Value) -> Res<()> {
        result["health"] = self.health()?;
        result["rampartVersion"] = Http::new(&self.base, None).get("/version")?;
        Ok(())
    }

    fn wait_ready(&self, limit: Duration) -> Res<()> {
        let deadline = Instant::now() + limit;
        loop {
            if let Ok(h) = self.health() {
                let all_ok = h["exchanges"].as_array().is_some_and(|a| a.iter().all(|e| e["state"] == "ok"));
                if h["status"] == "ok" && all_ok {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                return Err(format!("not ready in {limit:?}: {:?}", self.health()));
            }
            thread::sleep(Duration::from_millis(250));
        }
    }

    /// Messages applied so far by venue, from `/healthz`.
    pub(crate) fn applied(&self) -> Res<u64> {
        let h = self.health()?;
        Ok(h["exchanges"].as_array().map_or(0, |a| a.iter().map(|e| e["messages"].as_u64().unwrap_or(0)).sum()))
    }

    /// Messages the simulator has sent (book messages and trades) over every venue.
    pub(crate) fn sent(&self) -> Res<u64> {
        let s = self.sim.get("/stats")?;
        let mut n = 0;
        for v in VENUES {
            n += s[v]["messages_sent"].as_u64().or_else(|| s["venues"][v]["messages_sent"].as_u64()).unwrap_or(0);
        }
        Ok(n)
    }

    pub(crate) fn binance_symbols(&self) -> Res<Vec<String>> {
        let v = self.api.get("/v1/exchanges/binance/symbols")?;
        Ok(v["data"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|s| s["quote"] == "USDT")
                    .filter_map(|s| s["symbol"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default())
    }

    pub(crate) fn price(&self, symbol: &str) -> Res<f64> {
        let v = self.api.get(&format!("/v1/symbols/{symbol}?exchange=binance"))?;
        v["data"]["price"].as_f64().filter(|p| *p > 0.0).ok_or_else(|| format!("{symbol}: no price: {v}"))
    }

    /// Creates `n` alerts spread over the Binance pairs, far from their prices (they never fire:
    /// they are the load every trade is checked against). Returns the creation rate.
    pub(crate) fn load_alerts(&self, n: usize) -> Res<f64> {
        let symbols = self.binance_symbols()?;
        let mut prices = Vec::with_capacity(symbols.len());
        for s in &symbols {
            prices.push((s.clone(), self.price(s)?));
        }
        let started = Instant::now();
        let threads = 4;
        let mut handles = Vec::new();
        for t in 0..threads {
            let api = self.api.clone();
            let prices = prices.clone();
            handles.push(thread::spawn(move || -> Res<()> {
                for i in (t..n).step_by(threads) {
                    let (s, p) = &prices[i % prices.len()];
                    let (dir, level) = if i % 2 == 0 {
                        ("above", p * (1.5 + (i % 97) as f64 / 100.0))
                    } else {
                        ("below", p * (0.5 - (i % 89) as f64 / 400.0))
                    };
                    let body =
                        json!({"exchange":"binance","symbol":s,"type":"price","direction":dir,"price":sig(level)});
                    api.post("/v1/alerts", &body)?;
                }
                Ok(())
            }));
        }
        for h in handles {
            h.join().map_err(|_| "alert loader panicked".to_owned())??;
        }
        Ok(n as f64 / started.elapsed().as_secs_f64())
    }

    /// Where a storm's deliveries spent their time, from the service's own rows: for each
    /// webhook delivery of the firings at `trigger_ms`, milliseconds from the trade to the
    /// writer's commit, to its hand-over to the firings stream (a cluster's publisher:
    /// `published_ms`), to its first attempt's taking (a worker's fetch of its message, one
    /// process's read of its row: `attempts.pulled_ms`), to that attempt's start (its end less
    /// its latency: the request's first byte, give or take the connect), to its end, and to its
    /// settling (`done_ms`, when the outcome was recorded).
    pub(crate) fn stages(&self, trigger_ms: i64) -> Res<Value> {
        let db = self.db()?;
        // The attempts grouped once (no index has them by delivery: a subquery per delivery read
        // them all each time, ~26 s of one PostgreSQL core after a 10 000-firing storm), and the
        // tables' statistics taken first (filled within seconds, they were still those of empty
        // tables: PostgreSQL planned the join as a loop over every attempt per delivery, 23 s;
        // SQLite plans it by the keys without them).
        if db.is_postgres() {
            db.batch("ANALYZE outbox; ANALYZE attempts").map_err(|e| e.to_string())?;
        }
        let sql = "WITH firsts AS (
                     SELECT a.outbox_id, MIN(a.id) AS first_id, MIN(a.at_ms - COALESCE(a.latency_ms, 0)) AS sent,
                            MIN(a.at_ms) AS ended
                     FROM attempts a JOIN outbox o ON o.id = a.outbox_id
                     WHERE o.trigger_ms = ?1 AND o.channel = 'webhook' GROUP BY a.outbox_id)
                   SELECT o.committed_ms, o.published_ms, f.pulled_ms, firsts.sent, firsts.ended, o.done_ms
                   FROM outbox o LEFT JOIN firsts ON firsts.outbox_id = o.id LEFT JOIN attempts f ON f.id = firsts.first_id
                   WHERE o.trigger_ms = ?1 AND o.channel = 'webhook'";
        type Times = [Option<i64>; 6];
        let rows: Vec<Times> = db
            .query(sql, &[rampart_store::db::Val::I64(trigger_ms)], |r| {
                Ok([r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?])
            })
            .map_err(|e| e.to_string())?;
        let mut out = json!({"deliveries": rows.len()});
        let names =
            ["toCommittedMs", "toPublishedMs", "toPulledMs", "toFirstSendMs", "toFirstAttemptMs", "toSettledMs"];
        for (i, name) in names.into_iter().enumerate() {
            let mut h = hist();
            for r in &rows {
                if let Some(at) = r[i] {
                    let _ = h.record((at - trigger_ms).max(1) as u64);
                }
            }
            out[name] = pct(&h);
        }
        // How the deliveries were taken: rounds of one process's reads, or workers' fetches
        // (one `pulled_ms` each, give or take two in the same millisecond).
        let mut pulls: HashMap<i64, u64> = HashMap::new();
        rows.iter().filter_map(|r| r[2]).for_each(|at| *pulls.entry(at).or_default() += 1);
        let mut per_pull = hist();
        for &n in pulls.values() {
            let _ = per_pull.record(n);
        }
        out["pulls"] = json!({"count": pulls.len(), "rowsPerPull": pct(&per_pull)});
        out["commits"] = commits(&rows, trigger_ms);
        Ok(out)
    }

    /// The service's database, read as it runs.
    fn db(&self) -> Res<rampart_store::db::Db> {
        match &self.store {
            Ok(url) => rampart_store::db::Db::postgres(url),
            Err(dir) => rusqlite::Connection::open(dir.join("rampart.db"))
                .map(rampart_store::db::Db::sqlite)
                .map_err(rampart_store::store::StoreError::from),
        }
        .map_err(|e| e.to_string())
    }

    /// When the writer committed each webhook body of each alert (`outbox.committed_ms`), by
    /// alert, oldest first: the bodies' spacing as they left the writer, before delivery's work.
    pub(crate) fn body_commits(&self) -> Res<HashMap<i64, Vec<i64>>> {
        let sql = "SELECT alert_id, committed_ms FROM outbox WHERE channel = 'webhook' AND committed_ms IS NOT NULL
                   ORDER BY alert_id, committed_ms";
        let rows: Vec<(i64, i64)> =
            self.db()?.query(sql, &[], |r| Ok((r.get(0)?, r.get(1)?))).map_err(|e| e.to_string())?;
        let mut out: HashMap<i64, Vec<i64>> = HashMap::new();
        for (alert, at) in rows {
            out.entry(alert).or_default().push(at);
        }
        Ok(out)
    }

    pub(crate) fn reset_latency(&self) -> Res<()> {
        self.api.delete("/v1/debug/latency").map(|_| ())
    }

    /// (venue send → decision, socket read → decision), µs. Waits for the shards' next merge
    /// of their histograms first.
    pub(crate) fn latency(&self) -> Res<(Value, Value)> {
        thread::sleep(Duration::from_millis(2 * rampart_state::LATENCY_PUBLISH_MS as u64));
        let v = self.api.get("/v1/debug/latency")?;
        Ok((v["tickToDecisionUs"].clone(), v["readToDecisionUs"].clone()))
    }
}

/// `x` to 6 significant digits and at most 8 decimal places (the API keeps prices exactly and
/// refuses more decimals than the finest venue price step).
pub(crate) fn sig(x: f64) -> f64 {
    if x <= 0.0 {
        return x;
    }
    let scale = 10f64.powi((5 - x.log10().floor() as i32).min(8));
    (x * scale).round() / scale
}

pub(crate) fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid histogram bounds")
}

/// The stages by the writer's commit (one `committed_ms` each, give or take two commits in the
/// same millisecond), in commit order: each commit's rows and, for each later stage, its first,
/// median and last row in milliseconds from the trade, so a stage that waits for a whole commit
/// (or for the commit before) shows as a step between them.
fn commits(rows: &[[Option<i64>; 6]], trigger_ms: i64) -> Value {
    let mut by_commit: std::collections::BTreeMap<i64, Vec<&[Option<i64>; 6]>> = Default::default();
    for r in rows {
        if let Some(at) = r[0] {
            by_commit.entry(at).or_default().push(r);
        }
    }
    let spread = |of: &[&[Option<i64>; 6]], i: usize| {
        let mut v: Vec<i64> = of.iter().filter_map(|r| r[i]).map(|at| at - trigger_ms).collect();
        v.sort_unstable();
        match (v.first(), v.get(v.len() / 2), v.last()) {
            (Some(a), Some(m), Some(z)) => json!([a, m, z]),
            _ => Value::Null,
        }
    };
    let commits: Vec<Value> = by_commit
        .iter()
        .map(|(at, of)| {
            json!({"atMs": at - trigger_ms, "rows": of.len(), "published": spread(of, 1), "pulled": spread(of, 2),
                   "firstSend": spread(of, 3), "settled": spread(of, 5)})
        })
        .collect();
    Value::Array(commits)
}

pub(crate) fn pct(h: &Histogram<u64>) -> Value {
    json!({"count": h.len(), "p50": h.value_at_quantile(0.5), "p90": h.value_at_quantile(0.9), "p99": h.value_at_quantile(0.99), "p999": h.value_at_quantile(0.999), "max": h.max()})
}
