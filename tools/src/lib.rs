//! The `rampart` command line: `serve` (the default) wires the engine, shards, storage and the
//! HTTP front together; `keys` manages API keys in the same data directory; `sim-venue` runs a
//! local simulator of the four venues' real protocols ([`simvenue`]).
//!
//! Settings come from flags, then `RAMPART_<NAME>` environment variables, then the TOML file
//! given by `--config`, then the defaults of `decisions.md` §1.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use arc_swap::ArcSwap;
use clap::{Args, Parser, Subcommand};
use rampart_cluster::health::WorkerStats;
use rampart_cluster::publisher::Publisher;
use rampart_cluster::worker::DeliveryWorker;
use rampart_cluster::BusNames;
use rampart_delivery::{Delivery, DeliveryConfig};
use rampart_engine::sim::{self, SimConfig};
use rampart_engine::{Registry, Venue};
use rampart_net::api::front::{self, Front, FrontConfig, FrontStorage};
use rampart_net::api::keys::KeyWatcher;
use rampart_net::api::metrics::{Metrics, Sources as MetricsSources};
use rampart_net::board::BoardThread;
use rampart_net::config::{FileConfig, Plans};
use rampart_net::site_alerts::market::MarketAlerts;
use rampart_net::site_alerts::watch::SiteAlertWatcher;
use rampart_shard::live::LiveFeed;
use rampart_shard::{ShardConfig, ShardSet};
use rampart_state::board::Board;
use rampart_state::clock::{self, SharedClock};
use rampart_state::shutdown::Shutdown;
use rampart_state::{Command as ShardCommand, EventQueue};
use rampart_store::storage::Checkpointer;
use rampart_store::storage::{StorageHealth, StorageThread};
use rampart_store::store::{Fence, Revoked, Store, StoreLocation};
use rampart_store::text::Texts;
use rampart_store::writer::{OnCommitted, Writer, WriterHooks};
use rampart_venue::listing::ListingChange;
use rampart_venue::rest::{self, Rest, RestBooks};
use rampart_venue::VenueSettings;

pub use rampart_simvenue as simvenue;
mod node;
mod site_alerts;
pub mod starting;

/// The package version and the git revision built (`tools/build.rs`).
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("RAMPART_REVISION"), ")");

#[derive(Parser, Debug)]
#[command(name = "rampart", version = VERSION, about = "Market structure, order-book walls and alerts at tick speed")]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the service (the default).
    Serve(Box<ServeArgs>),
    /// Manage API keys.
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
        #[command(flatten)]
        common: KeysArgs,
    },
    /// Manage the site's density and market alerts of an account (named by one of its keys).
    SiteAlerts {
        #[command(subcommand)]
        command: site_alerts::SiteAlertsCommand,
        #[command(flatten)]
        common: KeysArgs,
    },
    /// Run delivery workers: send the firings `serve --nats` hands to the NATS firings stream,
    /// recording each outcome in the shared PostgreSQL database.
    Deliver(DeliverArgs),
    /// Run a local simulator of the venues' REST and WebSocket protocols (Binance, Bybit, OKX,
    /// Bitget) over the simulated market, with fault injection and a control API under /sim/.
    SimVenue(SimVenueArgs),
}

/// `rampart deliver` settings.
#[derive(Args, Debug, Clone)]
struct DeliverArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// The NATS server with the firings stream.
    #[arg(long, env = "RAMPART_NATS_URL")]
    nats: String,
    /// Worker threads, each with its own database and NATS connections (1 to 64).
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Where `/healthz` and `/metrics` of this process are served (port 0 picks a free one; the
    /// bound address is printed).
    #[arg(long, env = "RAMPART_DELIVER_LISTEN", default_value = "127.0.0.1:9466")]
    listen: String,
}

#[derive(Args, Debug, Clone)]
struct SimVenueArgs {
    /// Address to listen on; port 0 picks a free one (the bound address is printed).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: String,
    /// Seed of the simulated market.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Pairs in the simulated market.
    #[arg(long, default_value_t = 500)]
    sim_pairs: usize,
    /// Venues to serve, comma separated.
    #[arg(long, default_value = "binance,bybit,okx,bitget")]
    venues: String,
    /// Skip an update id / break the sequence chain once every N book messages per venue.
    #[arg(long, value_name = "N", default_value_t = 0)]
    fault_gap_every: u64,
    /// A wrong OKX/Bitget checksum once every N book updates per venue.
    #[arg(long, value_name = "N", default_value_t = 0)]
    fault_checksum_every: u64,
    /// A stale Binance REST depth snapshot once every N depth requests.
    #[arg(long, value_name = "N", default_value_t = 0)]
    fault_stale_snapshot_every: u64,
    /// Drop every WebSocket connection every S seconds.
    #[arg(long, value_name = "S", default_value_t = 0)]
    fault_disconnect_every_s: u64,
    /// Delist SYMBOL (on one venue, or on every venue listing it) SECONDS after start. Repeatable.
    #[arg(long, value_name = "[VENUE:]SYMBOL@SECONDS")]
    delist: Vec<String>,
    /// OKX `books` messages carry checksum 0.
    #[arg(long)]
    okx_checksum_zero: bool,
    /// Bitget `books` messages carry no checksum field.
    #[arg(long)]
    bitget_no_checksum: bool,
    /// Binance server ping interval, seconds.
    #[arg(long, default_value_t = 20)]
    ping_interval_s: u64,
    /// OKX idle close (4004) after this many seconds without a client message or data push.
    #[arg(long, default_value_t = 30)]
    idle_close_s: u64,
    /// OKX idle heartbeat on `books` after this many seconds without a book change.
    #[arg(long, default_value_t = 60)]
    okx_heartbeat_s: u64,
    /// Messages a WebSocket connection may have queued before it is closed as a slow consumer.
    #[arg(long, default_value_t = 8_192)]
    queue_messages_max: usize,
    /// Open TCP connections at most; more are closed at accept.
    #[arg(long, default_value_t = 4_096)]
    connections_max: usize,
    /// Mean time between two steps of one pair, ms (default 500): the message rate.
    #[arg(long)]
    step_ms: Option<i64>,
}

#[derive(Args, Debug, Clone, Default)]
struct CommonArgs {
    /// TOML configuration file.
    #[arg(long, env = "RAMPART_CONFIG")]
    config: Option<PathBuf>,
    /// Data directory (SQLite database) [default: ./data].
    #[arg(long, env = "RAMPART_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Keep accounts, keys, alerts, inbox and outbox in this PostgreSQL database instead of
    /// SQLite (`postgres://user:password@host:port/db` or `host=… user=… dbname=…`; never
    /// logged).
    #[arg(long, env = "RAMPART_POSTGRES_URL")]
    postgres: Option<String>,
}

/// The `keys` commands' settings: the same file and directory as `serve`, accepted after the
/// subcommand too (`keys list --data-dir D`).
#[derive(Args, Debug, Clone, Default)]
struct KeysArgs {
    /// TOML configuration file (for its plans).
    #[arg(long, env = "RAMPART_CONFIG", global = true)]
    config: Option<PathBuf>,
    /// Data directory (SQLite database) [default: ./data].
    #[arg(long, env = "RAMPART_DATA_DIR", global = true)]
    data_dir: Option<PathBuf>,
    /// The PostgreSQL database instead of SQLite (as `serve --postgres`).
    #[arg(long, env = "RAMPART_POSTGRES_URL", global = true)]
    postgres: Option<String>,
    /// Create the database if the data directory has none (otherwise that is an error, so a
    /// mistyped --data-dir is not taken for a new, empty one).
    #[arg(long, global = true)]
    create: bool,
}

