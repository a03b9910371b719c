//! Webhook signing secrets (`decisions.md` §13): the current one and the one it replaced, which
//! signs for 24 h after a rotation.

use super::conn::Store;
use crate::db::{vals, StoreError};

/// An account's webhook signing, as `GET /v1/webhook-secret` shows it (never the secrets).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SigningState {
    /// When the current secret was made.
    pub created_ms: i64,
    /// Until when the secret it replaced signs too; `None` when none does any more.
    pub previous_until_ms: Option<i64>,
}

impl Store {
    /// Makes `secret` the account's webhook signing secret (`decisions.md` §13); the one it
    /// replaces, if any, goes on signing until `now_ms + previous_for_ms`.
    pub fn set_webhook_secret(
        &self,
        account_id: i64,
        secret: &str,
        now_ms: i64,
        previous_for_ms: i64,
    ) -> Result<(), StoreError> {
        self.db.execute(
            "INSERT INTO webhook_secrets (account_id, secret, previous, previous_until_ms, created_ms)
             VALUES (?1, ?2, NULL, NULL, ?3)
             ON CONFLICT(account_id) DO UPDATE SET previous = webhook_secrets.secret,
                previous_until_ms = ?4, secret = excluded.secret, created_ms = excluded.created_ms",
            vals![account_id, secret, now_ms, now_ms + previous_for_ms],
        )?;
        Ok(())
    }

    /// Whether the account signs its webhooks, without the secrets: when the current secret was
    /// made, and until when the one it replaced still signs (`None` once that time is past).
    pub fn webhook_signing(&self, account_id: i64, now_ms: i64) -> Result<Option<SigningState>, StoreError> {
        let row = self.db.query_opt(
            "SELECT created_ms, previous_until_ms FROM webhook_secrets WHERE account_id = ?1",
            vals![account_id],
            |r| Ok((r.get::<i64>(0)?, r.get::<Option<i64>>(1)?)),
        )?;
        Ok(row.map(|(created_ms, until)| SigningState { created_ms, previous_until_ms: until.filter(|&u| u > now_ms) }))
    }

    /// Ends signing for the account: its secrets are forgotten. Whether it had one.
    pub fn end_webhook_secret(&self, account_id: i64) -> Result<bool, StoreError> {
        Ok(self.db.execute("DELETE FROM webhook_secrets WHERE account_id = ?1", vals![account_id])? > 0)
    }

    /// The secrets that sign the account's webhooks at `now_ms`: the current one, then the one
    /// it replaced while that still signs. Empty: deliveries are not signed.
    pub fn webhook_secrets(&self, account_id: i64, now_ms: i64) -> Result<Vec<String>, StoreError> {
        Ok(self.webhook_secrets_of(&[account_id], now_ms)?.pop().unwrap_or_default())
    }

    /// [`Store::webhook_secrets`] of several accounts, in order (one pipelined round trip on
    /// PostgreSQL).
    pub fn webhook_secrets_of(&self, account_ids: &[i64], now_ms: i64) -> Result<Vec<Vec<String>>, StoreError> {
        let sets: Vec<_> = account_ids.iter().map(|id| vals![*id].to_vec()).collect();
        let rows = self.db.query_opt_each(
            "SELECT secret, previous, previous_until_ms FROM webhook_secrets WHERE account_id = ?1",
            &sets,
            |r| Ok((r.get::<String>(0)?, r.get::<Option<String>>(1)?, r.get::<Option<i64>>(2)?)),
        )?;
        let secrets = |row: Option<(String, Option<String>, Option<i64>)>| {
            let Some((secret, previous, until)) = row else { return Vec::new() };
            let mut out = vec![secret];
            if let (Some(p), Some(until)) = (previous, until) {
                if until > now_ms {
                    out.push(p);
                }
            }
            out
        };
        Ok(rows.into_iter().map(secrets).collect())
    }
}
