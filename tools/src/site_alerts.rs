//! `rampart site-alerts`: the site's market alerts of one account (named by one of
//! its keys), managed through the same internal interface the site's pages use
//! (`rampart_net::site_alerts`). A running server evaluates a change within its next poll of the store.

use anyhow::{bail, Context, Result};
use clap::Subcommand;
use rampart_net::config::Plans;
use rampart_net::site_alerts::{self, SiteError};
use rampart_state::clock;
use rampart_state::json::Json;
use rampart_store::store::{KeyRow, Store};
use rampart_store::text::site_alert::write_site_alert;

/// The `site-alerts` commands.
#[derive(Subcommand, Debug)]
pub enum SiteAlertsCommand {
    /// Create a market alert from a JSON body (`decisions.md` §10; fields as docs/api.md lists
    /// them); prints the alert. A density alert is a wall alert now (§15): made on the site or
    /// with `POST /v1/alerts`.
    Create {
        /// A key of the account.
        #[arg(long)]
        key: String,
        /// The alert, e.g. '{"type":"market","exchange":"binance","number":"sentiment","interval":"1h","direction":"above","threshold":70}'.
        body: String,
    },
    /// List the account's site alerts (active and triggered).
    List {
        /// A key of the account.
        #[arg(long)]
        key: String,
    },
    /// Delete one of the account's site alerts.
    Delete {
        /// A key of the account.
        #[arg(long)]
        key: String,
        /// Alert id.
        id: i64,
    },
}

/// Runs one command against `store` with the configured `plans`; prints the JSON answer.
pub fn run(command: SiteAlertsCommand, store: &Store, plans: &Plans) -> Result<()> {
    let now = clock::wall_ms();
    let mut j = Json::with_capacity(512);
    match command {
        SiteAlertsCommand::Create { key, body } => {
            let account = account(store, &key)?;
            let plan = plans
                .get(&account.plan)
                .with_context(|| format!("the account's plan '{}' is not configured", account.plan))?;
            let request = site_alerts::parse_request(body.as_bytes()).map_err(SiteError::Invalid)?;
            let row = site_alerts::create(store, account.account_id, plan, request, now)?;
            j.raw("{\"data\":");
            write_site_alert(&mut j, &row, None);
            j.raw("}");
        }
        SiteAlertsCommand::List { key } => {
            let account = account(store, &key)?;
            j.raw("{\"data\":[");
            for (i, row) in store.list_site_alerts(account.account_id)?.iter().enumerate() {
                if i > 0 {
                    j.raw(",");
                }
                write_site_alert(&mut j, row, None);
            }
            j.raw("]}");
        }
        SiteAlertsCommand::Delete { key, id } => {
            let account = account(store, &key)?;
            site_alerts::delete(store, account.account_id, id, now)?;
            j.raw("{\"data\":{\"id\":").int(id).raw(",\"deleted\":true}}");
        }
    }
    println!("{}", j.finish());
    Ok(())
}

/// The account holding `key`; a revoked or unknown key is refused.
fn account(store: &Store, key: &str) -> Result<KeyRow> {
    match store.lookup_key(key.trim())? {
        Some(k) if k.revoked_ms.is_none() => Ok(k),
        Some(_) => bail!("401 key revoked"),
        None => bail!("401 unknown key"),
    }
}
