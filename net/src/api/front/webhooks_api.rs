//! `GET /v1/webhook-secret` (whether webhooks are signed, since when, and until when the previous
//! secret signs too; never a secret), `POST /v1/webhook-secret` (create or rotate the account's webhook signing secret, shown in
//! this answer only) and `DELETE /v1/webhook-secret` (end signing), `decisions.md` §13. The
//! signing itself is the sender's (`rampart_delivery::signing`); a secret is never logged.

use hyper::header::{HeaderValue, CACHE_CONTROL};
use hyper::StatusCode;

use std::sync::Arc;

use super::answer::{error, respond, ApiError, Resp};
use rampart_state::clock;
use rampart_state::json::Json;
use rampart_store::storage::Writer;
use rampart_store::storage::{StorageHealth, StorageThread};
use rampart_store::store::KeyRow;

/// The account's webhook signing secret.
pub struct WebhooksApi {
    storage: StorageThread,
    health: Arc<StorageHealth>,
    /// How long a rotated-out secret goes on signing.
    previous_secret_ms: i64,
}

impl WebhooksApi {
    /// Secrets stored through `storage`; one rotated out signs for `previous_secret_ms` more.
    pub(super) fn new(storage: StorageThread, health: Arc<StorageHealth>, previous_secret_ms: i64) -> WebhooksApi {
        WebhooksApi { storage, health, previous_secret_ms }
    }

    /// `{"data":{"signing","createdAt","previousUntil"}}`: the account's signing as it stands.
    pub(super) async fn signing(&self, account: &KeyRow, now_ms: i64) -> Resp {
        let acc = account.account_id;
        let state = match self.storage.run(move |store| store.webhook_signing(acc, now_ms)).await {
            Ok(s) => s,
            Err(e) => return ApiError::from(e).into_response(),
        };
        let mut j = Json::with_capacity(128);
        let time = |j: &mut Json, ms: Option<i64>| {
            match ms {
                Some(t) => j.str(&clock::iso8601(t)),
                None => j.raw("null"),
            };
        };
        j.raw("{\"data\":{\"signing\":").bool(state.is_some()).raw(",\"createdAt\":");
        time(&mut j, state.map(|s| s.created_ms));
        j.raw(",\"previousUntil\":");
        time(&mut j, state.and_then(|s| s.previous_until_ms));
        j.raw("}}");
        respond(StatusCode::OK, j.finish())
    }

    /// Makes a new secret the account's; the one it replaces goes on signing for
    /// `previous_secret_ms` (24 h), so receivers can move to the new one.
    pub(super) async fn rotate(&self, account: &KeyRow, now_ms: i64) -> Resp {
        let Ok(secret) = rampart_delivery::signing::new_secret() else {
            return error(StatusCode::SERVICE_UNAVAILABLE, "no randomness for a secret; retry");
        };
        let (acc, keep, stored) = (account.account_id, self.previous_secret_ms, secret.clone());
        let set = self.storage.run(move |store| store.set_webhook_secret(acc, &stored, now_ms, keep)).await;
        self.health.record(Writer::Front, &set, now_ms);
        if let Err(e) = set {
            return ApiError::from(e).into_response();
        }
        let mut j = Json::with_capacity(96);
        j.raw("{\"data\":{\"secret\":").str(&secret).raw("}}");
        let mut r = respond(StatusCode::OK, j.finish());
        r.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        r
    }

    /// Ends signing: the account's secrets are forgotten and its webhooks go unsigned.
    pub(super) async fn end(&self, account: &KeyRow, now_ms: i64) -> Resp {
        let acc = account.account_id;
        let ended = self.storage.run(move |store| store.end_webhook_secret(acc)).await;
        self.health.record(Writer::Front, &ended, now_ms);
        match ended {
            Ok(_) => respond(StatusCode::OK, "{\"data\":{\"signing\":false}}".to_owned()),
            Err(e) => ApiError::from(e).into_response(),
        }
    }
}
