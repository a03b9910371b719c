//! Configuration shared by the server and the CLI: plans and their limits, the optional TOML
//! file, and the defaults from `decisions.md`.

use std::collections::BTreeMap;

use serde::Deserialize;

/// One plan's rights and limits.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// Plan name.
    #[serde(skip)]
    pub name: String,
    /// May use the API at all (otherwise 403).
    pub api: bool,
    /// Active price-alert cap.
    pub price_alert_cap: u32,
    /// May create percent-move alerts.
    pub pct_alerts: bool,
    /// May create repeating alerts.
    pub repeat: bool,
    /// May create structure alerts (`level`; `decisions.md` §15); a plan from the file that
    /// omits it may.
    #[serde(default = "structure_alerts_default")]
    pub structure_alerts: bool,
    /// May create derivatives alerts (`liquidations`, `oi`, `funding`; `decisions.md` §17); a
    /// plan from the file that omits it may.
    #[serde(default = "structure_alerts_default")]
    pub derivatives_alerts: bool,
    /// Requests admitted in any 60-second window.
    pub burst_per_min: u32,
    /// Requests admitted per UTC day.
    pub daily_quota: u64,
    /// May use the operator endpoints (`DELETE /v1/debug/latency`); no built-in plan can.
    #[serde(default)]
    pub operator: bool,
    /// Active density alerts of the site (`decisions.md` §10); a plan from the file that
    /// omits it gets `free`'s.
    #[serde(default = "density_cap_default")]
    pub density_alert_cap: u32,
    /// Active market alerts of the site; a plan from the file that omits it gets `free`'s.
    #[serde(default = "market_cap_default")]
    pub market_alert_cap: u32,
    /// Open `GET /v1/stream` connections per key (`decisions.md` §12); a plan from the file
    /// that omits it gets `developer-lite`'s.
    #[serde(default = "stream_connections_default")]
    pub stream_connections: u32,
}

fn structure_alerts_default() -> bool {
    true
}

fn stream_connections_default() -> u32 {
    2
}

fn density_cap_default() -> u32 {
    5
}

fn market_cap_default() -> u32 {
    2
}

/// The plans, by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plans {
    plans: Vec<Plan>,
}

impl Default for Plans {
    fn default() -> Plans {
        let plan = |name: &str, api, cap, pct, repeat, quota, (density, market), streams| Plan {
            name: name.to_owned(),
            api,
            price_alert_cap: cap,
            pct_alerts: pct,
            repeat,
            structure_alerts: api,
            derivatives_alerts: api,
            burst_per_min: 120,
            daily_quota: quota,
            operator: false,
            density_alert_cap: density,
            market_alert_cap: market,
            stream_connections: streams,
        };
        Plans {
            plans: vec![
                plan("free", false, 10, false, false, 1_000, (density_cap_default(), market_cap_default()), 0),
                plan("developer", true, 200, true, true, 100_000, (50, 20), 5),
                plan("developer-lite", true, 50, false, false, 20_000, (10, 5), stream_connections_default()),
            ],
        }
    }
}

impl Plans {
    /// Finds a plan by name.
    pub fn get(&self, name: &str) -> Option<&Plan> {
        self.plans.iter().find(|p| p.name == name)
    }

    /// Plan names, comma separated, for `Allowed:` messages.
    pub fn allowed(&self) -> String {
        self.plans.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", ")
    }

    /// Overrides or adds plans from the TOML `[plans.NAME]` tables.
    pub fn merge(&mut self, from_file: BTreeMap<String, Plan>) {
        for (name, mut plan) in from_file {
            plan.name = name.clone();
            match self.plans.iter_mut().find(|p| p.name == name) {
                Some(p) => *p = plan,
                None => self.plans.push(plan),
            }
        }
    }
}

