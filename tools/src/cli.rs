//! The command line's definitions (clap): the subcommands and the flags of each, with their
//! environment variables and defaults. What each command does lives in its own module.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::site_alerts::SiteAlertsCommand;

/// The package version and the git revision built (`tools/build.rs`).
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("RAMPART_REVISION"), ")");

#[derive(Parser, Debug)]
#[command(name = "rampart", version = VERSION, about = "Market structure, order-book walls and alerts at tick speed")]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Option<Command>,
    #[command(flatten)]
    pub(crate) serve: ServeArgs,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
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
        command: SiteAlertsCommand,
        #[command(flatten)]
        common: KeysArgs,
    },
    /// Run delivery workers: send the firings `serve --nats` hands to the NATS firings stream,
    /// recording each outcome in the shared PostgreSQL database.
    Deliver(DeliverArgs),
    /// Run a local simulator of the venues' REST and WebSocket protocols (Binance, Bybit, OKX,
    /// Bitget) over the simulated market, with fault injection and a control API under /sim/.
    SimVenue(SimVenueArgs),
    /// Write a consistent copy of the SQLite database to FILE while the server runs (its
    /// writes go on); restore by stopping the server, putting the file in place as
    /// `<data dir>/rampart.db` (no `-wal` or `-shm` beside it) and starting it.
    Backup {
        /// The backup file to write (must not exist).
        file: std::path::PathBuf,
        #[command(flatten)]
        common: KeysArgs,
    },
}

/// `rampart deliver` settings.
#[derive(Args, Debug, Clone)]
pub(crate) struct DeliverArgs {
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    /// The NATS server with the firings stream.
    #[arg(long, env = "RAMPART_NATS_URL")]
    pub(crate) nats: String,
    /// Worker threads, each with its own database and NATS connections (1 to 64).
    #[arg(long, default_value_t = 2)]
    pub(crate) workers: usize,
    /// Where `/healthz` and `/metrics` of this process are served (port 0 picks a free one; the
    /// bound address is printed).
    #[arg(long, env = "RAMPART_DELIVER_LISTEN", default_value = "127.0.0.1:9466")]
    pub(crate) listen: String,
}

#[derive(Args, Debug, Clone)]
pub(crate) struct SimVenueArgs {
    /// Address to listen on; port 0 picks a free one (the bound address is printed).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub(crate) listen: String,
    /// Seed of the simulated market.
    #[arg(long, default_value_t = 42)]
    pub(crate) seed: u64,
    /// Pairs in the simulated market.
    #[arg(long, default_value_t = 500)]
    pub(crate) sim_pairs: usize,
    /// Venues to serve, comma separated.
    #[arg(long, default_value = "binance,bybit,okx,bitget")]
    pub(crate) venues: String,
    /// Skip an update id / break the sequence chain once every N book messages per venue.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub(crate) fault_gap_every: u64,
    /// A wrong OKX/Bitget checksum once every N book updates per venue.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub(crate) fault_checksum_every: u64,
    /// A stale Binance REST depth snapshot once every N depth requests.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub(crate) fault_stale_snapshot_every: u64,
    /// Drop every WebSocket connection every S seconds.
    #[arg(long, value_name = "S", default_value_t = 0)]
    pub(crate) fault_disconnect_every_s: u64,
    /// Delist SYMBOL (on one venue, or on every venue listing it) SECONDS after start. Repeatable.
    #[arg(long, value_name = "[VENUE:]SYMBOL@SECONDS")]
    pub(crate) delist: Vec<String>,
    /// OKX `books` messages carry checksum 0.
    #[arg(long)]
    pub(crate) okx_checksum_zero: bool,
    /// Bitget `books` messages carry no checksum field.
    #[arg(long)]
    pub(crate) bitget_no_checksum: bool,
    /// Binance server ping interval, seconds.
    #[arg(long, default_value_t = 20)]
    pub(crate) ping_interval_s: u64,
    /// OKX idle close (4004) after this many seconds without a client message or data push.
    #[arg(long, default_value_t = 30)]
    pub(crate) idle_close_s: u64,
    /// OKX idle heartbeat on `books` after this many seconds without a book change.
    #[arg(long, default_value_t = 60)]
    pub(crate) okx_heartbeat_s: u64,
    /// Messages a WebSocket connection may have queued before it is closed as a slow consumer.
    #[arg(long, default_value_t = 8_192)]
    pub(crate) queue_messages_max: usize,
    /// Open TCP connections at most; more are closed at accept.
    #[arg(long, default_value_t = 4_096)]
    pub(crate) connections_max: usize,
    /// Mean time between two steps of one pair, ms (default 500): the message rate.
    #[arg(long)]
    pub(crate) step_ms: Option<i64>,
}

#[derive(Args, Debug, Clone, Default)]
pub(crate) struct CommonArgs {
    /// TOML configuration file.
    #[arg(long, env = "RAMPART_CONFIG")]
    pub(crate) config: Option<PathBuf>,
    /// Data directory (SQLite database) [default: ./data].
    #[arg(long, env = "RAMPART_DATA_DIR")]
    pub(crate) data_dir: Option<PathBuf>,
    /// Keep accounts, keys, alerts, inbox and outbox in this PostgreSQL database instead of
    /// SQLite (`postgres://user:password@host:port/db` or `host=… user=… dbname=…`; never
    /// logged).
    #[arg(long, env = "RAMPART_POSTGRES_URL")]
    pub(crate) postgres: Option<String>,
}