#[derive(Args, Debug, Clone, Default)]
struct ServeArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Hand every firing's deliveries to the NATS JetStream firings stream at this URL instead
    /// of sending them here; `rampart deliver` workers send them (needs --postgres, the
    /// database the workers share).
    #[arg(long, env = "RAMPART_NATS_URL")]
    nats: Option<String>,
    /// The process's part in a cluster: single (the whole service, the default), market (owns
    /// the books of --partition I/N, publishes their snapshots on NATS, serves no API) or api
    /// (serves the API from the market nodes' snapshots; --partitions N). Both cluster roles
    /// need --postgres and --nats.
    #[arg(long, env = "RAMPART_ROLE")]
    role: Option<String>,
    /// `--role market`: this node's part of the pairs, `I/N` (every market node of a cluster
    /// has the same N and its own I).
    #[arg(long, env = "RAMPART_PARTITION")]
    partition: Option<String>,
    /// `--role api`: how many partitions the market nodes split the pairs into (their N).
    #[arg(long, env = "RAMPART_PARTITIONS")]
    partitions: Option<u16>,
    /// Address to listen on [default: 127.0.0.1:8080].
    #[arg(long, env = "RAMPART_LISTEN")]
    listen: Option<String>,
    /// Serve `/metrics` only on this address (e.g. 127.0.0.1:9464) instead of the API's
    /// [default: on the API's address].
    #[arg(long, env = "RAMPART_METRICS_LISTEN")]
    metrics_listen: Option<String>,
    /// Market data source: sim or live [default: sim].
    #[arg(long, env = "RAMPART_FEED")]
    feed: Option<String>,
    /// Venues to follow, comma separated [default: binance,bybit,okx,bitget].
    #[arg(long, env = "RAMPART_VENUES")]
    venues: Option<String>,
    /// Number of shards [default: cores minus one, at least 1].
    #[arg(long, env = "RAMPART_SHARDS")]
    shards: Option<usize>,
    /// Pairs in the simulated market [default: 500].
    #[arg(long, env = "RAMPART_SIM_PAIRS")]
    sim_pairs: Option<usize>,
    /// Mean milliseconds between two moves of one simulated pair [default: 500]; larger makes
    /// a quieter market (tests that compare served figures use it).
    #[arg(long, env = "RAMPART_SIM_STEP_MS")]
    sim_step_ms: Option<i64>,
    /// Seed of the simulated market [default: 42].
    #[arg(long, env = "RAMPART_SEED")]
    seed: Option<u64>,
    /// Simulated delisting: `SYMBOL@SECONDS` delists SYMBOL on every venue that many seconds
    /// after the server is ready (its alerts are removed and their owners notified). Repeatable.
    #[arg(long, value_name = "SYMBOL@SECONDS")]
    sim_delist: Vec<String>,
    /// Fault injection for the shutdown test: shards never finish stopping.
    #[arg(long, hide = true)]
    fault_hang_shard_stop: bool,
    /// Log line format on stderr: text or json [default: text]. `RUST_LOG` filters (default info).
    #[arg(long, env = "RAMPART_LOG_FORMAT")]
    log_format: Option<String>,
    /// Shard CPU placement: auto (free CPUs of the allowed set, shared with no other rampart
    /// process; unpinned when none is free), none, or a list such as 0,2,4-6 [default: auto].
    #[arg(long, env = "RAMPART_CPUS")]
    cpus: Option<String>,
    /// Capacity of each shard's event queue (tests shrink it to exercise backpressure).
    #[arg(long, hide = true, default_value_t = rampart_state::EVENTS_MAX)]
    events_max: usize,
}

#[derive(Subcommand, Debug)]
enum KeysCommand {
    /// Create an account on a plan with a new key; prints the key as the last line.
    Create {
        /// Plan name (free, developer, developer-lite, or one from the config file).
        #[arg(long)]
        plan: String,
        /// Free-text label.
        #[arg(long)]
        label: Option<String>,
    },
    /// List keys: id, label, plan, created, revoked.
    List,
    /// Revoke a key by id; a running server refuses it within its next key poll (20 ms).
    Revoke {
        /// Key id, as `keys list` shows it.
        id: i64,
    },
}

/// Logs go to stderr through `tracing`: one line per event with its time (UTC), level and
/// target, filtered by `RUST_LOG` (default `info`), as text or as JSON objects
/// (`--log-format json`). Events of crates that log through `log` (glommio's stall detector)
/// are taken in too.
fn init_logging(format: Option<&str>) -> Result<()> {
    let (filter, bad) = match tracing_subscriber::EnvFilter::try_from_default_env() {
        Ok(f) => (f, None),
        Err(e) => (tracing_subscriber::EnvFilter::new("info"), std::env::var("RUST_LOG").ok().map(|v| (v, e))),
    };
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(false);
    // `set_default`-style install without tracing-subscriber's own `log` bridge: ours is below.
    let installed = match format.unwrap_or("text") {
        "text" => tracing::subscriber::set_global_default(builder.finish()),
        "json" => tracing::subscriber::set_global_default(builder.json().finish()),
        other => bail!("invalid --log-format '{other}'. Allowed: text, json"),
    };
    installed.map_err(|e| anyhow::anyhow!("logging: {e}"))?;
    log::set_boxed_logger(Box::new(LogBridge(tracing_log::LogTracer::new())))
        .map_err(|e| anyhow::anyhow!("logging: {e}"))?;
    log::set_max_level(log::LevelFilter::Trace);
    if let Some((value, e)) = bad.filter(|(v, _)| !v.is_empty()) {
        tracing::warn!("RUST_LOG={value:?} is not a valid filter ({e}); logging at info");
    }
    Ok(())
}

/// Forwards `log` records to `tracing`, with one change: glommio's stall reports (a task queue
/// of a shard that ran past its budget) lose their multi-line backtrace, so each stall is one
/// warning line (`[stall-detector -- executor N] task queue Q went over-budget: ...`).
struct LogBridge(tracing_log::LogTracer);

/// Where glommio's stall report turns into its backtrace.
const STALL_BACKTRACE_MARK: &str = ". Backtrace:";

impl log::Log for LogBridge {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        self.0.enabled(metadata)
    }

    fn log(&self, record: &log::Record<'_>) {
        if !record.target().starts_with("glommio::executor::stall") {
            return self.0.log(record);
        }
        let head = stall_summary(record.args());
        self.0.log(&log::Record::builder().args(format_args!("{head}")).metadata(record.metadata().clone()).build());
    }

    fn flush(&self) {
        self.0.flush();
    }
}

/// A stall report up to its backtrace. The formatting is stopped there (the writer refuses more),
/// so the backtrace's symbols are never resolved just to be dropped.
fn stall_summary(args: &std::fmt::Arguments<'_>) -> String {
    struct UpToTrace(String);
    impl std::fmt::Write for UpToTrace {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0.push_str(s);
            match self.0.contains(STALL_BACKTRACE_MARK) {
                true => Err(std::fmt::Error),
                false => Ok(()),
            }
        }
    }
    let mut w = UpToTrace(String::with_capacity(160));
    // An error here is the writer stopping at the backtrace, as intended.
    let _ = std::fmt::write(&mut w, *args);
    let mut s = w.0;
    if let Some(i) = s.find(STALL_BACKTRACE_MARK) {
        s.truncate(i);
    }
    s
}