/// One venue's endpoints and limits for `--feed live` (`[venues.binance]`, or `[venue.binance]`);
/// every key is optional and defaults to the real venue's (`rampart_venue::VenueSettings`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VenueUrls {
    /// REST base URL (`https://api.binance.com`; `http://` accepted).
    pub rest: Option<String>,
    /// WebSocket base URL (`wss://stream.binance.com:9443`; `ws://` accepted).
    pub ws: Option<String>,
    /// Pairs per WebSocket connection.
    pub pairs_per_connection: Option<usize>,
    /// REST budget: weight (Binance) or requests per second.
    pub rest_weight_per_s: Option<f64>,
    /// Connection attempts per second, process-wide.
    pub connects_per_s: Option<f64>,
    /// Listing refresh period, seconds (at least 10).
    pub refresh_s: Option<u64>,
    /// Longest `Retry-After` pause honoured, seconds (1 to 86400; default 300).
    pub retry_after_max_s: Option<u64>,
    /// Verify book checksums when the venue sends them (OKX, Bitget; default true).
    pub verify_checksum: Option<bool>,
    /// REST base URL of the venue's perpetuals (decisions §17; default the real venue's, or
    /// `rest` when that is given; OKX and Bitget always default to `rest`).
    pub perp_rest: Option<String>,
    /// WebSocket base URL of the perpetuals (default the real venue's, or beside `ws` when that is
    /// given: Binance `{ws}/market`, Bybit `{ws}/v5/public/linear`; OKX and Bitget `ws`).
    pub perp_ws: Option<String>,
}

impl VenueUrls {
    /// The venue's settings: the real venue's, overridden by what is given here.
    pub fn settings(&self, venue: rampart_engine::Venue) -> Result<rampart_venue::VenueSettings, ConfigError> {
        let mut s = rampart_venue::VenueSettings::default_for(venue);
        let name = venue.as_str();
        if let Some(r) = &self.rest {
            if !(r.starts_with("http://") || r.starts_with("https://")) {
                return Err(ConfigError::new(format!(
                    "venues.{name}.rest must start with http:// or https://, not '{r}'"
                )));
            }
            s.rest = r.trim_end_matches('/').to_owned();
        }
        if let Some(w) = &self.ws {
            if !(w.starts_with("ws://") || w.starts_with("wss://")) {
                return Err(ConfigError::new(format!("venues.{name}.ws must start with ws:// or wss://, not '{w}'")));
            }
            s.ws = w.trim_end_matches('/').to_owned();
        }
        // A venue moved elsewhere (a simulator, a proxy) has its perpetuals there too, unless
        // told otherwise: `rampart sim-venue` serves them on its one port.
        if self.rest.is_some() {
            s.perp_rest = s.rest.clone();
        }
        if self.ws.is_some() {
            s.perp_ws = rampart_venue::perp_beside(venue, &s.ws);
        }
        for (key, v, schemes, target) in [
            ("perp_rest", &self.perp_rest, ["http://", "https://"], &mut s.perp_rest),
            ("perp_ws", &self.perp_ws, ["ws://", "wss://"], &mut s.perp_ws),
        ] {
            if let Some(u) = v {
                if !schemes.iter().any(|p| u.starts_with(p)) {
                    let want = schemes.join(" or ");
                    return Err(ConfigError::new(format!("venues.{name}.{key} must start with {want}, not '{u}'")));
                }
                *target = u.trim_end_matches('/').to_owned();
            }
        }
        if let Some(p) = self.pairs_per_connection {
            if p == 0 {
                return Err(ConfigError::new(format!("venues.{name}.pairs_per_connection must be at least 1")));
            }
            s.pairs_per_connection = p;
        }
        for (key, v, target) in [
            ("rest_weight_per_s", self.rest_weight_per_s, &mut s.rest_weight_per_s),
            ("connects_per_s", self.connects_per_s, &mut s.connects_per_s),
        ] {
            if let Some(v) = v {
                if !(v > 0.0 && v.is_finite()) {
                    return Err(ConfigError::new(format!("venues.{name}.{key} must be a positive number")));
                }
                *target = v;
            }
        }
        if let Some(r) = self.refresh_s {
            s.refresh_s = r.max(10);
        }
        if let Some(r) = self.retry_after_max_s {
            if !(1..=86_400).contains(&r) {
                return Err(ConfigError::new(format!(
                    "venues.{name}.retry_after_max_s must be from 1 to 86400, not {r}"
                )));
            }
            s.retry_after_max_s = r;
        }
        Ok(s)
    }
}

