//! The site's JSON routes under `/site/` (`decisions.md` §10): sign-in with a key, a session
//! cookie and a CSRF token on every state change, sign-out, and the site's own density and
//! market alerts through `crate::site_alerts`. Open to every plan (the API's 403 is for `/v1` only).
//!
//! - `POST /site/signin` `{"key"}` → `{"data":{"accountId","plan","csrf"}}` and the cookie; a
//!   wrong key is 401 and counts against the address like a keyless API request.
//! - `GET /site/session` → the same, or 401 `not signed in`.
//! - `POST /site/signout` → ends the session and clears the cookie.
//! - `GET /site/site-alerts`, `POST /site/site-alerts`, `DELETE /site/site-alerts/{id}`.
//! - `/site/v1/...`: every `/v1` route but the operator's (`/v1/debug/...`, 404), with the
//!   session for the key, the same bodies and errors; an alert created here has no webhook URL
//!   (422 if one is sent). These draw on a budget of the site's own per account
//!   (`gate::SITE_BURST_PER_MIN`, `gate::SITE_DAILY_QUOTA`), never on the API key's quota, so a page left
//!   open does not eat a bot's requests and the API's limits stay as the plan says.
//! - `GET /site/keys`, `POST /site/keys` `{"label"}` (the key is shown in that answer only),
//!   `DELETE /site/keys/{id}`: the account's own keys (another's is 404 `unknown key`).
//! - `GET /site/channels`, `PUT /site/channels` `{"telegramChatId"}`: the Telegram chat id
//!   (digits with an optional `-`, or `@name`; `null` removes it).
//! - `GET /site/events`: the live inbox, an alias of `/site/v1/stream?channels=alerts`
//!   (`stream_api::StreamApi::site_events`).
//!
//! Every state-changing route needs the session and its token in `X-CSRF-Token` (403
//! otherwise), checked before the body is read. Answers are `Cache-Control: no-store`.

use std::net::IpAddr;

use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE, SET_COOKIE};
use hyper::http::request::Parts;
use hyper::StatusCode;

use std::rc::Rc;
use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::api::front::answer::{respond, ApiError, Resp};
use crate::api::front::books::Books;
use crate::api::front::gate::{session_cookie, Gate};
use crate::api::front::request_body::read_body;
use crate::api::front::session::{self, Session};
use crate::config::Plan;
use crate::site_alerts::{self, SiteError};
use rampart_state::board::Board;
use rampart_state::json::Json;
use rampart_store::storage::Writer;
use rampart_store::storage::{StorageHealth, StorageThread};
use rampart_store::store::{hash_key, KeyRow, NewAlert, Revoked, SiteCondition, SiteRequest, ACCOUNT_KEYS_MAX};

/// The fields a sign-in body may have.
const SIGNIN_FIELDS: [&str; 1] = ["key"];
/// The fields of `POST /site/keys`.
const KEY_FIELDS: [&str; 1] = ["label"];
/// The fields of `PUT /site/channels`.
const CHANNEL_FIELDS: [&str; 1] = ["telegramChatId"];
/// Longest key label, in characters.
const KEY_LABEL_CHARS_MAX: usize = 100;

impl From<SiteError> for ApiError {
    fn from(e: SiteError) -> ApiError {
        match e {
            SiteError::Invalid(i) => ApiError::from(i),
            SiteError::Store(s) => ApiError::from(s),
        }
    }
}

/// Refuses a sign-in another site's page could have sent (login CSRF, `decisions.md` §10): its
/// body must be JSON (`Content-Type: application/json`, which a cross-site form or a "simple"
/// cross-origin request cannot send without the browser's preflight, which the front never
/// grants), and a browser's `Sec-Fetch-Site` and `Origin`, when present, must say this site.
/// Clients that are not browsers send neither and are unaffected.
pub(in crate::api::front) fn signin_from_this_site(req: &Parts) -> Result<(), ApiError> {
    let header = |name: &str| req.headers.get(name).and_then(|v: &HeaderValue| v.to_str().ok());
    let json = header(CONTENT_TYPE.as_str()).and_then(|t| t.split(';').next()).map(str::trim);
    if !json.is_some_and(|t| t.eq_ignore_ascii_case("application/json")) {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "sign-in takes a JSON body (Content-Type: application/json)",
        ));
    }
    let cross = || Err(ApiError::new(StatusCode::FORBIDDEN, "sign-in from another site is refused"));
    if header("sec-fetch-site").is_some_and(|s| s != "same-origin" && s != "none") {
        return cross();
    }
    if let Some(origin) = header("origin") {
        let host = header("host").unwrap_or("");
        let authority = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://"));
        if host.is_empty() || authority != Some(host) {
            return cross();
        }
    }
    Ok(())
}