/// Runs the command line; returns the process exit code.
pub fn cli_main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        None => init_logging(cli.serve.log_format.as_deref()).and_then(|()| serve(cli.serve)),
        Some(Command::Serve(args)) => init_logging(args.log_format.as_deref()).and_then(|()| serve(*args)),
        Some(Command::Keys { command, common }) => keys(command, common),
        Some(Command::SiteAlerts { command, common }) => {
            open_store(&common).and_then(|(store, plans)| site_alerts::run(command, &store, &plans))
        }
        Some(Command::SimVenue(args)) => init_logging(None).and_then(|()| sim_venue(args)),
        Some(Command::Deliver(args)) => init_logging(None).and_then(|()| deliver(args)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rampart: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// The `--config` file (none: empty), with nested keys from `RAMPART_A__B` variables.
fn load_file(common: &CommonArgs) -> Result<FileConfig> {
    let (text, source) = match &common.config {
        None => (String::new(), "settings".to_owned()),
        Some(path) => (
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?,
            path.display().to_string(),
        ),
    };
    FileConfig::parse_with_env(&text, std::env::vars()).map_err(|e| anyhow::anyhow!("{source}: {e}"))
}

fn data_dir(common: &CommonArgs, file: &FileConfig) -> PathBuf {
    common
        .data_dir
        .clone()
        .or_else(|| file.data_dir.as_ref().map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("./data"))
}

/// The store: PostgreSQL when a URL is given, else SQLite in the data directory.
fn store_location(common: &CommonArgs, file: &FileConfig) -> StoreLocation {
    match &common.postgres {
        Some(url) => StoreLocation::Postgres(url.clone()),
        None => StoreLocation::Sqlite(data_dir(common, file)),
    }
}

fn plans(file: &FileConfig) -> Plans {
    let mut p = Plans::default();
    p.merge(file.plans.clone());
    p
}

/// The store and plans the `keys` and `site-alerts` commands work on.
fn open_store(args: &KeysArgs) -> Result<(Store, Plans)> {
    let common =
        CommonArgs { config: args.config.clone(), data_dir: args.data_dir.clone(), postgres: args.postgres.clone() };
    let file = load_file(&common)?;
    let at = store_location(&common, &file);
    if !args.create && !at.exists() {
        bail!("no rampart database in {}; check --data-dir, or pass --create to start a new one", at.describe());
    }
    let store = at.open().with_context(|| format!("opening {}", at.describe()))?;
    Ok((store, plans(&file)))
}

fn keys(command: KeysCommand, args: KeysArgs) -> Result<()> {
    let (mut store, plans) = open_store(&args)?;
    match command {
        KeysCommand::Create { plan, label } => {
            if plans.get(&plan).is_none() {
                bail!("unknown plan '{plan}'. Allowed: {}", plans.allowed());
            }
            let k = store.create_account_with_key(&plan, label.as_deref(), clock::wall_ms())?;
            keys_applied(&store)?;
            println!("created key {} (account {}, plan {plan})", k.id, k.account_id);
            println!("{}", k.key);
        }
        KeysCommand::List => {
            println!("id\tlabel\tplan\tcreated\trevoked");
            for k in store.list_keys()? {
                println!(
                    "{}\t{}\t{}\t{}\t{}",
                    k.id,
                    k.label.as_deref().unwrap_or("-"),
                    k.plan,
                    clock::iso8601(k.created_ms),
                    k.revoked_ms.map_or_else(|| "-".to_owned(), clock::iso8601)
                );
            }
        }
        KeysCommand::Revoke { id } => match store.revoke_key(id, clock::wall_ms())? {
            Revoked::Now => {
                keys_applied(&store)?;
                println!("revoked key {id}")
            }
            Revoked::Already => println!("key {id} was already revoked"),
            Revoked::NotFound => bail!("no key with id {id}"),
        },
    }
    Ok(())
}

/// Longest `rampart keys create|revoke` waits for the running servers to apply its change.
const KEYS_APPLIED_WAIT: Duration = Duration::from_secs(3);

/// Returns once every running server's key table holds the change just committed, so the key
/// works (or is refused) on its very next request (`decisions.md` §1); says so on stderr when a
/// server had not applied it within [`KEYS_APPLIED_WAIT`] (it does at its next poll).
fn keys_applied(store: &Store) -> Result<()> {
    let version = store.keys_version()?;
    let behind = store.wait_keys_seen(version, KEYS_APPLIED_WAIT, &clock::wall_ms)?;
    if behind > 0 {
        eprintln!(
            "note: {behind} running server(s) had not applied the change within {} s; they apply it at their next look",
            KEYS_APPLIED_WAIT.as_secs()
        );
    }
    Ok(())
}

fn parse_venues(list: &str) -> Result<Vec<Venue>> {
    let mut out = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let v = Venue::parse(name).with_context(|| format!("invalid venue '{name}'. Allowed: {}", Venue::ALLOWED))?;
        if !out.contains(&v) {
            out.push(v);
        }
    }
    if out.is_empty() {
        bail!("no venues given. Allowed: {}", Venue::ALLOWED);
    }
    out.sort();
    Ok(out)
}

fn sim_venue(args: SimVenueArgs) -> Result<()> {
    let mut delist = Vec::new();
    for d in &args.delist {
        delist.push(simvenue::DelistPlan::parse(d).map_err(|e| anyhow::anyhow!(e))?);
    }
    let config = simvenue::Config {
        listen: args.listen,
        seed: args.seed,
        sim_pairs: args.sim_pairs,
        venues: parse_venues(&args.venues)?,
        faults: simvenue::Faults {
            gap_every: args.fault_gap_every,
            checksum_every: args.fault_checksum_every,
            stale_snapshot_every: args.fault_stale_snapshot_every,
            disconnect_every_s: args.fault_disconnect_every_s,
        },
        delist,
        okx_checksum_zero: args.okx_checksum_zero,
        bitget_checksum: !args.bitget_no_checksum,
        ping_interval_s: args.ping_interval_s,
        idle_close_s: args.idle_close_s,
        okx_heartbeat_s: args.okx_heartbeat_s,
        queue_messages_max: args.queue_messages_max,
        connections_max: args.connections_max,
        step_ms: args.step_ms,
    };
    let handle = simvenue::start(config)?;
    {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        writeln!(out, "sim-venue listening on {}", handle.url())?;
        out.flush()?;
    }
    wait_for_stop_signal()?;
    tracing::info!("sim-venue: shutting down");
    handle.stop();
    Ok(())
}

/// Blocks until SIGTERM or Ctrl-C.
fn wait_for_stop_signal() -> Result<()> {
    tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(stop_signal())
}

/// Until SIGTERM or Ctrl-C.
async fn stop_signal() -> Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    Ok(())
}