/// The `keys` commands' settings: the same file and directory as `serve`, accepted after the
/// subcommand too (`keys list --data-dir D`).
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct KeysArgs {
    /// TOML configuration file (for its plans).
    #[arg(long, env = "RAMPART_CONFIG", global = true)]
    pub(crate) config: Option<PathBuf>,
    /// Data directory (SQLite database) [default: ./data].
    #[arg(long, env = "RAMPART_DATA_DIR", global = true)]
    pub(crate) data_dir: Option<PathBuf>,
    /// The PostgreSQL database instead of SQLite (as `serve --postgres`).
    #[arg(long, env = "RAMPART_POSTGRES_URL", global = true)]
    pub(crate) postgres: Option<String>,
    /// Create the database if the data directory has none (otherwise that is an error, so a
    /// mistyped --data-dir is not taken for a new, empty one).
    #[arg(long, global = true)]
    pub(crate) create: bool,
}

#[derive(Args, Debug, Clone, Default)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    /// Hand every firing's deliveries to the NATS JetStream firings stream at this URL instead
    /// of sending them here; `rampart deliver` workers send them (needs --postgres, the
    /// database the workers share).
    #[arg(long, env = "RAMPART_NATS_URL")]
    pub(crate) nats: Option<String>,
    /// The process's part in a cluster: single (the whole service, the default), market (owns
    /// the books of --partition I/N, publishes their snapshots on NATS, serves no API) or api
    /// (serves the API from the market nodes' snapshots; --partitions N). Both cluster roles
    /// need --postgres and --nats.
    #[arg(long, env = "RAMPART_ROLE")]
    pub(crate) role: Option<String>,
    /// `--role market`: this node's part of the pairs, `I/N` (every market node of a cluster
    /// has the same N and its own I).
    #[arg(long, env = "RAMPART_PARTITION")]
    pub(crate) partition: Option<String>,
    /// `--role api`: how many partitions the market nodes split the pairs into (their N).
    #[arg(long, env = "RAMPART_PARTITIONS")]
    pub(crate) partitions: Option<u16>,
    /// Address to listen on [default: 127.0.0.1:8080].
    #[arg(long, env = "RAMPART_LISTEN")]
    pub(crate) listen: Option<String>,
    /// Serve `/metrics` only on this address (e.g. 127.0.0.1:9464) instead of the API's
    /// [default: on the API's address].
    #[arg(long, env = "RAMPART_METRICS_LISTEN")]
    pub(crate) metrics_listen: Option<String>,
    /// Market data source: sim or live [default: sim].
    #[arg(long, env = "RAMPART_FEED")]
    pub(crate) feed: Option<String>,
    /// Venues to follow, comma separated [default: binance,bybit,okx,bitget].
    #[arg(long, env = "RAMPART_VENUES")]
    pub(crate) venues: Option<String>,
    /// Number of shards [default: the cores less the front threads, at least 1].
    #[arg(long, env = "RAMPART_SHARDS")]
    pub(crate) shards: Option<usize>,
    /// Number of HTTP front threads, each accepting and serving its own connections and streams
    /// [default: a quarter of the cores, at least 1].
    #[arg(long, env = "RAMPART_FRONTS")]
    pub(crate) fronts: Option<usize>,
    /// How the front threads accept: `shared` (one listening socket, every thread accepting on
    /// it) or `reuseport` (a socket per thread on the same address, `SO_REUSEPORT`, the kernel
    /// spreading new connections) [default: shared].
    #[arg(long, env = "RAMPART_ACCEPT")]
    pub(crate) accept: Option<String>,
    /// Microseconds a live shard spins for work before it parks its thread; 1000000 keeps it
    /// busy-polling on a feed (a core of its own per shard) [default: 200].
    #[arg(long, env = "RAMPART_SHARD_SPIN_US")]
    pub(crate) shard_spin_us: Option<u32>,
    /// Pairs in the simulated market [default: 500].
    #[arg(long, env = "RAMPART_SIM_PAIRS")]
    pub(crate) sim_pairs: Option<usize>,
    /// Mean milliseconds between two moves of one simulated pair [default: 500]; larger makes
    /// a quieter market (tests that compare served figures use it).
    #[arg(long, env = "RAMPART_SIM_STEP_MS")]
    pub(crate) sim_step_ms: Option<i64>,
    /// Seed of the simulated market [default: 42].
    #[arg(long, env = "RAMPART_SEED")]
    pub(crate) seed: Option<u64>,
    /// Simulated delisting: `SYMBOL@SECONDS` delists SYMBOL on every venue that many seconds
    /// after the server is ready (its alerts are removed and their owners notified). Repeatable.
    #[arg(long, value_name = "SYMBOL@SECONDS")]
    pub(crate) sim_delist: Vec<String>,
    /// Fault injection for the shutdown test: shards never finish stopping.
    #[arg(long, hide = true)]
    pub(crate) fault_hang_shard_stop: bool,
    /// Fault injection for the cluster's publisher test (issue #59): in the first publish round
    /// of more than N rows, the process exits (status 86) once the stream has stored N of them,
    /// before any row of the round is marked published (a crash in mid-round).
    #[arg(long, hide = true, value_name = "N")]
    pub(crate) fault_publisher_abort_after: Option<u32>,
    /// Log line format on stderr: text or json [default: text]. `RUST_LOG` filters (default info).
    #[arg(long, env = "RAMPART_LOG_FORMAT")]
    pub(crate) log_format: Option<String>,
    /// Shard CPU placement: auto (free CPUs of the allowed set, shared with no other rampart
    /// process; unpinned when none is free), none, or a list such as 0,2,4-6 [default: auto].
    #[arg(long, env = "RAMPART_CPUS")]
    pub(crate) cpus: Option<String>,
    /// Capacity of each shard's event queue (tests shrink it to exercise backpressure).
    #[arg(long, hide = true, default_value_t = rampart_state::EVENTS_MAX)]
    pub(crate) events_max: usize,
}

#[derive(Subcommand, Debug)]
pub(crate) enum KeysCommand {
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
