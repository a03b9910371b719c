//! Who may come in: the API keys (the key table, a lookup in storage for a key made a moment ago
//! elsewhere), their plans, burst and quota and the keyless budget per address (`api::limit`),
//! the site's own budget per account, and the site's signed-in sessions (this front's copy,
//! `session::Sessions`, and the database's). Every route asks the gate before it answers;
//! the streams ask it again for as long as they run (`stream_admission`).

use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use hyper::header::{AUTHORIZATION, COOKIE};
use hyper::http::request::Parts;
use hyper::StatusCode;

use super::answer::ApiError;
use super::session::{self, Session, Sessions};
use crate::api::keys::KeyWatcher;
use crate::api::limit::{Limiter, Refusal, Usage};
use crate::config::Plans;
use rampart_state::clock::SharedClock;
use rampart_store::storage::StorageThread;
use rampart_store::store::{hash_key, is_key_shaped, KeyRow};

/// Longest a key change made through the site waits for every running server to apply it
/// (as `rampart keys` does); past it the answer goes anyway and the servers behind apply it at
/// their next poll.
const KEYS_APPLIED_WAIT: Duration = Duration::from_secs(3);

/// Site requests (`/site/v1/...`) admitted per account in any 60 s: the pages poll every few
/// seconds, so this is several open tabs' worth.
pub const SITE_BURST_PER_MIN: u32 = 600;
/// Site requests admitted per account per UTC day.
pub const SITE_DAILY_QUOTA: u64 = 1_000_000;

/// The key table, the limits and the sessions.
pub struct Gate {
    /// The key table in memory, kept current off the request path.
    pub(super) keys: KeyWatcher,
    /// Key lookups the table cannot answer, sessions, and the wait for key changes.
    storage: StorageThread,
    /// Every front thread's requests count here, so a key's limits are exact however its
    /// requests are spread.
    limiter: Mutex<Limiter>,
    pub(super) plans: Plans,
    /// The site's signed-in sessions, this front's copy.
    sessions: Mutex<Sessions>,
    /// Counts what ended open streams' admissions in this process (a sign-out, a key revoked
    /// through the site): each stream looks at once when it moves, not at its next look.
    ended: tokio::sync::watch::Sender<u64>,
    pub(super) clock: SharedClock,
}

/// The key in `Authorization: Bearer <key>`, if the header holds one of a key's shape.
pub(super) fn bearer_token(headers: &hyper::HeaderMap) -> Option<&str> {
    headers
        .get(AUTHORIZATION)?
        .to_str()
        .ok()
        .and_then(|h| h.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, t)| t.trim())
        .filter(|t| is_key_shaped(t))
}

/// `m`'s value. A thread that panicked holding it left it whole (every critical section here is a
/// single call on a sans-I/O table), so a poisoned lock is used as it is.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The session id in the request's cookie.
pub(super) fn session_cookie(req: &Parts) -> Option<&str> {
    req.headers.get_all(COOKIE).iter().filter_map(|v| v.to_str().ok()).find_map(session::cookie_id)
}

impl Gate {
    /// A gate over `keys`, admitting `unauthenticated_per_min` keyless requests per address.
    pub(super) fn new(
        keys: KeyWatcher,
        storage: StorageThread,
        plans: Plans,
        clock: SharedClock,
        unauthenticated_per_min: Option<usize>,
    ) -> Gate {
        let limiter = unauthenticated_per_min.map_or_else(Limiter::default, Limiter::new);
        let (ended, _) = tokio::sync::watch::channel(0);
        let sessions = Mutex::new(Sessions::new());
        Gate { keys, storage, limiter: Mutex::new(limiter), plans, sessions, ended, clock }
    }

    /// The key whose text is `token`: the in-memory table's entry, else storage's (a key made
    /// a moment ago, by the CLI or on another api node), which the table keeps until its next
    /// reload. A miss in the table is never the last word (`decisions.md` §1); an address that
    /// has spent its unauthenticated budget gets no lookup. `None`: unknown, or storage could
    /// not answer.
    pub(super) async fn find_key(&self, token: &str, peer: IpAddr, now_ms: i64) -> Option<Arc<KeyRow>> {
        let hash = hash_key(token);
        if let Some(row) = self.keys.get(&hash) {
            return Some(row);
        }
        if lock(&self.limiter).unauthenticated_spent(peer, now_ms) {
            return None;
        }
        let text = token.to_owned();
        let row = Arc::new(self.storage.run(move |store| store.lookup_key(&text)).await.ok()??);
        self.keys.learn(hash, row.clone());
        Some(row)
    }

