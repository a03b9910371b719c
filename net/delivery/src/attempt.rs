//! One attempt of one delivery: the destination re-checked (SSRF), the request signed and sent
//! over a kept or new connection, the whole answer read within the attempt's time
//! (`decisions.md` §6, §13). Used by the sender's lanes and by a test send
//! (`POST /v1/alerts/{id}/test`).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::Method;

use rampart_outbound::http;
use rampart_outbound::ssrf::{self, WebhookUrl};
use rampart_store::store::{message_id, AttemptResult, Channel, FailKind, OutboxRow};

use crate::pool::{Conn, Key, Pool};
use crate::signing;
use crate::telegram::TelegramChannel;

/// Time allowed for one attempt: resolve, connect, TLS, send and the full answer.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes of a receiver's answer read at most; the rest is not read (the status decides). An
/// answer that ends early within this bound is a failure.
pub const RESPONSE_BYTES_MAX: usize = 64 * 1024;
/// An attempt's outcome as a metrics label.
pub(crate) fn outcome_label(result: &AttemptResult) -> &'static str {
    match result {
        AttemptResult::Delivered { .. } => "delivered",
        // A 2xx whose answer ended early is no full answer: an error, not a rejection.
        AttemptResult::Failed { status: Some(s), .. } if !(200..300).contains(s) => "rejected",
        AttemptResult::Failed { .. } => "error",
    }
}

/// What an attempt needs besides the delivery itself.
#[derive(Clone)]
pub struct Target {
    /// Permit private addresses.
    pub allow_private: bool,
    /// Time allowed for the whole attempt.
    pub timeout: Duration,
    /// Client TLS configuration (`None`: https deliveries fail).
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// Keep-alive connections kept between attempts.
    pub pool: Pool,
    /// The operator's Telegram bot, for Telegram rows.
    pub telegram: Option<TelegramChannel>,
}

/// Where `row` is sent: its webhook URL, or the bot's `sendMessage` URL for a Telegram row
/// (`None` when Telegram is not configured).
pub(crate) fn destination(row: &OutboxRow, telegram: Option<&TelegramChannel>) -> Option<String> {
    match row.channel {
        Channel::Webhook => Some(row.url.clone()),
        Channel::Telegram => telegram.map(TelegramChannel::send_url),
    }
}

/// What one request says besides its body: the event header of webhooks, and whether private
/// addresses may be used (the operator's bot may be a local Bot API server; a client's webhook
/// only with `webhooks.allow_private`).
struct Sending {
    event: Option<&'static str>,
    allow_private: bool,
    /// The Standard Webhooks headers, when the account signs its webhooks.
    signature: Option<signing::Signature>,
}

/// One attempt of one delivery at `now_ms`, bounded by `target.timeout` as a whole; a webhook is
/// signed with `secrets` (the account's, current first; none: unsigned, byte for byte as before).
pub async fn attempt(row: &OutboxRow, target: &Target, secrets: &[String], now_ms: i64) -> AttemptResult {
    attempt_as("alert.triggered", row, target, secrets, now_ms).await
}

/// A test send of an alert's webhook (`POST /v1/alerts/{id}/test`, `decisions.md` §16): one
/// attempt as [`attempt`] makes, the same address check and signing, with the event header
/// `alert.test`.
pub async fn test_attempt(row: &OutboxRow, target: &Target, secrets: &[String], now_ms: i64) -> AttemptResult {
    attempt_as("alert.test", row, target, secrets, now_ms).await
}

async fn attempt_as(
    event: &'static str,
    row: &OutboxRow,
    target: &Target,
    secrets: &[String],
    now_ms: i64,
) -> AttemptResult {
    let Some(url) = destination(row, target.telegram.as_ref()) else {
        return failed(FailKind::Refused, "the Telegram channel is not configured ([channels.telegram])");
    };
    let how = match row.channel {
        Channel::Webhook => Sending {
            event: Some(event),
            allow_private: target.allow_private,
            signature: signing::sign(secrets, &message_id(row.alert_id, row.trigger_ms), now_ms / 1000, &row.body),
        },
        Channel::Telegram => Sending { event: None, allow_private: true, signature: None },
    };
    match tokio::time::timeout(target.timeout, send(&url, row.body.clone(), &how, target)).await {
        Ok(r) => r,
        Err(_) => AttemptResult::Failed {
            status: None,
            error: format!("no full answer within {} s", target.timeout.as_secs()),
            kind: FailKind::Timeout,
        },
    }
}

fn failed(kind: FailKind, error: impl Into<String>) -> AttemptResult {
    AttemptResult::Failed { status: None, error: error.into(), kind }
}