/// `rampart deliver`: worker threads on the firings stream until SIGTERM or Ctrl-C.
fn deliver(args: DeliverArgs) -> Result<()> {
    let file = load_file(&args.common)?;
    let Some(url) = args.common.postgres.clone() else {
        bail!("deliver needs --postgres: the database `serve --postgres --nats` records firings in");
    };
    if !(1..=64).contains(&args.workers) {
        bail!("--workers must be 1 to 64");
    }
    let at = StoreLocation::Postgres(url);
    let config = DeliveryConfig {
        allow_private: file.webhooks.allow_private,
        telegram: telegram(&file)?,
        ..DeliveryConfig::default()
    };
    let clock = clock::system();
    let listener = bind(&args.listen).with_context(|| format!("binding {}", args.listen))?;
    let stats = Arc::new(WorkerStats::new(args.workers));
    let mut workers = Vec::with_capacity(args.workers);
    for _ in 0..args.workers {
        let store = at.open().with_context(|| format!("opening {}", at.describe()))?.for_background()?;
        let (nats, names, config, clock, stats) =
            (args.nats.clone(), BusNames::default(), config.clone(), clock.clone(), stats.clone());
        workers.push(DeliveryWorker::start(store, nats, names, config, clock, stats)?);
    }
    let _probe =
        storage_probe(at.open().with_context(|| format!("opening {}", at.describe()))?, stats.clone(), clock.clone())?;
    {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "delivering with {} workers; /healthz and /metrics on {}",
            workers.len(),
            listener.local_addr()?
        )?;
        out.flush()?;
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        tokio::select! {
            () = rampart_cluster::health::serve(listener, stats) => {}
            stopped = stop_signal() => stopped?,
        }
        Ok::<(), anyhow::Error>(())
    })?;
    tracing::info!("deliver: stopping");
    // A worker waiting on a NATS server that is gone may not see its stop flag soon; the
    // process does not wait for it longer than this (firings in hand go to other workers after
    // the ack wait; every recorded outcome is already committed).
    let (stopped, wait) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(workers);
        let _ = stopped.send(());
    });
    if wait.recv_timeout(Duration::from_secs(5)).is_err() {
        tracing::warn!("deliver: workers did not stop within 5 s; exiting anyway");
    }
    Ok(())
}

/// `rampart deliver`'s check of PostgreSQL: a write every second, so `/healthz` says when the
/// database is away even while no firing needs it (the workers' own calls count too).
fn storage_probe(
    mut store: Store,
    stats: Arc<WorkerStats>,
    clock: SharedClock,
) -> std::io::Result<rampart_state::shutdown::StoppableThread> {
    rampart_state::shutdown::StoppableThread::spawn("deliver-probe", move |stop| {
        let mut was_ok = true;
        while !stop.load(std::sync::atomic::Ordering::Acquire) {
            let now = clock.now_ms();
            let result = store.probe_write(now);
            if result.is_ok() != was_ok {
                match &result {
                    Ok(()) => tracing::info!("deliver: storage answers again"),
                    Err(e) => tracing::warn!("deliver: storage cannot be written: {e}"),
                }
                was_ok = result.is_ok();
            }
            stats.storage(result.is_ok(), now);
            std::thread::sleep(Duration::from_secs(1));
        }
    })
}

/// Settings of one `serve` run, after flags, environment, file and defaults are merged.
struct ServeSettings {
    listen: String,
    unauthenticated_per_min: usize,
    stream_bounds: rampart_net::stream::Bounds,
    metrics_listen: Option<String>,
    store: StoreLocation,
    /// The firings stream (`--nats`): deliveries go there instead of being sent here.
    nats: Option<String>,
    /// Single process, or a cluster's market or api node.
    role: node::NodeRole,
    venues: Vec<Venue>,
    shards: usize,
    sim_pairs: usize,
    sim_step_ms: i64,
    seed: u64,
    plans: Plans,
    walls_min_ratio: f64,
    allow_private: bool,
    /// `webhooks.previous_secret_s`: how long a rotated-out signing secret signs.
    previous_secret_s: u32,
    sim_delist: Vec<(String, u64)>,
    fault_hang_shard_stop: bool,
    events_max: usize,
    cpus: rampart_shard::cpus::CpuPolicy,
    /// `--feed live`: each venue's endpoints and limits.
    live: Option<Vec<VenueSettings>>,
    verify_checksums: bool,
    /// `[channels.telegram]`: the bot firings are also sent through.
    telegram: Option<rampart_delivery::telegram::TelegramChannel>,
}

/// The Telegram bot of `[channels.telegram]`, checked (`None` without the section).
fn telegram(file: &FileConfig) -> Result<Option<rampart_delivery::telegram::TelegramChannel>> {
    let Some(t) = &file.channels.telegram else { return Ok(None) };
    let channel = rampart_delivery::telegram::TelegramChannel::new(t.base_url.as_deref(), &t.token)
        .map_err(|e| anyhow::anyhow!(e))?;
    tracing::info!("Telegram channel on, through {}", channel.base_url());
    Ok(Some(channel))
}

/// `[streams]`, checked against its limits.
fn stream_bounds(file: &FileConfig) -> Result<rampart_net::stream::Bounds> {
    use rampart_net::stream::{Bounds, SUBSCRIPTIONS_LIMIT, UNSENT_BYTES_LIMIT, UNSENT_BYTES_MIN};
    let d = Bounds::default();
    let b = Bounds {
        subscriptions_max: file.streams.subscriptions_max.unwrap_or(d.subscriptions_max),
        unsent_bytes_max: file.streams.unsent_bytes_max.unwrap_or(d.unsent_bytes_max),
    };
    if !(1..=SUBSCRIPTIONS_LIMIT).contains(&b.subscriptions_max) {
        bail!("streams.subscriptions_max must be between 1 and {SUBSCRIPTIONS_LIMIT}, not {}", b.subscriptions_max);
    }
    if !(UNSENT_BYTES_MIN..=UNSENT_BYTES_LIMIT).contains(&b.unsent_bytes_max) {
        bail!(
            "streams.unsent_bytes_max must be between {UNSENT_BYTES_MIN} and {UNSENT_BYTES_LIMIT}, not {}",
            b.unsent_bytes_max
        );
    }
    Ok(b)
}

