//! Settings every command reads the same way: the `--config` file with its `RAMPART_A__B`
//! overrides, the data directory and the store it holds, the plans, a venue list, the Telegram
//! channel.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use rampart_engine::Venue;
use rampart_net::config::{FileConfig, Plans};
use rampart_store::store::{Store, StoreLocation};

use crate::cli::{CommonArgs, KeysArgs};

/// The `--config` file (none: empty), with nested keys from `RAMPART_A__B` variables.
pub(crate) fn load_file(common: &CommonArgs) -> Result<FileConfig> {
    let (text, source) = match &common.config {
        None => (String::new(), "settings".to_owned()),
        Some(path) => (
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?,
            path.display().to_string(),
        ),
    };
    FileConfig::parse_with_env(&text, std::env::vars()).map_err(|e| anyhow::anyhow!("{source}: {e}"))
}

/// The data directory: the flag, else the file's `data_dir`, else `./data`.
pub(crate) fn data_dir(common: &CommonArgs, file: &FileConfig) -> PathBuf {
    common
        .data_dir
        .clone()
        .or_else(|| file.data_dir.as_ref().map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("./data"))
}

/// The store: PostgreSQL when a URL is given, else SQLite in the data directory.
pub(crate) fn store_location(common: &CommonArgs, file: &FileConfig) -> StoreLocation {
    match &common.postgres {
        Some(url) => StoreLocation::Postgres(url.clone()),
        None => StoreLocation::Sqlite(data_dir(common, file)),
    }
}

/// The built-in plans with the file's added or changed.
pub(crate) fn plans(file: &FileConfig) -> Plans {
    let mut p = Plans::default();
    p.merge(file.plans.clone());
    p
}

/// The store and plans the `keys` and `site-alerts` commands work on.
pub(crate) fn open_store(args: &KeysArgs) -> Result<(Store, Plans)> {
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

/// A comma-separated venue list: each known, none twice, at least one; sorted.
pub(crate) fn parse_venues(list: &str) -> Result<Vec<Venue>> {
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

/// The Telegram bot of `[channels.telegram]`, checked (`None` without the section).
pub(crate) fn telegram(file: &FileConfig) -> Result<Option<rampart_delivery::telegram::TelegramChannel>> {
    let Some(t) = &file.channels.telegram else { return Ok(None) };
    let channel = rampart_delivery::telegram::TelegramChannel::new(t.base_url.as_deref(), &t.token)
        .map_err(|e| anyhow::anyhow!(e))?;
    tracing::info!("Telegram channel on, through {}", channel.base_url());
    Ok(Some(channel))
}

/// The data directory a serve run would use (for tools and tests).
pub fn default_data_dir() -> &'static Path {
    Path::new("./data")
}
