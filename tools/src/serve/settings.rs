//! The settings of one `serve` run ([`ServeSettings`]): flags, then `RAMPART_*` environment,
//! then the TOML file, then the defaults, merged and checked against their limits.

use anyhow::{bail, Result};
use rampart_engine::sim::SimConfig;
use rampart_engine::Venue;
use rampart_net::config::{FileConfig, Plans};
use rampart_store::store::StoreLocation;
use rampart_venue::VenueSettings;

use crate::cli::ServeArgs;
use crate::config::{load_file, parse_venues, plans, store_location, telegram};
use crate::role::NodeRole;

/// Front threads at most (`--fronts`).
pub(crate) const FRONTS_MAX: usize = 64;

/// The front threads a machine of `cores` gets unless told: a quarter of its cores, at least one,
/// and the rest to shards (`--shards`' default is the cores less these). On 2 cores that is one
/// front and one shard, as before `--fronts` existed. A first choice, from the shape of the work
/// (a read costs the front about what a tick costs its shard, and the shards also decide the
/// alerts); `docs/design/front-threads.md` says what measured it and what is still to measure.
pub(crate) fn default_fronts(cores: usize) -> usize {
    (cores / 4).max(1)
}

/// Settings of one `serve` run, after flags, environment, file and defaults are merged.
pub(crate) struct ServeSettings {
    pub(crate) listen: String,
    pub(crate) unauthenticated_per_min: usize,
    pub(crate) stream_bounds: rampart_net::stream::Bounds,
    pub(crate) metrics_listen: Option<String>,
    pub(crate) store: StoreLocation,
    /// The firings stream (`--nats`): deliveries go there instead of being sent here.
    pub(crate) nats: Option<String>,
    /// Single process, or a cluster's market or api node.
    pub(crate) role: NodeRole,
    pub(crate) venues: Vec<Venue>,
    pub(crate) shards: usize,
    /// HTTP front threads (`--fronts`).
    pub(crate) fronts: usize,
    /// `--accept reuseport`: a listening socket per front thread.
    pub(crate) reuseport: bool,
    /// `--shard-spin-us`.
    pub(crate) shard_spin_us: u32,
    pub(crate) sim_pairs: usize,
    pub(crate) sim_step_ms: i64,
    pub(crate) seed: u64,
    pub(crate) plans: Plans,
    pub(crate) walls_min_ratio: f64,
    pub(crate) allow_private: bool,
    /// `webhooks.previous_secret_s`: how long a rotated-out signing secret signs.
    pub(crate) previous_secret_s: u32,
    /// `webhooks.delivery_threads`: the threads that send this process's webhooks.
    pub(crate) delivery_threads: usize,
    /// `webhooks.in_flight_max`: this process's webhook attempts in flight at once.
    pub(crate) in_flight_max: usize,
    /// `[retention]`: what the database keeps.
    pub(crate) retention: rampart_store::store::Retention,
    pub(crate) sim_delist: Vec<(String, u64)>,
    /// Hidden fault injection for tests; none in production.
    pub(crate) faults: Faults,
    /// `[derivatives] enabled`.
    pub(crate) derivatives: bool,
    /// `[derivatives] binance_oi_poll_s`.
    pub(crate) binance_oi_poll_s: u64,
    /// `[derivatives] okx_funding_poll_s`.
    pub(crate) okx_funding_poll_s: u64,
    pub(crate) events_max: usize,
    pub(crate) cpus: rampart_shard::cpus::CpuPolicy,
    /// `--feed live`: each venue's endpoints and limits.
    pub(crate) live: Option<Vec<VenueSettings>>,
    pub(crate) verify_checksums: bool,
    /// `[channels.telegram]`: the bot firings are also sent through.
    pub(crate) telegram: Option<rampart_delivery::telegram::TelegramChannel>,
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

/// `webhooks.delivery_threads`, checked against its limits.
fn delivery_threads(file: &FileConfig) -> Result<usize> {
    use rampart_delivery::{DELIVERY_THREADS, LANES_MAX};
    let n = file.webhooks.delivery_threads.unwrap_or(DELIVERY_THREADS);
    if !(1..=LANES_MAX).contains(&n) {
        bail!("webhooks.delivery_threads must be between 1 and {LANES_MAX}, not {n}");
    }
    Ok(n)
}

/// `webhooks.in_flight_max`, checked against its limits.
fn in_flight_max(file: &FileConfig) -> Result<usize> {
    use rampart_delivery::{IN_FLIGHT_MAX, IN_FLIGHT_RANGE};
    let n = file.webhooks.in_flight_max.unwrap_or(IN_FLIGHT_MAX);
    if !IN_FLIGHT_RANGE.contains(&n) {
        let (low, high) = (IN_FLIGHT_RANGE.start(), IN_FLIGHT_RANGE.end());
        bail!("webhooks.in_flight_max must be between {low} and {high}, not {n}");
    }
    Ok(n)
}

/// `[derivatives] binance_oi_poll_s` (decisions §17: 1 to 600, default 30).
fn binance_oi_poll_s(file: &FileConfig) -> Result<u64> {
    poll_s("binance_oi_poll_s", file.derivatives.binance_oi_poll_s)
}

/// `[derivatives] okx_funding_poll_s` (as `binance_oi_poll_s`: 1 to 600, default 30).
fn okx_funding_poll_s(file: &FileConfig) -> Result<u64> {
    poll_s("okx_funding_poll_s", file.derivatives.okx_funding_poll_s)
}

/// A poll period of `[derivatives]`, checked (1 to 600 s, default 30).
fn poll_s(name: &str, set: Option<u64>) -> Result<u64> {
    let range = rampart_venue::perp_oi::POLL_S_RANGE;
    let s = set.unwrap_or(30);
    if !range.contains(&s) {
        bail!("derivatives.{name} must be between {} and {}, not {s}", range.start(), range.end());
    }
    Ok(s)
}

/// The threads a `serve` run is given, checked.
struct Threads {
    fronts: usize,
    reuseport: bool,
    shard_spin_us: u32,
    shards: usize,
}

/// `--fronts`, `--accept`, `--shard-spin-us` and `--shards` over the file's, each checked; the
/// defaults from the cores.
fn threads(args: &ServeArgs, file: &FileConfig) -> Result<Threads> {
    let cores = std::thread::available_parallelism().map(|c| c.get()).unwrap_or(1);
    let fronts = args.fronts.or(file.fronts).unwrap_or(default_fronts(cores)).max(1);
    if fronts > FRONTS_MAX {
        bail!("--fronts {fronts} is more than {FRONTS_MAX}");
    }
    let reuseport = match args.accept.as_deref().or(file.accept.as_deref()).unwrap_or("shared") {
        "shared" => false,
        "reuseport" => true,
        other => bail!("invalid accept '{other}'. Allowed: shared, reuseport"),
    };
    let spin_max = rampart_shard::SPIN_BEFORE_PARK_MAX.as_micros();
    let default_spin = rampart_shard::LIVE_SPIN_BEFORE_PARK.as_micros() as u32;
    let shard_spin_us = args.shard_spin_us.or(file.shard_spin_us).unwrap_or(default_spin);
    if u128::from(shard_spin_us) > spin_max {
        bail!("--shard-spin-us must be between 0 and {spin_max}, not {shard_spin_us}");
    }
    let shards = args.shards.or(file.shards).unwrap_or(cores.saturating_sub(fronts)).max(1);
    if shards > 256 {
        bail!("--shards {shards} is more than 256");
    }
    Ok(Threads { fronts, reuseport, shard_spin_us, shards })
}

/// The simulated market's pairs and step, checked.
fn simulation(args: &ServeArgs, file: &FileConfig) -> Result<(usize, i64)> {
    let sim_step_ms = args.sim_step_ms.or(file.sim_step_ms).unwrap_or(SimConfig::default().step_interval_ms);
    if !(1..=600_000).contains(&sim_step_ms) {
        bail!("--sim-step-ms must be between 1 and 600000");
    }
    let sim_pairs = args.sim_pairs.or(file.sim_pairs).unwrap_or(500);
    if !(1..=5_000).contains(&sim_pairs) {
        bail!("--sim-pairs must be between 1 and 5000");
    }
    Ok((sim_pairs, sim_step_ms))
}

/// `--sim-delist SYMBOL@SECONDS`, each parsed.
fn sim_delistings(given: &[String]) -> Result<Vec<(String, u64)>> {
    let mut out = Vec::new();
    for d in given {
        let parsed = d.split_once('@').and_then(|(s, t)| Some((s.to_ascii_uppercase(), t.parse::<u64>().ok()?)));
        match parsed {
            Some(x) if !x.0.is_empty() => out.push(x),
            _ => bail!("--sim-delist takes SYMBOL@SECONDS, not '{d}'"),
        }
    }
    Ok(out)
}

/// On the live feed, each venue's settings from its file section, and whether every venue
/// verifies its checksums; `None` on the simulated feed.
fn live_venues(feed: &str, venues: &[Venue], file: &FileConfig) -> Result<(Option<Vec<VenueSettings>>, bool)> {
    if feed != "live" {
        return Ok((None, true));
    }
    let mut verify_checksums = true;
    let mut out = Vec::with_capacity(venues.len());
    for v in venues {
        let section = file.venue_section(v.as_str()).map_err(|e| anyhow::anyhow!(e))?;
        verify_checksums &= section.verify_checksum.unwrap_or(true);
        out.push(section.settings(*v).map_err(|e| anyhow::anyhow!(e))?);
    }
    Ok((Some(out), verify_checksums))
}

/// The hidden fault-injection flags of `serve` (tests only).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Faults {
    /// `--fault-hang-shard-stop`: shards never finish stopping.
    pub(crate) hang_shard_stop: bool,
    /// `--fault-publisher-abort-after`: the publisher's crash in mid-round.
    pub(crate) publisher_abort_after: Option<u32>,
}