fn settings(args: ServeArgs) -> Result<ServeSettings> {
    let file = load_file(&args.common)?;
    let role = node::NodeRole::parse(args.role.as_deref(), args.partition.as_deref(), args.partitions)?;
    if role != node::NodeRole::Single && (args.nats.is_none() || args.common.postgres.is_none()) {
        bail!("--role market and --role api need --postgres and --nats: the cluster's database and NATS server");
    }
    let feed = args.feed.clone().or(file.feed.clone()).unwrap_or_else(|| "sim".to_owned());
    if feed != "sim" && feed != "live" {
        bail!("invalid feed '{feed}'. Allowed: sim, live");
    }
    let cores = std::thread::available_parallelism().map(|c| c.get()).unwrap_or(1);
    let shards = args.shards.or(file.shards).unwrap_or(cores.saturating_sub(1)).max(1);
    if shards > 256 {
        bail!("--shards {shards} is more than 256");
    }
    let sim_step_ms = args.sim_step_ms.or(file.sim_step_ms).unwrap_or(SimConfig::default().step_interval_ms);
    if !(1..=600_000).contains(&sim_step_ms) {
        bail!("--sim-step-ms must be between 1 and 600000");
    }
    let sim_pairs = args.sim_pairs.or(file.sim_pairs).unwrap_or(500);
    if !(1..=5_000).contains(&sim_pairs) {
        bail!("--sim-pairs must be between 1 and 5000");
    }
    let unauthenticated_per_min =
        file.limits.unauthenticated_per_min.unwrap_or(rampart_net::api::limit::UNAUTH_PER_WINDOW);
    if !(1..=rampart_net::api::limit::UNAUTH_PER_WINDOW_MAX).contains(&unauthenticated_per_min) {
        bail!(
            "limits.unauthenticated_per_min must be between 1 and {}, not {unauthenticated_per_min}",
            rampart_net::api::limit::UNAUTH_PER_WINDOW_MAX
        );
    }
    let stream_bounds = stream_bounds(&file)?;
    let walls_min_ratio = file.walls.min_ratio.unwrap_or(f64::from(rampart_engine::wall::MIN_RATIO_DEFAULT));
    if !(walls_min_ratio > 1.0 && walls_min_ratio.is_finite()) {
        bail!("walls.min_ratio must be a number above 1, not {walls_min_ratio}");
    }
    if file.webhooks.allow_private {
        tracing::warn!("WARNING: webhooks.allow_private = true: webhooks may target private and loopback addresses. Local testing only.");
    }
    let mut sim_delist = Vec::new();
    for d in &args.sim_delist {
        let parsed = d.split_once('@').and_then(|(s, t)| Some((s.to_ascii_uppercase(), t.parse::<u64>().ok()?)));
        match parsed {
            Some(x) if !x.0.is_empty() => sim_delist.push(x),
            _ => bail!("--sim-delist takes SYMBOL@SECONDS, not '{d}'"),
        }
    }
    let venues =
        parse_venues(&args.venues.or(file.venue_list()).unwrap_or_else(|| "binance,bybit,okx,bitget".to_owned()))?;
    let mut verify_checksums = true;
    let live = if feed == "live" {
        let mut out = Vec::with_capacity(venues.len());
        for v in &venues {
            let section = file.venue_section(v.as_str()).map_err(|e| anyhow::anyhow!(e))?;
            verify_checksums &= section.verify_checksum.unwrap_or(true);
            out.push(section.settings(*v).map_err(|e| anyhow::anyhow!(e))?);
        }
        Some(out)
    } else {
        None
    };
    Ok(ServeSettings {
        listen: args.listen.or(file.listen.clone()).unwrap_or_else(|| "127.0.0.1:8080".to_owned()),
        metrics_listen: args.metrics_listen.or(file.metrics.listen.clone()),
        unauthenticated_per_min,
        stream_bounds,
        store: store_location(&args.common, &file),
        nats: match (&args.nats, &args.common.postgres) {
            (Some(_), None) => {
                bail!("--nats needs --postgres: the delivery workers read the outbox from that database")
            }
            (nats, _) => nats.clone(),
        },
        role,
        venues,
        live,
        verify_checksums,
        shards,
        sim_pairs,
        sim_step_ms,
        seed: args.seed.or(file.seed).unwrap_or(42),
        plans: plans(&file),
        walls_min_ratio,
        allow_private: file.webhooks.allow_private,
        previous_secret_s: file.webhooks.previous_secret_s.unwrap_or(rampart_net::config::PREVIOUS_SECRET_S),
        telegram: telegram(&file)?,
        sim_delist,
        fault_hang_shard_stop: args.fault_hang_shard_stop,
        events_max: args.events_max,
        cpus: rampart_shard::cpus::CpuPolicy::parse(args.cpus.as_deref().unwrap_or("auto"))?,
    })
}

/// Prints the first key (only when the database has no account yet and `first_key`, which a
/// market node, serving no API, does not ask for; made after the port is bound, so a start that
/// cannot bind loses none) and the bound addresses.
fn announce(
    store: &mut Store,
    listener: &std::net::TcpListener,
    metrics: Option<&std::net::TcpListener>,
    now_ms: i64,
    first_key: bool,
) -> Result<()> {
    use std::io::Write as _;
    if first_key && store.account_count()? == 0 {
        let k = store.create_account_with_key("developer", Some("first start"), now_ms)?;
        println!("api key: {}", k.key);
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "listening on {}", listener.local_addr()?)?;
    if let Some(m) = metrics {
        writeln!(out, "metrics on {}", m.local_addr()?)?;
    }
    out.flush()?;
    Ok(())
}

/// Logs what the server serves, once started.
fn log_feed(s: &ServeSettings, shards: &ShardSet, store: &Store) {
    tracing::info!(
        "feed {}, {} books on {} venues, {} shards, data in {}",
        if s.live.is_some() { "live" } else { "sim" },
        shards.shared().registry().len(),
        s.venues.len(),
        shards.len(),
        if store.is_postgres() { s.store.describe() } else { store.path().display().to_string() }
    );
}

/// The board the front answers metrics, rankings and `/v1/market` from, and the thread that
/// rebuilds it every second.
/// The site's market alerts run on each build and leave on `market_events`.
/// A market node evaluates no market alert: its board holds only its partition's books.
fn start_board(
    shards: &ShardSet,
    clock: &SharedClock,
    market_events: Option<Arc<EventQueue>>,
) -> Result<(Arc<ArcSwap<Board>>, BoardThread)> {
    let board = Arc::new(ArcSwap::from_pointee(Board::empty()));
    let market = market_events.map(MarketAlerts::new);
    let thread = BoardThread::start(shards.shared().clone(), board.clone(), clock.clone(), market)?;
    Ok((board, thread))
}

