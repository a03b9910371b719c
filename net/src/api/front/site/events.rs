//! What the site's live streams share: the body of a server-sent-events answer ([`EventBody`])
//! and the site's own bound on open streams ([`Streams`]: in all, per account and per session,
//! apart from the API keys' `stream_connections`), with the [`Place`] a stream holds in it.
//!
//! The streams themselves are `GET /site/v1/stream` (`stream_api`): a page's market channels and
//! the account's inbox (`alerts`). `GET /site/events`, the live inbox as the site first offered
//! it, is an alias of `/site/v1/stream?channels=alerts`, so the inbox is pushed one way only.

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame};

use crate::api::front::answer::ApiError;

/// Open streams in all.
pub const STREAMS_MAX: usize = 4_096;

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
/// `Retry-After`), apart from the API keys' `stream_connections`.
#[derive(Debug)]
pub struct Streams {
    per_account_max: usize,
    per_session_max: usize,
    total: usize,
    by_account: HashMap<i64, usize>,
    by_session: HashMap<[u8; 32], usize>,
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
    streams: Arc<Mutex<Streams>>,
    account: i64,
    session: [u8; 32],
}

impl Place {
    /// A place in `streams` for a stream of `account`'s `session`, or the 429 refusal.
    pub(in crate::api::front) fn take(
        streams: &Arc<Mutex<Streams>>,
        account: i64,
        session: [u8; 32],
    ) -> Result<Place, ApiError> {
        crate::api::front::gate::lock(streams).open(account, session)?;
        Ok(Place { streams: streams.clone(), account, session })
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        crate::api::front::gate::lock(&self.streams).close(self.account, self.session);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Streams of one account at most in the test below.
    const STREAMS_PER_ACCOUNT_MAX: usize = 16;

    #[test]
    fn streams_are_bounded_per_account_and_freed() {
        let mut s = Streams::new(STREAMS_PER_ACCOUNT_MAX, STREAMS_PER_ACCOUNT_MAX);
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
}
