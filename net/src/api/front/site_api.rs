//! The site's JSON routes under `/site/` (`decisions.md` §10): sign-in with a key, a session
//! cookie and a CSRF token on every state change, sign-out, and the site's own density and
//! market alerts through `crate::site`. Open to every plan (the API's 403 is for `/v1` only).
//!
//! - `POST /site/signin` `{"key"}` → `{"data":{"accountId","plan","csrf"}}` and the cookie; a
//!   wrong key is 401 and counts against the address like a keyless API request.
//! - `GET /site/session` → the same, or 401 `not signed in`.
//! - `POST /site/signout` → ends the session and clears the cookie.
//! - `GET /site/site-alerts`, `POST /site/site-alerts`, `DELETE /site/site-alerts/{id}`.
//!
//! Every state-changing route needs the session and its token in `X-CSRF-Token` (403
//! otherwise), checked before the body is read. Answers are `Cache-Control: no-store`.

use std::net::IpAddr;

use hyper::header::{HeaderValue, CACHE_CONTROL, COOKIE, SET_COOKIE};
use hyper::http::request::Parts;
use hyper::{Method, StatusCode};

use super::{method_not_allowed, read_body, respond, ApiError, Front, Resp};
use crate::json::Json;
use crate::persistence::storage::Writer;
use crate::persistence::store::hash_key;
use crate::site::session::{self, Session};
use crate::site::{self, SiteError};

/// The fields a sign-in body may have.
const SIGNIN_FIELDS: [&str; 1] = ["key"];

impl From<SiteError> for ApiError {
    fn from(e: SiteError) -> ApiError {
        match e {
            SiteError::Invalid(i) => ApiError::from(i),
            SiteError::Store(s) => ApiError::from(s),
        }
    }
}

