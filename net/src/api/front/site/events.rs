//! Live push to the site's open pages: `GET /site/events` answers a `text/event-stream` (server-
//! sent events) of the account's new inbox entries, each as `id: <entry id>`, `event: inbox` and
//! `data: <the entry as GET /v1/inbox lists it>`.
//!
//! A stream starts after the newest entry at connection time, or after `Last-Event-ID` when the
//! browser reconnects, so a dropped connection loses nothing; a `Last-Event-ID` beyond the
//! account's newest entry (a restored database, another server) is refused 422 naming the newest
//! id, never taken as a cursor that would mute the stream until the inbox's ids passed it. A task per stream looks every
//! [`POLL_MS`] at the writer's count of inbox commits and reads the inbox (through the storage
//! thread) only when it moved, or every [`RESCAN_MS`] regardless; it sends a comment every
//! [`KEEPALIVE_MS`] so proxies keep the connection. The stream ends when the session does
//! (sign-out, idle, its key revoked), when the client goes, or when the client reads too slowly
//! to take [`QUEUE_MAX`] messages (the browser then reconnects and resumes from its last id).
//!
//! Bounds: [`STREAMS_MAX`] streams in all (429 beyond) and [`STREAMS_PER_ACCOUNT_MAX`] per
//! account (429 beyond); at most [`READ_MAX`] entries per read.

use std::cell::RefCell;
use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame};
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE, COOKIE};
use hyper::http::request::Parts;
use hyper::{Response, StatusCode};

use super::session;
use crate::api::front::alerts_api::write_inbox_entry;
use crate::api::front::stream_admission::cursor_refusal;
use crate::api::front::{ApiError, Front, Resp};
use rampart_state::json::Json;

/// How often a stream looks for new entries, in milliseconds.
pub const POLL_MS: u64 = 100;
/// How often a stream reads the inbox even if the writer's count did not move.
pub const RESCAN_MS: i64 = 2_000;
/// How often a comment is sent on a quiet stream.
pub const KEEPALIVE_MS: i64 = 15_000;
/// Messages waiting for a slow client at most; beyond it the stream ends.
pub const QUEUE_MAX: usize = 64;
/// Entries read per look.
pub const READ_MAX: u32 = 100;
/// Open streams in all.
pub const STREAMS_MAX: usize = 4_096;
/// Open streams of one account (tabs and devices).
pub const STREAMS_PER_ACCOUNT_MAX: usize = 16;

/// The body of an event stream: messages as the stream's task produces them.
pub struct EventBody {
    rx: tokio::sync::mpsc::Receiver<Bytes>,
}

impl EventBody {
    /// A body of the messages `rx` receives (`GET /v1/stream` as server-sent events too).
    pub(in crate::api::front) fn new(rx: tokio::sync::mpsc::Receiver<Bytes>) -> EventBody {
        EventBody { rx }
    }
}

impl Body for EventBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.rx.poll_recv(cx).map(|m| m.map(|b| Ok(Frame::data(b))))
    }
}

/// Open streams in all, per account and per session (each bound refused 429 with
/// `Retry-After`). One counts `/site/events`, another the site's market streams
/// (`/site/v1/stream`), apart from the API keys' `stream_connections`.
#[derive(Debug)]
pub struct Streams {
    per_account_max: usize,
    per_session_max: usize,
    total: usize,
    by_account: HashMap<i64, usize>,
    by_session: HashMap<[u8; 32], usize>,
}

impl Default for Streams {
    /// `/site/events`' bounds: [`STREAMS_PER_ACCOUNT_MAX`] per account, no tighter one per session.
    fn default() -> Streams {
        Streams::new(STREAMS_PER_ACCOUNT_MAX, STREAMS_PER_ACCOUNT_MAX)
    }
}

impl Streams {
    /// None open; at most [`STREAMS_MAX`] in all, `per_account_max` of one account and
    /// `per_session_max` of one session.
    pub fn new(per_account_max: usize, per_session_max: usize) -> Streams {
        assert!(per_session_max >= 1 && per_session_max <= per_account_max && per_account_max <= STREAMS_MAX);
        Streams { per_account_max, per_session_max, total: 0, by_account: HashMap::new(), by_session: HashMap::new() }
    }