/// `r` with `Cache-Control: no-store`, as every answer of the site's routes.
pub(in crate::api::front) fn no_store(mut r: Resp) -> Resp {
    r.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// `r` with the `Set-Cookie` that stores session `id` (`None`: clears it).
fn with_cookie(mut r: Resp, id: Option<&str>) -> Resp {
    // Hex ids and fixed attributes: always a valid header value.
    if let Ok(v) = HeaderValue::from_str(&session::set_cookie(id)) {
        r.headers_mut().insert(SET_COOKIE, v);
    }
    r
}

/// Whether a create body names a webhook (a field `webhook_url` that is not null); a body that
/// is not a JSON object is left to the API's own parser and its messages.
pub(in crate::api::front) fn has_webhook_url(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("webhook_url").cloned())
        .is_some_and(|u| !u.is_null())
}

fn channels_body(chat: Option<&str>, telegram_on: bool) -> String {
    let mut j = Json::with_capacity(96);
    j.raw("{\"data\":{\"telegramChatId\":");
    match chat {
        Some(c) => j.str(c),
        None => j.raw("null"),
    };
    j.raw(",\"telegramEnabled\":").bool(telegram_on).raw("}}");
    j.finish()
}

/// One key as the settings page lists it (never the key itself, which is not kept).
fn write_key(j: &mut Json, k: &KeyRow, current: bool) {
    j.raw("{\"id\":").int(k.id).raw(",\"label\":");
    match &k.label {
        Some(l) => j.str(l),
        None => j.raw("null"),
    };
    j.raw(",\"plan\":").str(&k.plan).raw(",\"createdAt\":").int(k.created_ms).raw(",\"revokedAt\":");
    match k.revoked_ms {
        Some(t) => j.int(t),
        None => j.raw("null"),
    };
    j.raw(",\"current\":").raw(if current { "true" } else { "false" }).raw("}");
}

fn session_body(s: &Session, plan: &str) -> String {
    let mut j = Json::with_capacity(160);
    j.raw("{\"data\":{\"accountId\":").int(s.account_id).raw(",\"plan\":").str(plan);
    j.raw(",\"csrf\":").str(&s.csrf).raw("}}");
    j.finish()
}

/// The site's own routes: sign-in and sessions, the account's keys, its Telegram chat and its
/// site alerts.
pub struct SiteApi {
    gate: Arc<Gate>,
    books: Rc<Books>,
    /// Whether a site alert could fire now (`site_alerts::waiting`).
    board: Arc<ArcSwap<Board>>,
    storage: StorageThread,
    health: Arc<StorageHealth>,
    /// The operator configured a Telegram bot: the settings page says whether a chat id is used.
    telegram_on: bool,
}

/// What a [`SiteApi`] reads besides the gate and the books.
pub struct SiteParts {
    pub board: Arc<ArcSwap<Board>>,
    pub storage: StorageThread,
    pub health: Arc<StorageHealth>,
    pub telegram_on: bool,
}

impl SiteApi {
    /// The site's routes behind `gate`, on the pairs of `books`.
    pub(in crate::api::front) fn new(gate: Arc<Gate>, books: Rc<Books>, parts: SiteParts) -> SiteApi {
        let SiteParts { board, storage, health, telegram_on } = parts;
        SiteApi { gate, books, board, storage, health, telegram_on }
    }

    /// `GET /site/session`: the session, its plan and its CSRF token.
    pub(in crate::api::front) async fn session(&self, req: &Parts, now_ms: i64) -> Result<Resp, ApiError> {
        let s = self.gate.signed_in(req, now_ms).await?;
        Ok(respond(StatusCode::OK, session_body(&s, &self.gate.plan_of(&s))))
    }

