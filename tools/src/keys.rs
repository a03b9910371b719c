//! `rampart keys create|list|revoke`: API keys in the server's store, each change waited on
//! until the running servers have applied it.

use std::time::Duration;

use anyhow::{bail, Result};
use rampart_state::clock;
use rampart_store::store::{Revoked, Store};

use crate::cli::{KeysArgs, KeysCommand};
use crate::config::open_store;

/// `rampart keys create|list|revoke` on the store the flags name.
pub(crate) fn run(command: KeysCommand, args: KeysArgs) -> Result<()> {
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