impl Faults {
    fn of(args: &ServeArgs) -> Faults {
        Faults { hang_shard_stop: args.fault_hang_shard_stop, publisher_abort_after: args.fault_publisher_abort_after }
    }
}

/// `[limits] unauthenticated_per_min`, checked.
fn unauthenticated_per_min(file: &FileConfig) -> Result<usize> {
    let n = file.limits.unauthenticated_per_min.unwrap_or(rampart_net::api::limit::UNAUTH_PER_WINDOW);
    if !(1..=rampart_net::api::limit::UNAUTH_PER_WINDOW_MAX).contains(&n) {
        bail!(
            "limits.unauthenticated_per_min must be between 1 and {}, not {n}",
            rampart_net::api::limit::UNAUTH_PER_WINDOW_MAX
        );
    }
    Ok(n)
}

/// The settings of a `serve` run: flags over environment over file over defaults, each checked.
pub(super) fn settings(args: ServeArgs) -> Result<ServeSettings> {
    let file = load_file(&args.common)?;
    let role = NodeRole::parse(args.role.as_deref(), args.partition.as_deref(), args.partitions)?;
    if role != NodeRole::Single && (args.nats.is_none() || args.common.postgres.is_none()) {
        bail!("--role market and --role api need --postgres and --nats: the cluster's database and NATS server");
    }
    let feed = args.feed.clone().or(file.feed.clone()).unwrap_or_else(|| "sim".to_owned());
    if feed != "sim" && feed != "live" {
        bail!("invalid feed '{feed}'. Allowed: sim, live");
    }
    let Threads { fronts, reuseport, shard_spin_us, shards } = threads(&args, &file)?;
    let (sim_pairs, sim_step_ms) = simulation(&args, &file)?;
    let unauthenticated_per_min = unauthenticated_per_min(&file)?;
    let stream_bounds = stream_bounds(&file)?;
    let walls_min_ratio = file.walls.min_ratio.unwrap_or(f64::from(rampart_engine::wall::MIN_RATIO_DEFAULT));
    if !(walls_min_ratio > 1.0 && walls_min_ratio.is_finite()) {
        bail!("walls.min_ratio must be a number above 1, not {walls_min_ratio}");
    }
    if file.webhooks.allow_private {
        tracing::warn!("WARNING: webhooks.allow_private = true: webhooks may target private and loopback addresses. Local testing only.");
    }
    let venues = parse_venues(
        &args.venues.clone().or(file.venue_list()).unwrap_or_else(|| "binance,bybit,okx,bitget".to_owned()),
    )?;
    let (live, verify_checksums) = live_venues(&feed, &venues, &file)?;
    Ok(ServeSettings {
        faults: Faults::of(&args), // first: the fields after it move parts of `args`
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
        fronts,
        reuseport,
        shard_spin_us,
        sim_pairs,
        sim_step_ms,
        seed: args.seed.or(file.seed).unwrap_or(42),
        plans: plans(&file),
        walls_min_ratio,
        allow_private: file.webhooks.allow_private,
        previous_secret_s: file.webhooks.previous_secret_s.unwrap_or(rampart_net::config::PREVIOUS_SECRET_S),
        delivery_threads: delivery_threads(&file)?,
        in_flight_max: in_flight_max(&file)?,
        retention: file.retention.retention()?,
        telegram: telegram(&file)?,
        sim_delist: sim_delistings(&args.sim_delist)?,
        derivatives: file.derivatives.enabled.unwrap_or(true),
        binance_oi_poll_s: binance_oi_poll_s(&file)?,
        okx_funding_poll_s: okx_funding_poll_s(&file)?,
        events_max: args.events_max,
        cpus: rampart_shard::cpus::CpuPolicy::parse(args.cpus.as_deref().unwrap_or("auto"))?,
    })
}