/// Webhook settings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookSettings {
    /// Permit private and loopback targets (local testing only; logged loudly).
    #[serde(default)]
    pub allow_private: bool,
    /// How long a rotated-out signing secret goes on signing, seconds (`decisions.md` §13: a
    /// day; shorter only to test it). Absent: 86 400.
    #[serde(default)]
    pub previous_secret_s: Option<u32>,
    /// Threads that send webhooks in a single process (1 to `rampart_delivery::LANES_MAX`; the
    /// per-account and per-destination bounds are over all of them). Absent:
    /// `rampart_delivery::DELIVERY_THREADS`.
    #[serde(default)]
    pub delivery_threads: Option<usize>,
    /// Webhook attempts in flight at once in a single process, over all its delivery threads
    /// (`rampart_delivery::IN_FLIGHT_RANGE`; one account may borrow all but a quarter). Absent:
    /// `rampart_delivery::IN_FLIGHT_MAX`.
    #[serde(default)]
    pub in_flight_max: Option<usize>,
}

/// How long a rotated-out signing secret signs unless configured: 24 h.
pub const PREVIOUS_SECRET_S: u32 = 86_400;

/// Channels besides the inbox and live push (`[channels]`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelSettings {
    /// The Telegram bot (`[channels.telegram]`); absent: no Telegram messages are sent.
    pub telegram: Option<TelegramSettings>,
}

/// The operator's Telegram bot (`[channels.telegram]`).
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelegramSettings {
    /// The Bot API base URL (default `https://api.telegram.org`; a local Bot API server works).
    pub base_url: Option<String>,
    /// The bot token from @BotFather (a secret: `RAMPART_CHANNELS__TELEGRAM__TOKEN` keeps it out
    /// of the file).
    pub token: String,
}

impl std::fmt::Debug for TelegramSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelegramSettings").field("base_url", &self.base_url).field("token", &"<hidden>").finish()
    }
}

/// Wall detection settings.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WallSettings {
    /// A level is a wall at this multiple of the median level size (default 10).
    pub min_ratio: Option<f64>,
}

/// Limits beyond the plans'.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitSettings {
    /// Requests without a valid key admitted per client address in any 60 s (default 60, at most
    /// 1000); more get 429.
    pub unauthenticated_per_min: Option<usize>,
}

/// `GET /v1/stream` bounds per connection (`decisions.md` §12); connections per key are the
/// plans' `stream_connections`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamSettings {
    /// Subscriptions one connection holds at most (default 500, at most 10 000); a subscribe
    /// past it is refused whole.
    pub subscriptions_max: Option<usize>,
    /// Bytes waiting to be written to one client at most (default 4 MiB, 256 KiB to 256 MiB):
    /// market events past a quarter of it are conflated into snapshots.
    pub unsent_bytes_max: Option<usize>,
}

/// `[derivatives]` (`decisions.md` §17).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DerivativesSettings {
    /// Off (`false`): no perpetual runs; the derivatives endpoints answer as for a pair without
    /// one and the three alert types are refused (default `true`).
    pub enabled: Option<bool>,
    /// Seconds between two open-interest polls of one Binance perpetual (1 to 600; default 30).
    pub binance_oi_poll_s: Option<u64>,
    /// Seconds between two polls of OKX's funding, every swap at once (1 to 600; default 30).
    pub okx_funding_poll_s: Option<u64>,
}

/// Metrics settings.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsSettings {
    /// Serve `/metrics` only on this address instead of the API's.
    pub listen: Option<String>,
}