    /// Takes a place for a stream of `account`'s session `session` (the SHA-256 of its id).
    pub(in crate::api::front) fn open(&mut self, account: i64, session: [u8; 32]) -> Result<(), ApiError> {
        let mine = self.by_account.get(&account).copied().unwrap_or(0);
        let this_session = self.by_session.get(&session).copied().unwrap_or(0);
        if self.total >= STREAMS_MAX {
            return Err(ApiError::too_many("too many live connections; retry shortly", 5));
        }
        if mine >= self.per_account_max {
            let max = self.per_account_max;
            return Err(ApiError::too_many(format!("at most {max} live connections per account; close a tab"), 5));
        }
        if this_session >= self.per_session_max {
            let max = self.per_session_max;
            return Err(ApiError::too_many(format!("at most {max} live connections per session; close a tab"), 5));
        }
        self.total += 1;
        *self.by_account.entry(account).or_insert(0) += 1;
        *self.by_session.entry(session).or_insert(0) += 1;
        Ok(())
    }

    /// Gives back a place [`Streams::open`] took.
    pub(in crate::api::front) fn close(&mut self, account: i64, session: [u8; 32]) {
        self.total = self.total.saturating_sub(1);
        if let Some(n) = self.by_account.get_mut(&account) {
            *n -= 1;
            if *n == 0 {
                self.by_account.remove(&account);
            }
        }
        if let Some(n) = self.by_session.get_mut(&session) {
            *n -= 1;
            if *n == 0 {
                self.by_session.remove(&session);
            }
        }
    }
}

/// Frees a stream's place when its task ends, however it ends.
pub(in crate::api::front) struct Place {
    streams: Rc<RefCell<Streams>>,
    account: i64,
    session: [u8; 32],
}

impl Place {
    /// A place in `streams` for a stream of `account`'s `session`, or the 429 refusal.
    pub(in crate::api::front) fn take(
        streams: &Rc<RefCell<Streams>>,
        account: i64,
        session: [u8; 32],
    ) -> Result<Place, ApiError> {
        streams.borrow_mut().open(account, session)?;
        Ok(Place { streams: streams.clone(), account, session })
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.streams.borrow_mut().close(self.account, self.session);
    }
}

/// One entry as a server-sent event.
fn message(r: &rampart_store::store::InboxRow) -> Bytes {
    let mut j = Json::with_capacity(128 + r.body.len());
    write_inbox_entry(&mut j, r);
    // JSON written by this service has no raw newline, so one `data:` line holds it.
    Bytes::from(format!("id: {}\nevent: inbox\ndata: {}\n\n", r.id, j.finish()))
}

/// The id the browser last saw, from `Last-Event-ID`.
fn last_event_id(req: &Parts) -> Option<i64> {
    super::session::last_event_id(req.headers.get("last-event-id")?.as_bytes())
}