    /// Waits, at most [`KEYS_APPLIED_WAIT`], until every running server's key table holds the
    /// key change just committed (a key made or revoked through the site), so the change is in
    /// force on every api node once the answer is sent. Storage failing ends the wait.
    pub(super) async fn keys_applied(&self) {
        let Ok(version) = self.storage.run(|store| store.keys_version()).await else { return };
        let deadline = std::time::Instant::now() + KEYS_APPLIED_WAIT;
        loop {
            let alive_since = self.clock.now_ms() - rampart_store::store::KEY_WATCHER_ALIVE_MS;
            let behind = self.storage.run(move |store| store.key_watchers_behind(version, alive_since)).await;
            match behind {
                Ok(n) if n > 0 && std::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                _ => return,
            }
        }
    }

    /// Refuses a request with no valid key: 401, or 429 once the address has sent too many.
    pub(super) fn unauthenticated(&self, peer: IpAddr, message: &str, now_ms: i64) -> ApiError {
        let admitted = lock(&self.limiter).admit_unauthenticated(peer, now_ms);
        match admitted {
            Ok(()) => ApiError::new(StatusCode::UNAUTHORIZED, message),
            Err(Refusal::Burst { retry_after_s } | Refusal::Quota { retry_after_s }) => {
                ApiError::too_many("too many requests without a valid API key from this address", retry_after_s)
            }
        }
    }

    /// Authenticates, authorises and rate-limits; `Err` is the response to send instead.
    pub(super) async fn admit(&self, req: &Parts, peer: IpAddr, now_ms: i64) -> Result<(Arc<KeyRow>, Usage), ApiError> {
        if !req.headers.contains_key(AUTHORIZATION) {
            return Err(self.unauthenticated(peer, "missing API key", now_ms));
        }
        let Some(token) = bearer_token(&req.headers) else {
            return Err(self.unauthenticated(peer, "invalid API key", now_ms));
        };
        let Some(row) = self.find_key(token, peer, now_ms).await else {
            return Err(self.unauthenticated(peer, "invalid API key", now_ms));
        };
        if row.revoked_ms.is_some() {
            return Err(self.unauthenticated(peer, "revoked API key", now_ms));
        }
        let Some(plan) = self.plans.get(&row.plan).filter(|p| p.api) else {
            return Err(ApiError::new(StatusCode::FORBIDDEN, "API access needs an active Developer plan"));
        };
        let admitted = lock(&self.limiter).admit_key(row.id, plan.burst_per_min, plan.daily_quota, now_ms);
        match admitted {
            Ok(usage) => Ok((row, usage)),
            Err(Refusal::Burst { retry_after_s }) => Err(ApiError::over_limit(
                format!("rate limit exceeded: {} requests per minute", plan.burst_per_min),
                retry_after_s,
                plan.burst_per_min,
            )),
            Err(Refusal::Quota { retry_after_s }) => Err(ApiError::over_limit(
                format!("daily quota exceeded ({} requests per day on plan {})", plan.daily_quota, plan.name),
                retry_after_s,
                plan.burst_per_min,
            )),
        }
    }

    /// The site's budget of `account` (kept apart from its keys' by a negative id).
    pub(super) fn admit_site(&self, account: i64, now_ms: i64) -> Result<(), ApiError> {
        let admitted = lock(&self.limiter).admit_key(-account, SITE_BURST_PER_MIN, SITE_DAILY_QUOTA, now_ms);
        match admitted {
            Ok(_) => Ok(()),
            Err(Refusal::Burst { retry_after_s }) => Err(ApiError::too_many(
                format!("site rate limit exceeded: {SITE_BURST_PER_MIN} requests per minute"),
                retry_after_s,
            )),
            Err(Refusal::Quota { retry_after_s }) => Err(ApiError::too_many(
                format!("site daily quota exceeded ({SITE_DAILY_QUOTA} requests per day)"),
                retry_after_s,
            )),
        }
    }