    pub(in crate::api::front) async fn list_keys(&self, req: &Parts, now_ms: i64) -> Result<Resp, ApiError> {
        let s = self.gate.signed_in(req, now_ms).await?;
        let acc = s.account_id;
        let rows = self.storage.run(move |store| store.account_keys(acc)).await?;
        let mut j = Json::with_capacity(64 + rows.len() * 160);
        j.raw("{\"data\":[");
        for (i, k) in rows.iter().enumerate() {
            if i > 0 {
                j.raw(",");
            }
            write_key(&mut j, k, k.id == s.key_id);
        }
        j.raw("]}");
        Ok(respond(StatusCode::OK, j.finish()))
    }

    pub(in crate::api::front) async fn add_key(
        &self,
        req: &Parts,
        body: hyper::body::Incoming,
        now_ms: i64,
    ) -> Result<Resp, ApiError> {
        let s = self.gate.changing(req, now_ms).await?;
        let bytes = read_body(body, false).await?;
        let obj = crate::request::body_object(&bytes, &KEY_FIELDS)?;
        let label = match obj.get("label") {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::String(l)) if l.chars().count() <= KEY_LABEL_CHARS_MAX => Some(l.clone()),
            Some(serde_json::Value::String(_)) => {
                return Err(ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    format!("label is longer than {KEY_LABEL_CHARS_MAX} characters"),
                ))
            }
            Some(_) => return Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "label must be a string")),
        };
        let acc = s.account_id;
        let named = label.clone();
        let added = self.storage.run(move |store| store.add_account_key(acc, label.as_deref(), now_ms)).await;
        self.health.record(Writer::Front, &added, now_ms);
        let Some(created) = added? else {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("active key limit reached ({ACCOUNT_KEYS_MAX} per account); revoke one first"),
            ));
        };
        self.gate.keys_applied().await;
        let plan = self.gate.plan_of(&s);
        let mut j = Json::with_capacity(256);
        j.raw("{\"data\":{\"id\":").int(created.id).raw(",\"key\":").str(&created.key);
        j.raw(",\"label\":");
        match &named {
            Some(l) => j.str(l),
            None => j.raw("null"),
        };
        j.raw(",\"plan\":").str(&plan).raw(",\"createdAt\":").int(now_ms).raw("}}");
        Ok(respond(StatusCode::OK, j.finish()))
    }

    pub(in crate::api::front) async fn revoke_key(&self, req: &Parts, id: &str, now_ms: i64) -> Result<Resp, ApiError> {
        let acc = self.gate.changing(req, now_ms).await?.account_id;
        let unknown = || ApiError::new(StatusCode::NOT_FOUND, "unknown key");
        let id = id.parse::<i64>().ok().filter(|&i| i > 0).ok_or_else(unknown)?;
        let revoked = self.storage.run(move |store| store.revoke_account_key(acc, id, now_ms)).await;
        self.health.record(Writer::Front, &revoked, now_ms);
        if matches!(revoked?, Revoked::NotFound) {
            return Err(unknown());
        }
        self.gate.keys_applied().await;
        // This process's streams on the key end now, not at their next look.
        self.gate.admissions_moved();
        let mut j = Json::with_capacity(64);
        j.raw("{\"data\":{\"id\":").int(id).raw(",\"revoked\":true}}");
        Ok(respond(StatusCode::OK, j.finish()))
    }

    pub(in crate::api::front) async fn channels(&self, req: &Parts, now_ms: i64) -> Result<Resp, ApiError> {
        let acc = self.gate.signed_in(req, now_ms).await?.account_id;
        let chat = self.storage.run(move |store| store.telegram_chat(acc)).await?;
        Ok(respond(StatusCode::OK, channels_body(chat.as_deref(), self.telegram_on)))
    }

    pub(in crate::api::front) async fn set_channels(
        &self,
        req: &Parts,
        body: hyper::body::Incoming,
        now_ms: i64,
    ) -> Result<Resp, ApiError> {
        let acc = self.gate.changing(req, now_ms).await?.account_id;
        let bytes = read_body(body, false).await?;
        let obj = crate::request::body_object(&bytes, &CHANNEL_FIELDS)?;
        let chat = match obj.get("telegramChatId") {
            None => return Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "telegramChatId is required")),
            Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::String(c)) if rampart_delivery::telegram::is_chat_id(c.trim()) => {
                Some(c.trim().to_owned())
            }
            Some(serde_json::Value::Number(n)) if n.as_i64().is_some() => Some(n.to_string()),
            Some(_) => {
                return Err(ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "telegramChatId must be a chat id (digits, optionally after '-') or @channelname",
                ))
            }
        };
        let stored = chat.clone();
        let set = self.storage.run(move |store| store.set_telegram_chat(acc, stored.as_deref())).await;
        self.health.record(Writer::Front, &set, now_ms);
        set?;
        Ok(respond(StatusCode::OK, channels_body(chat.as_deref(), self.telegram_on)))
    }

    pub(in crate::api::front) async fn signin(
        &self,
        req: &Parts,
        body: hyper::body::Incoming,
        peer: IpAddr,
        now_ms: i64,
    ) -> Result<Resp, ApiError> {
        signin_from_this_site(req)?;
        let bytes = read_body(body, false).await?;
        let obj = crate::request::body_object(&bytes, &SIGNIN_FIELDS)?;
        let key = crate::request::required_string(&obj, "key")?.trim();
        let row = match rampart_store::store::is_key_shaped(key) {
            true => self.gate.find_key(key, peer, now_ms).await,
            false => None,
        };
        let Some(row) = row else { return Err(self.gate.unauthenticated(peer, "invalid API key", now_ms)) };
        if row.revoked_ms.is_some() {
            return Err(self.gate.unauthenticated(peer, "revoked API key", now_ms));
        }
        let mut random = [0u8; session::RANDOM_BYTES];
        getrandom::getrandom(&mut random)
            .map_err(|_| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "no randomness for a session; retry"))?;
        let (id, s) = session::new_session((row.account_id, row.id, hash_key(key)), now_ms, &random);
        let (h, record) = (session::hash(&id), s.record(session::hash(&id)));
        let (idle, max) = (session::SESSION_IDLE_MS, session::SESSIONS_MAX as i64);
        let stored = self.storage.run(move |store| store.open_site_session(&record, idle, max)).await;
        self.health.record(Writer::Front, &stored, now_ms);
        stored?;
        self.gate.hold_session(h, s.clone(), now_ms);
        Ok(with_cookie(respond(StatusCode::OK, session_body(&s, &row.plan)), Some(&id)))
    }

    pub(in crate::api::front) async fn signout(&self, req: &Parts, now_ms: i64) -> Result<Resp, ApiError> {
        self.gate.changing(req, now_ms).await?;
        if let Some(id) = session_cookie(req) {
            let h = session::hash(id);
            self.gate.drop_session(&h);
            let closed = self.storage.run(move |store| store.close_site_session(&h)).await;
            self.health.record(Writer::Front, &closed, now_ms);
            closed?;
        }
        Ok(with_cookie(respond(StatusCode::OK, "{\"data\":{\"signedOut\":true}}".to_owned()), None))
    }

    pub(in crate::api::front) async fn list_site_alerts(&self, req: &Parts, now_ms: i64) -> Result<Resp, ApiError> {
        let acc = self.gate.signed_in(req, now_ms).await?.account_id;
        let rows = self.storage.run(move |store| store.list_site_alerts(acc)).await?;
        let board = self.board.load();
        let mut j = Json::with_capacity(64 + rows.len() * 400);
        j.raw("{\"data\":[");
        for (i, row) in rows.iter().enumerate() {
            if i > 0 {
                j.raw(",");
            }
            rampart_store::text::site_alert::write_site_alert(&mut j, row, site_alerts::waiting(row, &board));
        }
        j.raw("]}");
        Ok(respond(StatusCode::OK, j.finish()))
    }

    pub(in crate::api::front) async fn create_site_alert(
        &self,
        req: &Parts,
        body: hyper::body::Incoming,
        now_ms: i64,
    ) -> Result<Resp, ApiError> {
        let s = self.gate.changing(req, now_ms).await?;
        let plan_name = self.gate.plan_of(&s);
        let plan = self.gate.plans.get(&plan_name).cloned().ok_or_else(|| {
            ApiError::new(StatusCode::FORBIDDEN, format!("the account's plan '{plan_name}' is not configured"))
        })?;
        let bytes = read_body(body, false).await?;
        let request = site_alerts::parse_request(&bytes)?;
        if let Some(alert) = self.density_alert(s.account_id, &request, now_ms) {
            return self.create_density_alert(plan, alert, now_ms).await;
        }
        site_alerts::refuse_reached(&request, &self.board.load())?;
        let acc = s.account_id;
        let created = self.storage.run(move |store| Ok(site_alerts::create(store, acc, &plan, request, now_ms))).await;
        self.health.record(Writer::Front, &created, now_ms);
        let row = created??;
        let mut j = Json::with_capacity(512);
        j.raw("{\"data\":");
        rampart_store::text::site_alert::write_site_alert(&mut j, &row, None);
        j.raw("}");
        Ok(respond(StatusCode::OK, j.finish()))
    }

    /// A density request as the wall alert it is (`site_alerts::density`), with the pair's price
    /// now (0 for a `*` alert or a pair not served); `None` for a market request.
    fn density_alert(&self, account_id: i64, request: &SiteRequest, now_ms: i64) -> Option<NewAlert> {
        let price = match &request.condition {
            SiteCondition::Density { symbol: Some(s), .. } => {
                let book = self.books.shared.registry().find(request.exchange, s);
                book.map_or(0, |b| self.books.shared.price(b).0.max(0))
            }
            _ => 0,
        };
        site_alerts::density::new_alert(account_id, request, price, now_ms)
    }

    /// Stores a density request's wall alert and hands it to the shards, as `POST /v1/alerts`
    /// does; answers the Alert.
    async fn create_density_alert(&self, plan: Plan, alert: NewAlert, now_ms: i64) -> Result<Resp, ApiError> {
        let registry = self.books.shared.registry();
        let created = self
            .storage
            .run(move |store| Ok(site_alerts::density::create(store, &plan, &alert, Some(&registry))))
            .await;
        self.health.record(Writer::Front, &created, now_ms);
        let row = created??;
        if !self.books.hand_over_new(&row) {
            let id = row.id;
            let _ = self.storage.run(move |store| store.forget_alert(id)).await;
            return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "busy; retry shortly"));
        }
        let mut j = Json::with_capacity(768);
        j.raw("{\"data\":");
        rampart_store::text::alert::write_alert(&mut j, &row);
        j.raw("}");
        Ok(respond(StatusCode::OK, j.finish()))
    }

    pub(in crate::api::front) async fn delete_site_alert(
        &self,
        req: &Parts,
        id: &str,
        now_ms: i64,
    ) -> Result<Resp, ApiError> {
        let acc = self.gate.changing(req, now_ms).await?.account_id;
        let Some(id) = id.parse::<i64>().ok().filter(|&i| i > 0) else {
            return Err(ApiError::new(StatusCode::NOT_FOUND, "unknown alert"));
        };
        let deleted = self.storage.run(move |store| Ok(site_alerts::delete(store, acc, id, now_ms))).await;
        self.health.record(Writer::Front, &deleted, now_ms);
        deleted??;
        let mut j = Json::with_capacity(64);
        j.raw("{\"data\":{\"id\":").int(id).raw(",\"deleted\":true}}");
        Ok(respond(StatusCode::OK, j.finish()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_webhook_url_is_seen_only_when_set() {
        assert!(has_webhook_url(br#"{"webhook_url":"https://e.com"}"#));
        assert!(has_webhook_url(br#"{"webhook_url":7}"#), "a wrong type still names a webhook");
        for none in [&br#"{"webhook_url":null}"#[..], br#"{}"#, b"not json", b"", br#"[1]"#] {
            assert!(!has_webhook_url(none), "{:?}", String::from_utf8_lossy(none));
        }
    }
}