/// The optional TOML file given by `--config`; every key is optional.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// `--listen`.
    pub listen: Option<String>,
    /// `--data-dir`.
    pub data_dir: Option<String>,
    /// `--feed`.
    pub feed: Option<String>,
    /// `--venues`, as a comma list.
    pub venues: Option<toml::Value>,
    /// `--shards`.
    pub shards: Option<usize>,
    /// `--fronts`.
    pub fronts: Option<usize>,
    /// `--accept`: `shared` or `reuseport`.
    pub accept: Option<String>,
    /// `--shard-spin-us`.
    pub shard_spin_us: Option<u32>,
    /// `--sim-pairs`.
    pub sim_pairs: Option<usize>,
    /// `--sim-step-ms`.
    pub sim_step_ms: Option<i64>,
    /// `--seed`.
    pub seed: Option<u64>,
    /// Plans to add or override.
    #[serde(default)]
    pub plans: BTreeMap<String, Plan>,
    /// Venue endpoint URLs, by venue name.
    #[serde(default, rename = "venue")]
    pub venue_urls: BTreeMap<String, VenueUrls>,
    /// Webhook settings.
    #[serde(default)]
    pub webhooks: WebhookSettings,
    /// Wall detection settings.
    #[serde(default)]
    pub walls: WallSettings,
    /// Notification channels (Telegram).
    #[serde(default)]
    pub channels: ChannelSettings,
    /// Metrics settings.
    #[serde(default)]
    pub metrics: MetricsSettings,
    /// Limits beyond the plans'.
    #[serde(default)]
    pub limits: LimitSettings,
    /// Stream bounds.
    #[serde(default)]
    pub streams: StreamSettings,
    /// What the database keeps, by age.
    #[serde(default)]
    pub retention: RetentionSettings,
    /// The derivatives flow of `decisions.md` §17.
    #[serde(default)]
    pub derivatives: DerivativesSettings,
}

/// `[retention]`: how long each kind of row is kept, as a duration (`"90d"`, `"12h"`, `"30m"`,
/// `"45s"`; at least a second, at most ten years). Absent: `rampart_store::store::Retention`'s
/// defaults (docs/decisions.md, "Retention").
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetentionSettings {
    /// Inbox entries (and the `alerts` stream's resume window), from when they were written.
    pub inbox: Option<String>,
    /// Delivered or failed outbox rows and their bodies, from when they were settled.
    pub outbox: Option<String>,
    /// Deleted, expired, delisted and fired one-shot alerts (API and site), from that moment.
    pub alerts: Option<String>,
}

impl RetentionSettings {
    /// The retention these settings make, or what is wrong, naming the key.
    pub fn retention(&self) -> Result<rampart_store::store::Retention, ConfigError> {
        let d = rampart_store::store::Retention::default();
        let field = |name: &str, v: &Option<String>, default: i64| match v {
            None => Ok(default),
            Some(text) => duration_ms(text).ok_or_else(|| {
                ConfigError::new(format!(
                    "retention.{name} = {text:?} is not a duration of 1s to 3650d (a number and s, m, h or d: \"90d\")"
                ))
            }),
        };
        Ok(rampart_store::store::Retention {
            inbox_ms: field("inbox", &self.inbox, d.inbox_ms)?,
            outbox_ms: field("outbox", &self.outbox, d.outbox_ms)?,
            alerts_ms: field("alerts", &self.alerts, d.alerts_ms)?,
        })
    }
}

/// `"90d"`, `"12h"`, `"30m"`, `"45s"` in milliseconds, within 1 s and 3 650 days.
fn duration_ms(text: &str) -> Option<i64> {
    let text = text.trim();
    let unit = text.chars().last()?;
    let n: i64 = text[..text.len() - unit.len_utf8()].trim().parse().ok()?;
    let ms = n.checked_mul(match unit {
        's' => 1_000,
        'm' => 60_000,
        'h' => 3_600_000,
        'd' => 86_400_000,
        _ => return None,
    })?;
    (1_000..=3_650 * 86_400_000).contains(&ms).then_some(ms)
}

/// A configuration file or section that cannot be used: the message names the key and what is
/// allowed, for the operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(String);