    /// Operator endpoints need a key whose plan has `operator = true` (none of the built-in
    /// plans does): they act on the whole process, not on one account.
    pub(super) fn operator(&self, account: &KeyRow) -> Result<(), ApiError> {
        match self.plans.get(&account.plan) {
            Some(p) if p.operator => Ok(()),
            _ => Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "operator access needed: this key's plan does not have operator = true",
            )),
        }
    }

    /// The plan of the key a session was opened with (empty when the table no longer has it).
    pub(super) fn plan_of(&self, s: &Session) -> String {
        self.keys.get(&s.key_hash).map_or_else(String::new, |k| k.plan.clone())
    }

    /// The request's session: 401 without one (none, ended, idle too long, its key revoked).
    pub(super) async fn signed_in(&self, req: &Parts, now_ms: i64) -> Result<Session, ApiError> {
        let Some(id) = session_cookie(req) else {
            return Err(ApiError::new(StatusCode::UNAUTHORIZED, "not signed in"));
        };
        self.session_of(id, now_ms).await?.ok_or_else(|| ApiError::new(StatusCode::UNAUTHORIZED, "not signed in"))
    }

    /// The session named `id` at `now_ms`: this front's copy while fresh, else the database's
    /// (`session`); `None` when it ended (signed out anywhere, idle too long, its key revoked).
    pub(super) async fn session_of(&self, id: &str, now_ms: i64) -> Result<Option<Session>, ApiError> {
        let h = session::hash(id);
        let revoked = |s: &Session| self.keys.get(&s.key_hash).is_none_or(|k| k.revoked_ms.is_some());
        let held = lock(&self.sessions).fresh(&h, now_ms, revoked);
        if let Some(s) = held {
            return Ok(Some(s));
        }
        let stored = self.storage.run(move |store| store.site_session(&h, now_ms, session::SESSION_IDLE_MS)).await?;
        let found = stored.map(|r| Session::from_record(&r)).filter(|s| !revoked(s));
        match &found {
            Some(s) => lock(&self.sessions).put(h, s.clone(), now_ms),
            None => {
                lock(&self.sessions).close(&h);
            }
        }
        Ok(found)
    }

    /// The session of a state-changing request, whose `X-CSRF-Token` must be its token (403).
    pub(super) async fn changing(&self, req: &Parts, now_ms: i64) -> Result<Session, ApiError> {
        let s = self.signed_in(req, now_ms).await?;
        let sent = req.headers.get(session::CSRF_HEADER).and_then(|v| v.to_str().ok());
        if !session::csrf_ok(&s, sent) {
            return Err(ApiError::new(StatusCode::FORBIDDEN, "missing or wrong CSRF token"));
        }
        Ok(s)
    }

    /// Keeps `s` (just opened, stored already) in this front's copy.
    pub(super) fn hold_session(&self, id_hash: [u8; 32], s: Session, now_ms: i64) {
        lock(&self.sessions).put(id_hash, s, now_ms);
    }

    /// Forgets the session hashing to `id_hash` in this front's copy (signed out), remembers it
    /// ended, and has this process's streams look at once ([`Gate::admissions_moved`]).
    pub(super) fn drop_session(&self, id_hash: &[u8; 32]) {
        lock(&self.sessions).close(id_hash);
        self.admissions_moved();
    }

    /// Whether this process saw the session hashing to `id_hash` end: the check before each
    /// batch a site stream writes (no database read).
    pub(super) fn session_ended_now(&self, id_hash: &[u8; 32]) -> bool {
        lock(&self.sessions).ended(id_hash)
    }

    /// Something that admitted streams may no longer stand (a sign-out, a key revoked here):
    /// every open stream of this process looks now.
    pub(super) fn admissions_moved(&self) {
        self.ended.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A receiver that changes at each [`Gate::admissions_moved`].
    pub(super) fn admissions(&self) -> tokio::sync::watch::Receiver<u64> {
        self.ended.subscribe()
    }

    /// Whether the key table says the key hashing to `hash` is revoked: the check before each
    /// batch a stream writes, so nothing is written once the table knows (between two looks).
    pub(super) fn key_revoked_now(&self, hash: &[u8; 32]) -> bool {
        self.keys.get(hash).is_some_and(|row| row.revoked_ms.is_some())
    }

    /// Whether the key hashing to `hash` is revoked (or gone). A key the table does not hold
    /// (a reload that raced a key learned from storage) is asked of storage, and learned again.
    pub(super) async fn key_revoked(&self, hash: &[u8; 32]) -> bool {
        if let Some(row) = self.keys.get(hash) {
            return row.revoked_ms.is_some();
        }
        let h = *hash;
        match self.storage.run(move |store| store.lookup_key_hash(&h)).await {
            Ok(Some(row)) if row.revoked_ms.is_none() => {
                self.keys.learn(h, Arc::new(row));
                false
            }
            Ok(_) => true,
            Err(_) => false,
        }
    }
}