#[cfg(test)]
mod tests {
    use rampart_net::config::FileConfig;

    #[test]
    fn stream_bounds_come_from_the_file_within_their_limits() {
        let file = |text: &str| FileConfig::parse_with_env(text, std::iter::empty()).expect("a config");
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
        let unknown = FileConfig::parse_with_env("[streams]\nsubscriptions = 5\n", std::iter::empty());
        assert!(unknown.is_err(), "an unknown key is refused");
    }
    #[test]
    fn binance_oi_poll_s_is_from_1_to_600_seconds() {
        let file = |text: &str| FileConfig::parse_with_env(text, std::iter::empty()).expect("a config");
        assert_eq!(super::binance_oi_poll_s(&file("")).expect("default"), 30);
        assert_eq!(super::binance_oi_poll_s(&file("[derivatives]\nbinance_oi_poll_s = 600\n")).expect("600"), 600);
        for bad in [0, 601] {
            let e = super::binance_oi_poll_s(&file(&format!("[derivatives]\nbinance_oi_poll_s = {bad}\n")));
            let e = e.expect_err("out of range").to_string();
            assert_eq!(e, format!("derivatives.binance_oi_poll_s must be between 1 and 600, not {bad}"));
            let e = super::okx_funding_poll_s(&file(&format!("[derivatives]\nokx_funding_poll_s = {bad}\n")));
            let e = e.expect_err("out of range").to_string();
            assert_eq!(e, format!("derivatives.okx_funding_poll_s must be between 1 and 600, not {bad}"));
        }
        assert_eq!(super::okx_funding_poll_s(&file("")).expect("default"), 30);
        assert_eq!(super::okx_funding_poll_s(&file("[derivatives]\nokx_funding_poll_s = 2\n")).expect("2"), 2);
    }