impl Front {
    /// `GET /site/events`: the stream, or the error answer (401 without a session, 429 at a
    /// bound, 503 if storage cannot be read).
    pub(in crate::api::front) async fn site_events(self: &Rc<Self>, req: &Parts) -> Result<Response<EventBody>, Resp> {
        let now_ms = self.clock.now_ms();
        let s = self.signed_in(req, now_ms).await.map_err(ApiError::into_response)?;
        let cookie = req.headers.get_all(COOKIE).iter().filter_map(|v| v.to_str().ok()).find_map(session::cookie_id);
        let Some(cookie) = cookie.map(str::to_owned) else {
            return Err(ApiError::new(StatusCode::UNAUTHORIZED, "not signed in").into_response());
        };
        let acc = s.account_id;
        let newest = self
            .storage
            .run(move |store| store.inbox_last_id(acc))
            .await
            .map_err(|e| ApiError::from(e).into_response())?;
        let after = match last_event_id(req) {
            Some(id) => match cursor_refusal("Last-Event-ID", id, newest) {
                Some(refused) => return Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, refused).into_response()),
                None => id,
            },
            None => newest,
        };
        let place = Place::take(&self.event_streams, acc, session::hash(&cookie)).map_err(ApiError::into_response)?;
        let (tx, rx) = tokio::sync::mpsc::channel(QUEUE_MAX);
        let front = self.clone();
        tokio::task::spawn_local(async move {
            let _place = place;
            front.push_inbox(acc, cookie, after, tx).await;
        });
        let mut r = Response::new(EventBody { rx });
        let h = r.headers_mut();
        h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        h.insert("x-accel-buffering", HeaderValue::from_static("no"));
        *r.status_mut() = StatusCode::OK;
        Ok(r)
    }

    /// The stream's task: sends entries after `after` until the session or the client ends.
    async fn push_inbox(&self, acc: i64, cookie: String, mut after: i64, tx: tokio::sync::mpsc::Sender<Bytes>) {
        let mut seen = u64::MAX;
        let (mut read_ms, mut sent_ms) = (0, self.clock.now_ms());
        // A comment first, so the browser sees the stream open at once.
        if tx.try_send(Bytes::from_static(b": open\n\n")).is_err() {
            return;
        }
        loop {
            tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
            let now_ms = self.clock.now_ms();
            let live = self.session_of(&cookie, now_ms).await.ok().flatten().is_some_and(|s| s.account_id == acc);
            if !live || tx.is_closed() {
                return;
            }
            let writes = self.writer_stats.inbox_writes.load(Ordering::Acquire);
            if writes != seen || now_ms - read_ms >= RESCAN_MS {
                seen = writes;
                read_ms = now_ms;
                let Ok(rows) = self.storage.run(move |store| store.inbox_after(acc, after, READ_MAX)).await else {
                    continue;
                };
                for r in &rows {
                    if tx.try_send(message(r)).is_err() {
                        return;
                    }
                    after = r.id;
                    sent_ms = now_ms;
                }
                if rows.len() == READ_MAX as usize {
                    // More are waiting: read again at the next look.
                    seen = u64::MAX;
                }
            }
            if now_ms - sent_ms >= KEEPALIVE_MS {
                if tx.try_send(Bytes::from_static(b": keep-alive\n\n")).is_err() {
                    return;
                }
                sent_ms = now_ms;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_bounded_per_account_and_freed() {
        let mut s = Streams::default();
        let session = |i: usize| [i as u8; 32];
        for i in 0..STREAMS_PER_ACCOUNT_MAX {
            assert!(s.open(1, session(i % 2)).is_ok());
        }
        assert!(s.open(1, session(3)).is_err(), "one more of the same account");
        assert!(s.open(2, session(9)).is_ok(), "another account");
        s.close(1, session(0));
        assert!(s.open(1, session(0)).is_ok(), "room again");
        for i in 0..STREAMS_PER_ACCOUNT_MAX {
            s.close(1, session(i % 2));
        }
        s.close(2, session(9));
        assert_eq!((s.total, s.by_account.len(), s.by_session.len()), (0, 0, 0));
    }

    #[test]
    fn streams_are_bounded_per_session_within_the_account() {
        let mut s = Streams::new(4, 2);
        let (a, b) = ([1; 32], [2; 32]);
        assert!(s.open(1, a).is_ok() && s.open(1, a).is_ok());
        let refused = s.open(1, a).expect_err("a third of one session");
        assert_eq!(
            (refused.status.as_u16(), refused.message.as_str()),
            (429, "at most 2 live connections per session; close a tab")
        );
        assert!(s.open(1, b).is_ok() && s.open(1, b).is_ok(), "another session of the account");
        let refused = s.open(1, [3; 32]).expect_err("a fifth of the account");
        assert_eq!(refused.message, "at most 4 live connections per account; close a tab");
        s.close(1, a);
        assert!(s.open(1, a).is_ok(), "room again");
    }

    #[test]
    fn an_entry_is_one_event_with_its_id() {
        let r = rampart_store::store::InboxRow {
            id: 7,
            kind: "density.triggered".into(),
            alert_id: Some(3),
            body: "{\"event\":\"density.triggered\"}".into(),
            created_ms: 0,
        };
        let m = String::from_utf8(message(&r).to_vec()).expect("utf-8");
        assert!(m.starts_with("id: 7\nevent: inbox\ndata: {\"id\":7,\"kind\":\"density.triggered\""), "{m}");
        assert!(m.ends_with("}\n\n") && m.matches('\n').count() == 4, "{m}");
    }
}