/// A non-blocking listener on `address`.
fn bind(address: &str) -> std::io::Result<std::net::TcpListener> {
    let listener = std::net::TcpListener::bind(address)?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

fn serve(args: ServeArgs) -> Result<()> {
    let s = settings(args)?;
    if let node::NodeRole::Api(partitions) = s.role {
        return node::serve_api(s, partitions);
    }
    // The shards' io_uring needs locked memory: refused here, before anything is printed.
    rampart_shard::ensure_memlock(s.shards)?;
    // One server per data directory (or PostgreSQL database; a market node: one per
    // partition), checked before anything is printed or opened.
    let _lock = s.role.lock(&s)?;
    // The one clock every part of the process reads.
    let clock = clock::system();
    // A market node on PostgreSQL waits here, as a standby, until it owns its partition.
    let owner = s.role.own(&s, &clock)?;
    let (front_config, descriptors) = FrontConfig::default().fit_descriptors();
    tracing::info!(
        "descriptor limit {descriptors}: up to {} HTTP connections, {} per address",
        front_config.connections_max,
        front_config.connections_per_address_max
    );
    let mut store = s.store.open().with_context(|| format!("opening {}", s.store.describe()))?;
    // The port is bound before the first key is made: a start that cannot bind loses no key.
    // While the venues are listed it answers 503 "starting".
    let listener = bind(&s.listen).with_context(|| format!("binding {}", s.listen))?;
    let metrics_listener = match &s.metrics_listen {
        Some(a) => Some(bind(a).with_context(|| format!("binding the metrics address {a}"))?),
        None => None,
    };
    announce(&mut store, &listener, metrics_listener.as_ref(), clock.now_ms(), s.role == node::NodeRole::Single)?;
    // Shard CPUs, claimed for the life of the process.
    let lock_dir = std::env::var_os("XDG_RUNTIME_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
    let claims = rampart_shard::cpus::choose(&s.cpus, s.shards, &rampart_shard::cpus::allowed(), &lock_dir);
    log_cpus(&s, &claims.cpus);
    let (shards, rest) = start_feed(&s, &store, &listener, &claims.cpus, &clock)?;
    log_feed(&s, &shards, &store);
    let persistence = Persistence::start(&s, &shards, &clock, owner.as_ref().map(|o| o.ownership.fence()))?;
    start_sim_delistings(&s, &shards)?;
    let watch_venues = match s.live.is_some() {
        true => Some(rampart_venue::watch::VenueWatch::start(shards.shared().clone(), s.venues.clone())?),
        false => None,
    };
    let links = match s.role {
        node::NodeRole::Market(p) => {
            let stats = persistence.writer.stats.clone();
            Some(node::MarketLinks::start(&s, p, &shards, &clock, owner.as_ref(), stats)?)
        }
        _ => None,
    };
    let metrics = persistence.metrics(&s, &shards, &clock, links.as_ref().map(|l| l.health.clone()));
    let (storage_thread, storage_join) = StorageThread::start(s.store.open()?)?;
    let market_alerts = (s.role == node::NodeRole::Single).then(|| persistence.market_events.clone());
    let (board, board_thread) = start_board(&shards, &clock, market_alerts)?;
    let front = Front::new(
        shards.shared().clone(),
        shards.commands(),
        s.venues.clone(),
        if s.live.is_some() { "live" } else { "sim" },
        s.plans.clone(),
        FrontStorage {
            keys: KeyWatcher::start(store, clock.clone())?,
            thread: storage_thread,
            health: persistence.health.clone(),
        },
        s.allow_private,
    )
    .with_writer_stats(persistence.writer.stats.clone());
    let front = configured(front, &s, metrics, metrics_listener.is_some(), &clock, board);
    let front = Rc::new(match &links {
        Some(l) => front.with_cluster(l.health.clone()),
        None => front,
    });
    let (served, watch) = serve_until_stopped(listener, metrics_listener, front, front_config, board_thread)?;
    if let Some(rest) = rest {
        watch.stage("stopping the venue REST thread");
        rest.stop();
    }
    if let Some(w) = watch_venues {
        watch.stage("stopping the venue watch");
        w.stop();
    }
    watch.stage("stopping the storage thread");
    storage_join.join();
    if let Some(l) = links {
        watch.stage("stopping the cluster threads");
        l.stop();
    }
    watch.stage("stopping the shards");
    shards.stop();
    persistence.stop(&watch);
    if let Some(o) = owner {
        // Last: every firing of this node is committed before a standby takes over.
        watch.stage("releasing the partition");
        drop(o);
    }
    watch.finish();
    served
}

/// The front's settings every role shares.
fn configured(
    front: Front,
    s: &ServeSettings,
    metrics: Arc<Metrics>,
    metrics_apart: bool,
    clock: &SharedClock,
    board: Arc<ArcSwap<Board>>,
) -> Front {
    front
        .with_metrics(metrics, metrics_apart)
        .with_build(env!("CARGO_PKG_VERSION"), env!("RAMPART_REVISION"))
        .with_unauthenticated_per_min(s.unauthenticated_per_min)
        .with_stream_bounds(s.stream_bounds)
        .with_clock(clock.clone())
        .with_board(board)
        .with_telegram(s.telegram.is_some())
        .with_previous_secret_ms(i64::from(s.previous_secret_s) * 1000)
}

/// Serves HTTP until a stop signal, then starts the stop sequence with its first stage: the
/// connections (whose tasks hold the front, and with it the storage thread's handle) and the
/// board thread end. Every later stage is told to stop in a way that wakes it; whatever does not
/// finish within the grace period is named in the log and the process ends anyway.
fn serve_until_stopped(
    listener: std::net::TcpListener,
    metrics_listener: Option<std::net::TcpListener>,
    front: Rc<Front>,
    config: FrontConfig,
    board_thread: BoardThread,
) -> Result<(Result<()>, Shutdown)> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let local = tokio::task::LocalSet::new();
    let served = local.block_on(&runtime, run_front(listener, metrics_listener, front, config));
    tracing::info!("shutting down");
    let watch = Shutdown::start_for_process()?;
    watch.stage("closing HTTP connections");
    drop(local);
    drop(board_thread);
    drop(runtime);
    Ok((served, watch))
}

/// Logs where each shard runs.
fn log_cpus(s: &ServeSettings, cpus: &[Option<usize>]) {
    for (i, cpu) in cpus.iter().enumerate() {
        match cpu {
            Some(c) => tracing::info!("shard {i} on CPU {c}"),
            None => tracing::info!(
                "shard {i} unpinned ({})",
                match s.cpus {
                    rampart_shard::cpus::CpuPolicy::None => "--cpus none",
                    _ => "every allowed CPU is taken by another rampart process",
                }
            ),
        }
    }
}

/// Lists the venues (live; the port answers 503 "starting" meanwhile) or builds the simulated
/// market, loads every active alert onto its book, and starts the shards (and, live, the REST
/// thread).
fn start_feed(
    s: &ServeSettings,
    store: &Store,
    listener: &std::net::TcpListener,
    cpus: &[Option<usize>],
    clock: &SharedClock,
) -> Result<(ShardSet, Option<Rest>)> {
    let shard_config = ShardConfig {
        shards: s.shards,
        depth_levels_max: 1_000,
        bars_max: 512,
        sim: SimConfig { seed: s.seed, step_interval_ms: s.sim_step_ms, ..SimConfig::default() },
        poll_interval: Duration::from_millis(1),
        walls_min_ratio: s.walls_min_ratio,
        fault_hang_on_stop: s.fault_hang_shard_stop,
        events_max: s.events_max,
        cpus: cpus.to_vec(),
        clock: clock.clone(),
        partition: s.role.partition(),
    };
    let Some(venues) = &s.live else {
        let universe = Arc::new(sim::universe(s.seed, s.sim_pairs));
        let registry = Arc::new(
            Registry::new(sim::instruments(&universe, &s.venues)).map_err(|e| anyhow::anyhow!("registry: {e:?}"))?,
        );
        let alerts = load_alerts(store, &registry, s.role.partition())?;
        return Ok((ShardSet::start_sim(&shard_config, registry, universe, alerts)?, None));
    };
    let tls = rampart_outbound::tls_config(&[]);
    let starting = starting::Starting::start(listener.try_clone()?)?;
    let listed = list_live(venues, tls.clone());
    starting.finish()?;
    let (registry, natives) = listed?;
    let registry = Arc::new(registry);
    let alerts = load_alerts(store, &registry, s.role.partition())?;
    let natives = Arc::new(arc_swap::ArcSwap::from_pointee(natives));
    let n = shard_config.shards.max(1);
    let mut rest = Rest::new(n);
    let feed = LiveFeed {
        venues: venues.clone(),
        natives: natives.clone(),
        tls: tls.clone(),
        rest: (0..n).map(|i| rest.handle(i)).collect(),
        rest_stats: rest.stats.clone(),
        verify_checksums: s.verify_checksums,
        pacers: Arc::new(Default::default()),
    };
    let books_now = Arc::new(arc_swap::ArcSwap::new(registry));
    let shards = ShardSet::start_live(&shard_config, books_now.clone(), feed, alerts)?;
    let on_listing = listing_hook(shards.commands(), shards.shared().clone(), natives.clone(), s.store.open()?);
    let shared = shards.shared().clone();
    let grow = Box::new(move |grown| shared.grow(grown));
    let books = RestBooks { registry: books_now, natives, bars_max: shard_config.bars_max };
    rest.start(venues.clone(), books, tls, on_listing, grow)?;
    Ok((shards, Some(rest)))
}

/// Every active alert on a served book, to go onto its shard before the shard reports ready;
/// the others stay in storage (evaluated once their venue lists the pair).
fn load_alerts(
    store: &Store,
    registry: &Registry,
    partition: rampart_state::partition::Partition,
) -> Result<Vec<(rampart_engine::BookId, rampart_engine::alert::AlertSpec)>> {
    let mut alerts = Vec::new();
    let mut orphaned = 0;
    for row in store.active_alerts()?.into_iter().filter(|r| partition.owns(&r.symbol)) {
        match (registry.find(row.exchange, &row.symbol), row.spec()) {
            (Some(book), Some(spec)) => alerts.push((book, spec)),
            _ => orphaned += 1,
        }
    }
    if orphaned > 0 {
        tracing::warn!(
            "{orphaned} active alerts are on pairs or venues not served now; kept in storage, evaluated once \
             their venue lists the pair"
        );
    }
    tracing::info!("{} active alerts loaded", alerts.len());
    Ok(alerts)
}

/// The threads that write: webhook delivery, the firing writer (which wakes delivery) and the
/// checkpointer, with the storage health they report to; and the site alert watcher, whose set
/// the writer's firings change.
/// Where a server's deliveries go.
enum Sending {
    /// Sent by this process.
    Here(Delivery),
    /// Handed to the firings stream (`--nats`).
    Stream(Publisher),
}

struct Persistence {
    health: Arc<StorageHealth>,
    webhooks: rampart_delivery::metrics::WebhookMetrics,
    /// The sender here, or (`--nats`) the publisher to the firings stream.
    delivery: Sending,
    writer: Writer,
    checkpointer: Checkpointer,
    /// The board thread's queue of market alert firings, drained by the writer.
    market_events: Arc<EventQueue>,
    /// Keeps the active site alerts published for the shards and the board thread.
    site_alerts: SiteAlertWatcher,
}

impl Persistence {
    fn start(s: &ServeSettings, shards: &ShardSet, clock: &SharedClock, fence: Option<Fence>) -> Result<Persistence> {
        // The board thread's queue of market alert firings, drained like a shard's.
        let market_events = Arc::new(EventQueue::new(rampart_state::EVENTS_MAX));
        let health = Arc::new(StorageHealth::default());
        let webhooks = rampart_delivery::metrics::WebhookMetrics::default();
        let delivery_config = DeliveryConfig {
            allow_private: s.allow_private,
            health: Some(health.clone()),
            metrics: Some(webhooks.clone()),
            telegram: s.telegram.clone(),
            ..DeliveryConfig::default()
        };
        let (delivery, wake) = match &s.nats {
            None => {
                let d = Delivery::start(s.store.open()?.for_background()?, delivery_config, clock.clone())?;
                let wake = d.waker();
                (Sending::Here(d), wake)
            }
            Some(url) => {
                let store = s.store.open()?.for_background()?;
                let wake = Arc::new(tokio::sync::Notify::new());
                let p = Publisher::start(store, url.clone(), BusNames::default(), clock.clone(), wake.clone())?;
                tracing::info!("deliveries go to the NATS firings stream; `rampart deliver` sends them");
                (Sending::Stream(p), wake)
            }
        };
        // With Telegram on, any firing may have queued a message (the account's chat is looked
        // up in the transaction); site firings and delistings are found by the sender's poll.
        let telegram = s.telegram.is_some();
        let on_committed: OnCommitted = Box::new(move |done| {
            if telegram || done.iter().any(|(row, _)| row.webhook_url.is_some()) {
                wake.notify_one();
            }
        });
        // Alerts end at their expiry where their shard runs (a market node: its partition's),
        // and leave the shard at once.
        let partition = s.role.partition();
        let (commands, shared) = (shards.commands(), shards.shared().clone());
        let hooks = WriterHooks {
            owns: Box::new(move |row| partition.owns(&row.symbol)),
            on_expired: Box::new(move |rows| {
                for row in rows {
                    if let Some(book) = shared.registry().find(row.exchange, &row.symbol) {
                        let _ = commands.send(book, ShardCommand::RemoveAlert { book, id: row.id as u64 });
                    }
                }
            }),
            ..WriterHooks::new(Box::new(Texts), on_committed)
        };
        // A market node's writer writes only while its partition is this node's (`owner`).
        let writer_store = s.store.open()?.for_background()?.with_telegram(telegram);
        let writer = Writer::start(
            match fence {
                Some(f) => writer_store.with_fence(f),
                None => writer_store,
            },
            shards.event_queues().into_iter().chain([market_events.clone()]).collect(),
            shards.shared().books.clone(),
            health.clone(),
            clock.clone(),
            hooks,
        )?;
        let period = Duration::from_secs(1);
        let checkpointer = Checkpointer::start(s.store.open()?, period, health.clone(), clock.clone())?;
        let site_alerts = SiteAlertWatcher::start(s.store.open()?, shards.shared().clone())?;
        Ok(Persistence { health, webhooks, delivery, writer, checkpointer, market_events, site_alerts })
    }

    /// The process's metrics over the shards and this persistence side.
    fn metrics(
        &self,
        s: &ServeSettings,
        shards: &ShardSet,
        clock: &SharedClock,
        cluster: Option<Arc<rampart_cluster::node::NodeHealth>>,
    ) -> Arc<Metrics> {
        let sources = MetricsSources {
            shared: shards.shared().clone(),
            venues: s.venues.clone(),
            commands: shards.command_queues(),
            events: shards.event_queues(),
            delivery: match &self.delivery {
                Sending::Here(d) => d.stats.clone(),
                Sending::Stream(_) => Arc::default(),
            },
            storage: self.health.clone(),
            started_ms: clock.now_ms(),
            clock: clock.clone(),
            cluster,
        };
        Arc::new(Metrics::new(sources, &self.webhooks))
    }

    /// Stops the writer, then delivery, then the checkpointer (after the shards).
    fn stop(self, watch: &Shutdown) {
        drop(self.site_alerts);
        watch.stage("stopping the firing writer");
        self.writer.stop();
        watch.stage("stopping webhook delivery");
        match self.delivery {
            Sending::Here(d) => d.stop(),
            Sending::Stream(p) => drop(p),
        }
        watch.stage("stopping the checkpoint thread");
        drop(self.checkpointer);
    }
}

/// `--sim-delist SYMBOL@SECONDS`: a thread per delisting that waits for readiness, then the
/// given time, then delists the pair on every venue.
fn start_sim_delistings(s: &ServeSettings, shards: &ShardSet) -> Result<()> {
    for (symbol, after_s) in s.sim_delist.clone() {
        let (shared, commands) = (shards.shared().clone(), shards.commands());
        std::thread::Builder::new().name("sim-delist".into()).spawn(move || {
            while !shared.ready() {
                std::thread::sleep(Duration::from_millis(50));
            }
            std::thread::sleep(Duration::from_secs(after_s));
            for venue in Venue::ALL {
                let Some(book) = shared.registry().find(venue, &symbol) else { continue };
                send_waiting(&commands, book, ShardCommand::Delist { book });
                tracing::info!("simulated delisting of {symbol} on {venue}");
            }
        })?;
    }
    Ok(())
}

/// Queues a command for a book's shard, waiting out a full queue (it drains every millisecond).
fn send_waiting(commands: &rampart_state::Commands, book: rampart_engine::BookId, mut cmd: ShardCommand) {
    while let Err(back) = commands.send(book, cmd) {
        cmd = back;
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Serves HTTP until SIGTERM or SIGINT. SIGHUP (a closed terminal, a reload habit) is logged
/// and otherwise ignored: settings are read once at start, so there is nothing to reload, and
/// hanging up must not stop the service.
async fn run_front(
    listener: std::net::TcpListener,
    metrics: Option<std::net::TcpListener>,
    front: Rc<Front>,
    config: FrontConfig,
) -> Result<()> {
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let (stop_metrics, metrics_stopped) = tokio::sync::oneshot::channel::<()>();
    if let Some(m) = metrics {
        let (m, front, config) = (tokio::net::TcpListener::from_std(m)?, front.clone(), config.clone());
        tokio::task::spawn_local(async move {
            front::serve(m, front, config, front::Role::Metrics, async {
                let _ = metrics_stopped.await;
            })
            .await;
        });
    }
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut hup = signal(SignalKind::hangup())?;
    let shutdown = async move {
        loop {
            tokio::select! {
                _ = term.recv() => break,
                _ = tokio::signal::ctrl_c() => break,
                _ = hup.recv() => tracing::info!("SIGHUP: settings are read only at start, nothing to reload; still running"),
            }
        }
    };
    front::serve(listener, front, config, front::Role::Api, shutdown).await;
    let _ = stop_metrics.send(());
    Ok(())
}

/// What the REST thread's listing refreshes do to the shards: delist, list again, or add a
/// book (with the stored active alerts on it, e.g. those of a venue that joined late). Runs on
/// the REST thread; a full command queue is waited out (it drains every millisecond).
fn listing_hook(
    commands: rampart_state::Commands,
    shared: Arc<rampart_state::Shared>,
    natives: Arc<arc_swap::ArcSwap<Vec<String>>>,
    store: Store,
) -> rest::OnListing {
    let store = std::sync::Mutex::new(store);
    let send = move |book, cmd| send_waiting(&commands, book, cmd);
    Box::new(move |change| match change {
        ListingChange::Delisted(book) => send(book, ShardCommand::Delist { book }),
        ListingChange::Relisted(book) => send(book, ShardCommand::Relist { book }),
        ListingChange::Added(book) => {
            let registry = shared.registry();
            let ins = registry.get(book);
            // Read while the book is still pending (no client can add an alert to it yet), so
            // no alert is handed over twice.
            let rows = match store.lock().map_err(|_| ()).and_then(|s| s.active_alerts().map_err(|_| ())) {
                Ok(rows) => rows,
                Err(()) => {
                    tracing::error!("{} {}: stored alerts could not be read", ins.venue, ins.symbol);
                    Vec::new()
                }
            };
            let native = natives.load().get(book.index()).cloned().unwrap_or_default();
            send(book, ShardCommand::AddBook { book, native });
            for row in rows.iter().filter(|r| r.exchange == ins.venue && r.symbol == ins.symbol) {
                if let Some(spec) = row.spec() {
                    send(book, ShardCommand::AddAlert { book, spec });
                }
            }
        }
    })
}

/// Lists the venues' instruments for the live feed: the registry of every listed, not delisted
/// instrument, and each book's native name. A venue that does not answer within
/// [`rest::LISTING_START_TIMEOUT`] (or lists nothing) is left out and reported; while no venue
/// at all could be listed, every venue is asked again (the port answers 503 "starting").
fn list_live(venues: &[VenueSettings], tls: Option<Arc<rustls::ClientConfig>>) -> Result<(Registry, Vec<String>)> {
    let mut instruments = Vec::new();
    let mut natives = Vec::new();
    for round in 1u64.. {
        for (v, list) in venues.iter().zip(rest::list_venues(venues, tls.clone())) {
            let served = list.map(|l| {
                l.into_iter()
                    .filter(|l| l.instrument.status != rampart_engine::instrument::Status::Delisted)
                    .collect::<Vec<_>>()
            });
            match served {
                Ok(list) if !list.is_empty() => {
                    tracing::info!("{}: {} pairs listed", v.venue.as_str(), list.len());
                    for l in list {
                        instruments.push(l.instrument);
                        natives.push(l.native);
                    }
                }
                Ok(_) => {
                    tracing::warn!("{}: the listing has no pairs; venue not served until restart", v.venue.as_str())
                }
                Err(e) => {
                    tracing::warn!("{}: listing failed, venue not served until restart: {e}", v.venue.as_str())
                }
            }
        }
        if !instruments.is_empty() {
            break;
        }
        tracing::warn!("--feed live: no venue could be listed (round {round}); asking again");
    }
    let registry = Registry::new(instruments).map_err(|e| anyhow::anyhow!("registry: {e:?}"))?;
    Ok((registry, natives))
}

/// The data directory a serve run would use (for tools and tests).
pub fn default_data_dir() -> &'static Path {
    Path::new("./data")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    /// Stands for glommio's backtrace: formatting it fails the test.
    struct Trace;

    impl std::fmt::Debug for Trace {
        fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            panic!("the backtrace was formatted")
        }
    }

    #[test]
    fn a_stall_report_is_cut_before_its_backtrace_which_is_never_formatted() {
        let (over, budget) = (Duration::from_millis(25), Duration::from_millis(110));
        let line = super::stall_summary(&format_args!(
            "[stall-detector -- executor 1] task queue default went over-budget: {over:#?} (budget: {budget:#?}). Backtrace: {:#?}",
            Trace
        ));
        assert_eq!(line, "[stall-detector -- executor 1] task queue default went over-budget: 25ms (budget: 110ms)");
        assert_eq!(super::stall_summary(&format_args!("no trace here")), "no trace here");
    }

    #[test]
    fn stream_bounds_come_from_the_file_within_their_limits() {
        let file = |text: &str| crate::FileConfig::parse_with_env(text, std::iter::empty()).expect("a config");
        let d = super::stream_bounds(&file("")).expect("defaults");
        assert_eq!(d, rampart_net::stream::Bounds::default());
        assert_eq!((d.subscriptions_max, d.unsent_bytes_max), (500, 4 << 20));
        let set = super::stream_bounds(&file("[streams]\nsubscriptions_max = 20\nunsent_bytes_max = 262144\n"));
        let set = set.expect("in range");
        assert_eq!((set.subscriptions_max, set.outbox_bytes_max(), set.socket_bytes_max()), (20, 65_536, 131_072));
        for (text, says) in [
            ("[streams]\nsubscriptions_max = 0\n", "streams.subscriptions_max must be between 1 and 10000, not 0"),
            (
                "[streams]\nunsent_bytes_max = 1024\n",
                "streams.unsent_bytes_max must be between 262144 and 268435456, not 1024",
            ),
        ] {
            let e = super::stream_bounds(&file(text)).expect_err("out of range");
            assert_eq!(e.to_string(), says);
        }
        let unknown = crate::FileConfig::parse_with_env("[streams]\nsubscriptions = 5\n", std::iter::empty());
        assert!(unknown.is_err(), "an unknown key is refused");
    }
}