impl ConfigError {
    /// An error with `message`, for the operator.
    pub fn new(message: String) -> ConfigError {
        ConfigError(message)
    }
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// The prefix of the environment variables that set nested keys: `RAMPART_A__B__C` sets `a.b.c`.
pub const ENV_PREFIX: &str = "RAMPART_";
/// The separator of nesting levels in those variables' names.
pub const ENV_NESTING: &str = "__";

impl FileConfig {
    /// Parses the file's text.
    pub fn parse(text: &str) -> Result<FileConfig, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::new(e.to_string()))
    }

    /// Parses the file's text with nested keys overridden by environment variables: each
    /// `RAMPART_<A>__<B>[__<C>]` (names lower-cased) sets key `a.b[.c]`, its value read as a TOML
    /// value (`true`, `8`, `1.5`) or else taken as a string. Variables without `__` are the flags'
    /// own (`RAMPART_LISTEN`) and are left to them. Venue sections go where the file keeps them
    /// (`[venues.<name>]`, else `[venue.<name>]`), so they never change the venue list.
    pub fn parse_with_env(
        text: &str,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<FileConfig, ConfigError> {
        let mut table: toml::Table = text.parse().map_err(|e: toml::de::Error| ConfigError::new(e.to_string()))?;
        let mut used = Vec::new();
        for (name, raw) in env {
            let Some(path) = name.strip_prefix(ENV_PREFIX).filter(|p| p.contains(ENV_NESTING)) else { continue };
            let mut keys: Vec<String> = path.split(ENV_NESTING).map(str::to_ascii_lowercase).collect();
            if keys.iter().any(String::is_empty) {
                return Err(ConfigError::new(format!("environment variable {name}: an empty key between '__'")));
            }
            if keys[0] == "venues" && !matches!(table.get("venues"), Some(toml::Value::Table(_))) {
                keys[0] = "venue".to_owned();
            }
            set(&mut table, &keys, env_value(&raw))
                .map_err(|e| ConfigError::new(format!("environment variable {name}: {e}")))?;
            used.push(name);
        }
        toml::Value::Table(table).try_into().map_err(|e: toml::de::Error| {
            let from = if used.is_empty() {
                String::new()
            } else {
                format!(" (with {} from the environment)", used.join(", "))
            };
            ConfigError::new(format!("{e}{from}"))
        })
    }

    /// `venues` as a list, whether written as a string, an array, or a table of per-venue
    /// sections (`[venues.binance]`), whose names are then the list.
    pub fn venue_list(&self) -> Option<String> {
        match &self.venues {
            Some(toml::Value::String(s)) => Some(s.clone()),
            Some(toml::Value::Array(a)) => Some(a.iter().filter_map(|v| v.as_str()).collect::<Vec<_>>().join(",")),
            Some(toml::Value::Table(t)) => Some(t.keys().cloned().collect::<Vec<_>>().join(",")),
            _ => None,
        }
    }

    /// The section of one venue, from `[venues.<name>]` (the spec's spelling) or `[venue.<name>]`.
    pub fn venue_section(&self, name: &str) -> Result<VenueUrls, ConfigError> {
        if let Some(toml::Value::Table(t)) = &self.venues {
            if let Some(v) = t.get(name) {
                return v.clone().try_into().map_err(|e| ConfigError::new(format!("venues.{name}: {e}")));
            }
        }
        Ok(self.venue_urls.get(name).cloned().unwrap_or_default())
    }
}

/// An environment variable's text as a TOML value: a boolean, number or array if it reads as
/// one, else the string itself.
fn env_value(raw: &str) -> toml::Value {
    match format!("v = {raw}").parse::<toml::Table>() {
        Ok(mut t) => t.remove("v").unwrap_or_else(|| toml::Value::String(raw.to_owned())),
        Err(_) => toml::Value::String(raw.to_owned()),
    }
}

