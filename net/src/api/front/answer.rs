//! What every handler of the front answers with, beneath the router and the resources: the
//! response type and its JSON bodies, the typed refusal ([`ApiError`]) and its headers, and the
//! query parameters several families of routes read (`exchange`, `symbols`, counts).

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE, RETRY_AFTER};
use hyper::{Response, StatusCode};
use rampart_engine::Venue;
use rampart_state::json::error_body;

use crate::api::limit::Usage;

pub(super) type Resp = Response<Full<Bytes>>;

pub(super) fn respond(status: StatusCode, body: String) -> Resp {
    respond_bytes(status, Bytes::from(body))
}

/// A JSON response over bytes already written (a cached body is shared, not copied).
pub(super) fn respond_bytes(status: StatusCode, body: Bytes) -> Resp {
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// A refusal: status, message and the headers that go with it. Turned into a response at the
/// edge, so handlers return small values.
#[derive(Debug)]
pub(super) struct ApiError {
    pub(super) status: StatusCode,
    pub(super) message: String,
    pub(super) retry_after_s: Option<i64>,
    /// The key's standing, on a 429 of the key's own limits (`X-RateLimit-*`).
    pub(super) usage: Option<Usage>,
}

impl From<crate::request::Invalid> for ApiError {
    fn from(e: crate::request::Invalid) -> ApiError {
        ApiError::new(StatusCode::from_u16(e.status).unwrap_or(StatusCode::UNPROCESSABLE_ENTITY), e.message)
    }
}

impl From<rampart_store::store::StoreError> for ApiError {
    fn from(e: rampart_store::store::StoreError) -> ApiError {
        tracing::error!("storage: {e}");
        if e.is_full() {
            return ApiError::new(StatusCode::SERVICE_UNAVAILABLE, rampart_store::db::DISK_FULL);
        }
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "storage unavailable; retry later")
    }
}

impl ApiError {
    pub(super) fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError { status, message: message.into(), retry_after_s: None, usage: None }
    }

    pub(super) fn too_many(message: impl Into<String>, retry_after_s: i64) -> ApiError {
        ApiError {
            status: StatusCode::TOO_MANY_REQUESTS,
            message: message.into(),
            retry_after_s: Some(retry_after_s),
            usage: None,
        }
    }

    /// A 429 of the key's own burst or quota: the headers say where the key stands.
    pub(super) fn over_limit(message: impl Into<String>, retry_after_s: i64, limit: u32) -> ApiError {
        let usage = Usage { limit, remaining: 0, reset_s: retry_after_s.max(1) };
        ApiError { usage: Some(usage), ..ApiError::too_many(message, retry_after_s) }
    }

    pub(super) fn into_response(self) -> Resp {
        let mut r = respond(self.status, error_body(&self.message));
        if let Some(s) = self.retry_after_s {
            r.headers_mut().insert(RETRY_AFTER, HeaderValue::from(s.max(1)));
        }
        if let Some(u) = self.usage {
            with_usage(&mut r, u);
        }
        r
    }
}

/// Adds `X-RateLimit-Limit`, `-Remaining` and `-Reset` (`decisions.md` §13) to an answer to a
/// request the key's limits counted.
pub(super) fn with_usage<B>(r: &mut Response<B>, u: Usage) {
    let h = r.headers_mut();
    h.insert("x-ratelimit-limit", HeaderValue::from(u.limit));
    h.insert("x-ratelimit-remaining", HeaderValue::from(u.remaining));
    h.insert("x-ratelimit-reset", HeaderValue::from(u.reset_s));
}

pub(super) fn error(status: StatusCode, message: &str) -> Resp {
    ApiError::new(status, message).into_response()
}

/// A value of a query parameter, decoded as a form's (`%XX` escapes, `+` a space, bytes that are
/// not UTF-8 replaced; an escape that is not one kept as written).
pub fn query_param(query: Option<&str>, name: &str) -> Option<String> {
    form_urlencoded::parse(query?.as_bytes()).find(|(k, _)| k == name).map(|(_, v)| v.into_owned())
}

/// At most `n` bytes of `s`, cut at a character boundary, for echoing client input in messages.
pub(super) fn clip(s: &str, n: usize) -> &str {
    let mut end = s.len().min(n);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Most symbols a bulk `symbols=` filter may name.
pub const SYMBOLS_FILTER_MAX: usize = 100;

/// The optional `symbols=A,B,C` filter of the bulk endpoints, uppercased; 422 past
/// [`SYMBOLS_FILTER_MAX`]. An empty value means no filter; unknown symbols are ignored.
pub(super) fn symbols_param(query: Option<&str>) -> Result<Option<Vec<String>>, ApiError> {
    let Some(raw) = query_param(query, "symbols") else { return Ok(None) };
    let list: Vec<String> =
        raw.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_ascii_uppercase).collect();
    if list.len() > SYMBOLS_FILTER_MAX {
        return Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "symbol list too long (max 100)"));
    }
    Ok((!list.is_empty()).then_some(list))
}

/// The `exchange` query parameter: binance when absent, 422 when not a venue.
pub(super) fn exchange_param(query: Option<&str>) -> Result<Venue, ApiError> {
    match query_param(query, "exchange") {
        None => Ok(Venue::Binance),
        Some(s) => Venue::parse(&s).ok_or_else(|| {
            ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("invalid exchange '{}'. Allowed: {}", clip(&s, 64), Venue::ALLOWED),
            )
        }),
    }
}

/// 405 with the methods the path takes in `Allow`.
pub(super) fn method_not_allowed(allow: &'static str) -> Resp {
    let mut r = error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
    r.headers_mut().insert(ALLOW, HeaderValue::from_static(allow));
    r
}

/// A 200 with `body`, or the refusal.
pub(super) fn answer_ok(body: Result<impl Into<Bytes>, ApiError>) -> Resp {
    match body {
        Ok(body) => respond_bytes(StatusCode::OK, body.into()),
        Err(e) => e.into_response(),
    }
}

/// How long a request waits for a shard's answer (candles, book) before a 503.
pub const SHARD_ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

/// A 422 with `message`.
pub(super) fn unprocessable(message: String) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, message)
}

/// A count parameter `name` in `1..=max` (`default` when absent).
pub(super) fn count_param(query: Option<&str>, name: &str, default: usize, max: usize) -> Result<usize, ApiError> {
    match query_param(query, name) {
        None => Ok(default),
        Some(s) => s
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=max).contains(n))
            .ok_or_else(|| unprocessable(format!("invalid {name} '{}'. Allowed: 1 to {max}", clip(&s, 64)))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_params_are_decoded() {
        assert_eq!(query_param(Some("a=1&exchange=okx"), "exchange").as_deref(), Some("okx"));
        assert_eq!(query_param(Some("exchange=kr%61ken"), "exchange").as_deref(), Some("kraken"));
        assert_eq!(query_param(Some("exchange"), "exchange").as_deref(), Some(""));
        assert_eq!(query_param(Some("x=%zz%"), "x").as_deref(), Some("%zz%"));
        assert_eq!(query_param(None, "exchange"), None);
    }

    #[test]
    fn clip_respects_char_boundaries() {
        assert_eq!(clip("abc", 2), "ab");
        assert_eq!(clip("aé", 2), "a");
        assert_eq!(clip("", 5), "");
    }
}