    #[test]
    fn delivery_threads_come_from_the_file_or_the_environment_within_their_limits() {
        let file = |text: &str| FileConfig::parse_with_env(text, std::iter::empty()).expect("a config");
        assert_eq!(super::delivery_threads(&file("")).expect("default"), rampart_delivery::DELIVERY_THREADS);
        assert_eq!(super::delivery_threads(&file("[webhooks]\ndelivery_threads = 4\n")).expect("4"), 4);
        let env = [("RAMPART_WEBHOOKS__DELIVERY_THREADS".to_owned(), "3".to_owned())];
        let from_env = FileConfig::parse_with_env("", env).expect("a config");
        assert_eq!(super::delivery_threads(&from_env).expect("3"), 3);
        for n in [0, 65] {
            let e = super::delivery_threads(&file(&format!("[webhooks]\ndelivery_threads = {n}\n")));
            assert_eq!(
                e.expect_err("out of range").to_string(),
                format!("webhooks.delivery_threads must be between 1 and 64, not {n}")
            );
        }
    }

    #[test]
    fn in_flight_max_comes_from_the_file_or_the_environment_within_its_limits() {
        let file = |text: &str| FileConfig::parse_with_env(text, std::iter::empty()).expect("a config");
        assert_eq!(super::in_flight_max(&file("")).expect("default"), rampart_delivery::IN_FLIGHT_MAX);
        assert_eq!(super::in_flight_max(&file("[webhooks]\nin_flight_max = 512\n")).expect("512"), 512);
        let env = [("RAMPART_WEBHOOKS__IN_FLIGHT_MAX".to_owned(), "1024".to_owned())];
        let from_env = FileConfig::parse_with_env("", env).expect("a config");
        assert_eq!(super::in_flight_max(&from_env).expect("1024"), 1024);
        for n in [0, 15, 2049] {
            let e = super::in_flight_max(&file(&format!("[webhooks]\nin_flight_max = {n}\n")));
            assert_eq!(
                e.expect_err("out of range").to_string(),
                format!("webhooks.in_flight_max must be between 16 and 2048, not {n}")
            );
        }
    }
}