/// Sets `value` at `keys` in `table`, making tables on the way; a key that holds a value that
/// is not a table cannot be descended into.
fn set(table: &mut toml::Table, keys: &[String], value: toml::Value) -> Result<(), ConfigError> {
    let Some((last, parents)) = keys.split_last() else { return Ok(()) };
    let mut t = table;
    for k in parents {
        let entry = t.entry(k.clone()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        t = match entry {
            toml::Value::Table(inner) => inner,
            _ => return Err(ConfigError::new(format!("'{k}' is set in the file as a value, not a table"))),
        };
    }
    t.insert(last.clone(), value);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_is_read_as_durations_within_their_limits() {
        let d = rampart_store::store::Retention::default();
        assert_eq!(FileConfig::parse("").expect("empty").retention.retention(), Ok(d));
        assert_eq!((d.inbox_ms, d.outbox_ms, d.alerts_ms), (90 * 86_400_000, 30 * 86_400_000, 90 * 86_400_000));
        let f = FileConfig::parse("[retention]\ninbox = \"12h\"\noutbox = \"30m\"\nalerts = \"45s\"\n").expect("parse");
        let r = f.retention.retention().expect("valid");
        assert_eq!((r.inbox_ms, r.outbox_ms, r.alerts_ms), (43_200_000, 1_800_000, 45_000));
        for bad in ["0s", "3651d", "90", "1w", "-5d", "d", "1.5d"] {
            let f = FileConfig::parse(&format!("[retention]\ninbox = \"{bad}\"\n")).expect("parse");
            let e = f.retention.retention().expect_err(bad);
            assert!(e.to_string().starts_with(&format!("retention.inbox = \"{bad}\" is not a duration")), "{e}");
        }
        assert!(FileConfig::parse("[retention]\nfirings = \"1d\"\n").is_err(), "an unknown key is refused");
    }

    #[test]
    fn the_perpetuals_urls_default_to_the_real_venue_or_beside_a_configured_one() {
        use rampart_engine::Venue;
        let urls = |text: &str| -> VenueUrls { toml::from_str(text).expect("a venue table") };
        let real = urls("").settings(Venue::Binance).expect("defaults");
        assert_eq!(
            (real.perp_rest.as_str(), real.perp_ws.as_str()),
            ("https://fapi.binance.com", "wss://fstream.binance.com/market")
        );
        let sim = urls("rest = \"http://127.0.0.1:9\"\nws = \"ws://127.0.0.1:9/\"\n");
        let b = sim.settings(Venue::Binance).expect("binance");
        assert_eq!((b.perp_rest.as_str(), b.perp_ws.as_str()), ("http://127.0.0.1:9", "ws://127.0.0.1:9/market"));
        let y = sim.settings(Venue::Bybit).expect("bybit");
        assert_eq!(y.perp_ws, "ws://127.0.0.1:9/v5/public/linear");
        let o = sim.settings(Venue::Okx).expect("okx");
        assert_eq!((o.perp_rest.as_str(), o.perp_ws.as_str()), ("http://127.0.0.1:9", "ws://127.0.0.1:9"));
        let given = urls("ws = \"ws://a\"\nperp_ws = \"wss://b/market/\"\nperp_rest = \"https://c\"\n");
        let g = given.settings(Venue::Binance).expect("given");
        assert_eq!((g.perp_rest.as_str(), g.perp_ws.as_str()), ("https://c", "wss://b/market"));
        let e = urls("perp_ws = \"https://b\"\n").settings(Venue::Bybit).expect_err("a scheme");
        assert_eq!(e.to_string(), "venues.bybit.perp_ws must start with ws:// or wss://, not 'https://b'");
        let e = urls("perp_rest = \"ftp://b\"\n").settings(Venue::Okx).expect_err("a scheme");
        assert_eq!(e.to_string(), "venues.okx.perp_rest must start with http:// or https://, not 'ftp://b'");
    }

    #[test]
    fn default_plans_match_decisions() {
        let p = Plans::default();
        assert_eq!(p.allowed(), "free, developer, developer-lite");
        let dev = p.get("developer").expect("developer");
        assert!(dev.api && dev.pct_alerts && dev.repeat);
        assert_eq!((dev.price_alert_cap, dev.burst_per_min, dev.daily_quota), (200, 120, 100_000));
        assert!(!p.get("free").expect("free").api);
        assert_eq!(p.get("developer-lite").expect("lite").daily_quota, 20_000);
        let streams: Vec<u32> = ["free", "developer", "developer-lite"]
            .iter()
            .map(|n| p.get(n).map_or(99, |plan| plan.stream_connections))
            .collect();
        assert_eq!(streams, [0, 5, 2], "decisions.md §12");
    }

    #[test]
    fn file_overrides_plans() {
        let f = FileConfig::parse(
            "listen = \"0.0.0.0:9000\"\nvenues = [\"binance\", \"okx\"]\n[plans.pro]\napi = true\nprice_alert_cap = 1000\npct_alerts = true\nrepeat = true\nburst_per_min = 600\ndaily_quota = 1000000\n",
        )
        .expect("parse");
        assert_eq!(f.venue_list().as_deref(), Some("binance,okx"));
        let mut p = Plans::default();
        p.merge(f.plans);
        assert_eq!(p.get("pro").map(|x| x.burst_per_min), Some(600));
        assert!(FileConfig::parse("bogus = 1").is_err());
    }

    fn env(vars: &[(&str, &str)]) -> Vec<(String, String)> {
        vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn nested_keys_come_from_the_environment() {
        let vars = env(&[
            ("RAMPART_WEBHOOKS__ALLOW_PRIVATE", "true"),
            ("RAMPART_WALLS__MIN_RATIO", "8"),
            ("RAMPART_METRICS__LISTEN", "127.0.0.1:9464"),
            ("RAMPART_VENUES__BINANCE__REST", "http://127.0.0.1:9"),
            ("RAMPART_LISTEN", "ignored here: a flag's own variable"),
            ("HOME", "/root"),
        ]);
        let f = FileConfig::parse_with_env("[walls]\nmin_ratio = 12\n", vars).expect("valid");
        assert!(f.webhooks.allow_private);
        assert_eq!(f.walls.min_ratio, Some(8.0), "the environment overrides the file");
        assert_eq!(f.metrics.listen.as_deref(), Some("127.0.0.1:9464"));
        assert_eq!(f.venue_list(), None, "a venue's section from the environment does not make the venue list");
        let b = f.venue_section("binance").expect("valid").settings(rampart_engine::Venue::Binance).expect("valid");
        assert_eq!(b.rest, "http://127.0.0.1:9");
        // A file with `[venues.okx]` tables keeps them; the variable lands beside them.
        let f = FileConfig::parse_with_env("[venues.okx]\n", env(&[("RAMPART_VENUES__OKX__WS", "ws://127.0.0.1:9")]))
            .expect("valid");
        assert_eq!(f.venue_list().as_deref(), Some("okx"));
        assert_eq!(f.venue_section("okx").expect("valid").ws.as_deref(), Some("ws://127.0.0.1:9"));
    }

    #[test]
    fn bad_environment_keys_are_named() {
        let e = FileConfig::parse_with_env("", env(&[("RAMPART_WALLS__MIN_RATIOS", "8")])).expect_err("unknown key");
        assert!(e.to_string().contains("min_ratios") && e.to_string().contains("RAMPART_WALLS__MIN_RATIOS"), "{e}");
        let e = FileConfig::parse_with_env("", env(&[("RAMPART_WEBHOOKS__ALLOW_PRIVATE", "yes")])).expect_err("type");
        assert!(e.to_string().contains("RAMPART_WEBHOOKS__ALLOW_PRIVATE"), "{e}");
        let e =
            FileConfig::parse_with_env("walls = 1\n", env(&[("RAMPART_WALLS__MIN_RATIO", "8")])).expect_err("shape");
        assert!(e.to_string().contains("RAMPART_WALLS__MIN_RATIO"), "{e}");
        assert!(FileConfig::parse_with_env("", env(&[("RAMPART_WALLS____X", "1")])).is_err());
    }

    #[test]
    fn venue_sections_in_both_spellings() {
        let f = FileConfig::parse(
            "[venues.binance]\nrest = \"http://127.0.0.1:9/\"\nws = \"ws://127.0.0.1:9\"\npairs_per_connection = 3\n[venues.okx]\n",
        )
        .expect("parse");
        assert_eq!(f.venue_list().as_deref(), Some("binance,okx"));
        let b = f.venue_section("binance").expect("valid").settings(rampart_engine::Venue::Binance).expect("valid");
        assert_eq!(
            (b.rest.as_str(), b.ws.as_str(), b.pairs_per_connection),
            ("http://127.0.0.1:9", "ws://127.0.0.1:9", 3)
        );
        let o = f.venue_section("okx").expect("valid").settings(rampart_engine::Venue::Okx).expect("valid");
        assert_eq!(o.ws, "wss://ws.okx.com:8443");
        let f = FileConfig::parse("[venue.bybit]\nws = \"ftp://x\"\n").expect("parse");
        assert!(f.venue_section("bybit").expect("valid").settings(rampart_engine::Venue::Bybit).is_err());
        let f = FileConfig::parse("[venues.bybit]\nbogus = 1\n").expect("parse");
        assert!(f.venue_section("bybit").is_err());
    }
}
