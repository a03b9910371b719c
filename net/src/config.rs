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
    /// Requests admitted in any 60-second window.
    pub burst_per_min: u32,
    /// Requests admitted per UTC day.
    pub daily_quota: u64,
}

/// The plans, by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plans {
    plans: Vec<Plan>,
}

impl Default for Plans {
    fn default() -> Plans {
        let plan = |name: &str, api, cap, pct, repeat, quota| Plan {
            name: name.to_owned(),
            api,
            price_alert_cap: cap,
            pct_alerts: pct,
            repeat,
            burst_per_min: 120,
            daily_quota: quota,
        };
        Plans {
            plans: vec![
                plan("free", false, 10, false, false, 1_000),
                plan("developer", true, 200, true, true, 100_000),
                plan("developer-lite", true, 50, false, false, 20_000),
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

/// Base URLs of one venue's REST and WebSocket endpoints.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VenueUrls {
    /// REST base URL.
    pub rest: Option<String>,
    /// WebSocket base URL.
    pub ws: Option<String>,
}

/// Webhook settings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookSettings {
    /// Permit private and loopback targets (local testing only; logged loudly).
    #[serde(default)]
    pub allow_private: bool,
}

/// Wall detection settings.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WallSettings {
    /// A level is a wall at this multiple of the median level size (default 10).
    pub min_ratio: Option<f64>,
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
    /// `--sim-pairs`.
    pub sim_pairs: Option<usize>,
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
}

impl FileConfig {
    /// Parses the file's text.
    pub fn parse(text: &str) -> Result<FileConfig, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    /// `venues` as a list, whether written as a string or an array.
    pub fn venue_list(&self) -> Option<String> {
        match &self.venues {
            Some(toml::Value::String(s)) => Some(s.clone()),
            Some(toml::Value::Array(a)) => Some(a.iter().filter_map(|v| v.as_str()).collect::<Vec<_>>().join(",")),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_plans_match_decisions() {
        let p = Plans::default();
        assert_eq!(p.allowed(), "free, developer, developer-lite");
        let dev = p.get("developer").expect("developer");
        assert!(dev.api && dev.pct_alerts && dev.repeat);
        assert_eq!((dev.price_alert_cap, dev.burst_per_min, dev.daily_quota), (200, 120, 100_000));
        assert!(!p.get("free").expect("free").api);
        assert_eq!(p.get("developer-lite").expect("lite").daily_quota, 20_000);
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
}