fn no_store(mut r: Resp) -> Resp {
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

fn session_body(s: &Session, plan: &str) -> String {
    let mut j = Json::with_capacity(160);
    j.raw("{\"data\":{\"accountId\":").int(s.account_id).raw(",\"plan\":").str(plan);
    j.raw(",\"csrf\":").str(&s.csrf).raw("}}");
    j.finish()
}

impl Front {
    /// Answers one `/site/` request.
    pub(super) async fn site(&self, req: &Parts, body: hyper::body::Incoming, peer: IpAddr, now_ms: i64) -> Resp {
        let segments: Vec<&str> = req.uri.path().trim_start_matches('/').split('/').collect();
        let post = req.method == Method::POST;
        let answer = match segments.as_slice() {
            ["site", "signin"] if post => self.signin(body, peer, now_ms).await,
            ["site", "signout"] if post => self.signout(req, now_ms),
            ["site", "signin"] | ["site", "signout"] => Ok(method_not_allowed("POST")),
            ["site", "session"] if matches!(req.method, Method::GET | Method::HEAD) => {
                self.signed_in(req, now_ms).map(|s| respond(StatusCode::OK, session_body(&s, &self.plan_of(&s))))
            }
            ["site", "session"] => Ok(method_not_allowed("GET")),
            ["site", "site-alerts"] if matches!(req.method, Method::GET | Method::HEAD) => {
                self.list_site_alerts(req, now_ms).await
            }
            ["site", "site-alerts"] if post => self.create_site_alert(req, body, now_ms).await,
            ["site", "site-alerts"] => Ok(method_not_allowed("GET, POST")),
            ["site", "site-alerts", id] if req.method == Method::DELETE => {
                self.delete_site_alert(req, id, now_ms).await
            }
            ["site", "site-alerts", _] => Ok(method_not_allowed("DELETE")),
            _ => Err(ApiError::new(StatusCode::NOT_FOUND, "not found")),
        };
        no_store(answer.unwrap_or_else(ApiError::into_response))
    }

    fn plan_of(&self, s: &Session) -> String {
        self.keys.get(&s.key_hash).map_or_else(String::new, |k| k.plan.clone())
    }

    /// The request's session: 401 without one (none, ended, idle too long, its key revoked).
    fn signed_in(&self, req: &Parts, now_ms: i64) -> Result<Session, ApiError> {
        let id = req.headers.get_all(COOKIE).iter().filter_map(|v| v.to_str().ok()).find_map(session::cookie_id);
        let revoked = |s: &Session| self.keys.get(&s.key_hash).is_none_or(|k| k.revoked_ms.is_some());
        id.and_then(|id| self.sessions.borrow_mut().get(id, now_ms, revoked))
            .ok_or_else(|| ApiError::new(StatusCode::UNAUTHORIZED, "not signed in"))
    }

    /// The session of a state-changing request, whose `X-CSRF-Token` must be its token (403).
    fn changing(&self, req: &Parts, now_ms: i64) -> Result<Session, ApiError> {
        let s = self.signed_in(req, now_ms)?;
        let sent = req.headers.get(session::CSRF_HEADER).and_then(|v| v.to_str().ok());
        if !session::csrf_ok(&s, sent) {
            return Err(ApiError::new(StatusCode::FORBIDDEN, "missing or wrong CSRF token"));
        }
        Ok(s)
    }

    async fn signin(&self, body: hyper::body::Incoming, peer: IpAddr, now_ms: i64) -> Result<Resp, ApiError> {
        let bytes = read_body(body, false).await?;
        let obj = crate::api::alerts::body_object(&bytes, &SIGNIN_FIELDS)?;
        let key = crate::api::alerts::required_string(&obj, "key")?.trim();
        let row = self.keys.get(&hash_key(key)).filter(|_| crate::persistence::store::is_key_shaped(key));
        let Some(row) = row else { return Err(self.unauthenticated(peer, "invalid API key", now_ms)) };
        if row.revoked_ms.is_some() {
            return Err(self.unauthenticated(peer, "revoked API key", now_ms));
        }
        let mut random = [0u8; session::RANDOM_BYTES];
        getrandom::getrandom(&mut random)
            .map_err(|_| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "no randomness for a session; retry"))?;
        let (id, s) = self.sessions.borrow_mut().open((row.account_id, row.id, hash_key(key)), now_ms, &random);
        Ok(with_cookie(respond(StatusCode::OK, session_body(&s, &row.plan)), Some(&id)))
    }

    fn signout(&self, req: &Parts, now_ms: i64) -> Result<Resp, ApiError> {
        self.changing(req, now_ms)?;
        let id = req.headers.get_all(COOKIE).iter().filter_map(|v| v.to_str().ok()).find_map(session::cookie_id);
        if let Some(id) = id {
            self.sessions.borrow_mut().close(id);
        }
        Ok(with_cookie(respond(StatusCode::OK, "{\"data\":{\"signedOut\":true}}".to_owned()), None))
    }

    async fn list_site_alerts(&self, req: &Parts, now_ms: i64) -> Result<Resp, ApiError> {
        let acc = self.signed_in(req, now_ms)?.account_id;
        let rows = self.storage.run(move |store| store.list_site_alerts(acc)).await?;
        let mut j = Json::with_capacity(64 + rows.len() * 400);
        j.raw("{\"data\":[");
        for (i, row) in rows.iter().enumerate() {
            if i > 0 {
                j.raw(",");
            }
            site::write_site_alert(&mut j, row);
        }
        j.raw("]}");
        Ok(respond(StatusCode::OK, j.finish()))
    }

    async fn create_site_alert(&self, req: &Parts, body: hyper::body::Incoming, now_ms: i64) -> Result<Resp, ApiError> {
        let s = self.changing(req, now_ms)?;
        let plan_name = self.plan_of(&s);
        let plan = self.plans.get(&plan_name).cloned().ok_or_else(|| {
            ApiError::new(StatusCode::FORBIDDEN, format!("the account's plan '{plan_name}' is not configured"))
        })?;
        let bytes = read_body(body, false).await?;
        let request = site::parse_request(&bytes)?;
        let (acc, registry) = (s.account_id, self.shared.registry());
        let created =
            self.storage.run(move |store| Ok(site::create(store, acc, &plan, request, Some(&registry), now_ms))).await;
        self.health.record(Writer::Front, &created, now_ms);
        let row = created??;
        let mut j = Json::with_capacity(512);
        j.raw("{\"data\":");
        site::write_site_alert(&mut j, &row);
        j.raw("}");
        Ok(respond(StatusCode::OK, j.finish()))
    }

    async fn delete_site_alert(&self, req: &Parts, id: &str, now_ms: i64) -> Result<Resp, ApiError> {
        let acc = self.changing(req, now_ms)?.account_id;
        let Some(id) = id.parse::<i64>().ok().filter(|&i| i > 0) else {
            return Err(ApiError::new(StatusCode::NOT_FOUND, "unknown alert"));
        };
        let deleted = self.storage.run(move |store| Ok(site::delete(store, acc, id, now_ms))).await;
        self.health.record(Writer::Front, &deleted, now_ms);
        deleted??;
        let mut j = Json::with_capacity(64);
        j.raw("{\"data\":{\"id\":").int(id).raw(",\"deleted\":true}}");
        Ok(respond(StatusCode::OK, j.finish()))
    }
}