async fn send(url: &str, body: String, how: &Sending, target: &Target) -> AttemptResult {
    let parsed = match ssrf::parse(url) {
        Ok(p) => p,
        Err(e) => return failed(FailKind::Blocked, e.to_string()),
    };
    // Resolved and checked now, at every attempt: a name that has come to point at a private
    // address since creation (DNS rebinding) is refused, and only a checked address is used,
    // whether by a kept connection or a new one.
    let addrs = match ssrf::resolve_checked(&parsed, how.allow_private).await {
        Ok(a) => a,
        Err(e @ ssrf::SsrfError::NotPublic(_)) => return failed(FailKind::Blocked, e.to_string()),
        Err(e) => return failed(FailKind::Refused, e.to_string()),
    };
    let key = |addr| Key { https: parsed.https, authority: parsed.authority.to_ascii_lowercase(), addr };
    for addr in &addrs {
        let Some(conn) = target.pool.take(&key(*addr)) else { continue };
        match exchange(conn, &parsed, body.clone(), how).await {
            // The receiver closed the kept connection before answering: try a new one.
            Exchanged::NotSent(_) => break,
            Exchanged::Answered(result, kept) => return keep(target, key(*addr), result, kept),
        }
    }
    let (addr, conn) = match http::open(&addrs, &parsed, target.tls.clone()).await {
        Ok(x) => x,
        Err(http::NoConnection(why)) => return failed(FailKind::Refused, why),
    };
    match exchange(conn, &parsed, body, how).await {
        Exchanged::NotSent(e) => failed(FailKind::Refused, e),
        Exchanged::Answered(result, kept) => keep(target, key(addr), result, kept),
    }
}

/// Returns a connection that answered in full to the pool; passes the result on.
fn keep(target: &Target, key: Key, result: AttemptResult, kept: Option<Conn>) -> AttemptResult {
    if let Some(conn) = kept {
        target.pool.put(key, conn);
    }
    result
}

/// How one request on a connection ended.
enum Exchanged {
    /// No answer began: the request may not have reached the receiver (on a kept connection,
    /// the receiver had closed it). Why.
    NotSent(String),
    /// An answer came (whole or not): the result, and the connection when it can be kept (the
    /// answer was read in full and the receiver keeps the connection open).
    Answered(AttemptResult, Option<Conn>),
}

async fn exchange(mut conn: Conn, url: &WebhookUrl, body: String, how: &Sending) -> Exchanged {
    let mut request = match http::request(Method::POST, url, Bytes::from(body)) {
        Ok(r) => r,
        Err(e) => return Exchanged::Answered(failed(FailKind::Blocked, e.to_string()), None),
    };
    let headers = request.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Some(event) = how.event {
        headers.insert("x-service-event", HeaderValue::from_static(event));
    }
    if let Some(s) = &how.signature {
        // Base64, digits, ':' and ',' only: valid header values.
        for (name, value) in [
            ("webhook-id", s.id.clone()),
            ("webhook-timestamp", s.timestamp_s.to_string()),
            ("webhook-signature", s.signature.clone()),
        ] {
            match HeaderValue::from_str(&value) {
                Ok(v) => headers.insert(name, v),
                Err(_) => return Exchanged::Answered(failed(FailKind::Refused, "invalid signature header"), None),
            };
        }
    }
    let response = match conn.sender.send_request(request).await {
        Ok(r) => r,
        Err(e) => return Exchanged::NotSent(format!("HTTP: {e}")),
    };
    let status = response.status().as_u16();
    // Read the whole answer (bounded) so the attempt ends only when it has arrived.
    let whole = match read_answer(response.into_body()).await {
        Ok(whole) => whole,
        Err(error) => {
            let kind = FailKind::Answer;
            return Exchanged::Answered(
                AttemptResult::Failed { status: Some(status), error: error.to_string(), kind },
                None,
            );
        }
    };
    let result = if (200..300).contains(&status) {
        AttemptResult::Delivered { status }
    } else {
        AttemptResult::Failed { status: Some(status), error: format!("HTTP {status}"), kind: FailKind::Answer }
    };
    // An answer not read to its end leaves bytes on the connection: it is not kept.
    Exchanged::Answered(result, whole.then_some(conn))
}

/// Reads an answer's body to its end, or until [`RESPONSE_BYTES_MAX`] bytes have come (the rest
/// is not read: the status decides). An answer that ends early (the connection closed before
/// the declared length, a broken chunked body) is an error: no full answer is a failure.
/// `Ok(true)` when the body was read to its end, `Ok(false)` when the bound stopped the reading.
async fn read_answer(mut body: hyper::body::Incoming) -> Result<bool, IncompleteAnswer> {
    let mut read = 0usize;
    while read <= RESPONSE_BYTES_MAX {
        match body.frame().await {
            None => return Ok(true),
            Some(Ok(frame)) => read += frame.data_ref().map_or(0, |d| d.len()),
            Some(Err(e)) => return Err(IncompleteAnswer { read, cause: e.to_string() }),
        }
    }
    Ok(false)
}

/// An answer whose body ended before it was whole.
#[derive(Debug)]
struct IncompleteAnswer {
    /// Bytes of the body that came.
    read: usize,
    /// What hyper said.
    cause: String,
}

impl std::fmt::Display for IncompleteAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "incomplete answer after {} bytes: {}", self.read, self.cause)
    }
}
