//! What let a stream open, held against it for as long as it runs (`decisions.md` §12, issue
//! #45): a `GET /v1/stream` connection stands on its API key, a site page's `/site/v1/stream` on
//! its session (and the key the session was opened with). Every [`LOOK`] the connection asks
//! whether that still holds; once it does not, the connection ends: a WebSocket is closed
//! [`CLOSE_UNAUTHORISED`] with the reason, a server-sent-events stream gets a last `close` event
//! with the same code and reason, then its end. A revocation or a sign-out is therefore in force on
//! open streams within [`LOOK`] of the moment the key table or the session copy knows it; a
//! sign-out or a revocation made in this process wakes its streams at once (their next batch is
//! refused before it is written); on every other api node it is in force once `rampart keys
//! revoke` returns (it waits for every running key table) or within `SESSION_RECHECK_MS` for a
//! sign-out elsewhere.
//!
//! Also here: where a stream's place comes from. An API key's streams count against its plan's
//! `stream_connections` (`stream_api::OpenStreams`); the site's pages count against their own
//! bound, [`SITE_STREAMS_PER_SESSION_MAX`] per session and [`SITE_STREAMS_PER_ACCOUNT_MAX`] per
//! account (429 beyond), so a `free` account's pages are live and a user's tabs never take a
//! bot's slots.

use std::time::Duration;

use super::gate::Gate;

/// How often an open stream asks whether what admitted it still stands.
pub const LOOK: Duration = Duration::from_millis(100);
/// The WebSocket close code (and the SSE `close` event's `code`) of a stream whose key was
/// revoked or whose session ended: 4401, the private-use range's echo of HTTP 401.
pub const CLOSE_UNAUTHORISED: u16 = 4401;
/// Site market streams (`/site/v1/stream`) of one session at most (tabs of one browser).
pub const SITE_STREAMS_PER_SESSION_MAX: usize = 8;
/// Site market streams of one account at most (its sessions together).
pub const SITE_STREAMS_PER_ACCOUNT_MAX: usize = 16;

/// What admitted a stream.
#[derive(Clone, Debug)]
pub enum Admission {
    /// An API key (`GET /v1/stream`): the SHA-256 of its text.
    Key {
        /// The key's hash, as the key table holds it.
        hash: [u8; 32],
    },
    /// A site session (`/site/v1/stream`).
    Session {
        /// The session id from the cookie.
        cookie: String,
        /// The session's account.
        account: i64,
        /// The hash of the key the session was opened with.
        key_hash: [u8; 32],
    },
}

/// Why a stream's admission ended: the close reason.
pub const KEY_REVOKED: &str = "API key revoked";
/// The close reason when a site session ended (signed out, idle too long).
pub const SESSION_ENDED: &str = "session ended";

impl Admission {
    /// The hash of the key the stream stands on (a session's: the key it was opened with).
    pub fn key_hash(&self) -> [u8; 32] {
        match self {
            Admission::Key { hash } | Admission::Session { key_hash: hash, .. } => *hash,
        }
    }
}

impl Gate {
    /// Resolves, with the close reason, once what admitted the stream no longer stands; looks
    /// every [`LOOK`], and at once when this process signs a session out or revokes a key
    /// ([`Gate::admissions_moved`]).
    pub(super) async fn admission_ends(&self, admission: &Admission) -> &'static str {
        let mut tick = tokio::time::interval(LOOK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut moved = self.admissions();
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = moved.changed() => {}
            }
            if let Some(reason) = self.admission_ended(admission).await {
                return reason;
            }
        }
    }

    /// Why `admission` no longer stands, if it does not. Storage that cannot answer ends
    /// nothing (asked again at the next look): the key table, in memory, still ends a revoked
    /// key's streams.
    async fn admission_ended(&self, admission: &Admission) -> Option<&'static str> {
        match admission {
            Admission::Key { hash } => self.key_revoked(hash).await.then_some(KEY_REVOKED),
            Admission::Session { cookie, account, key_hash } => {
                if self.key_revoked(key_hash).await {
                    return Some(KEY_REVOKED);
                }
                if self.session_ended_now(&super::session::hash(cookie)) {
                    return Some(SESSION_ENDED);
                }
                match self.session_of(cookie, self.clock.now_ms()).await {
                    Ok(Some(s)) if s.account_id == *account => None,
                    Ok(_) => Some(SESSION_ENDED),
                    Err(_) => None,
                }
            }
        }
    }
}

/// The inbox ids a resume may start after: `since` beyond `newest` (the account's newest
/// entry) would wait, silent, until the global sequence passed it (a cursor from a restored
/// database or another server); `since` below `pruned` (the highest id retention removed) may
/// have lost entries after it, which the channel would skip without a word. The refusal's text
/// names the bound; `name` is how the client gave the cursor (`since`, `Last-Event-ID`).
pub fn cursor_refusal(name: &str, since: i64, newest: i64, pruned: i64) -> Option<String> {
    if since > newest {
        return Some(format!(
            "{name} {since} is beyond the newest inbox entry of this account ({newest}); resume with {name} at most {newest}, or without it to start after the newest"
        ));
    }
    (since < pruned).then(|| {
        format!(
            "{name} {since} is older than the inbox this server keeps (entries up to {pruned} were removed by its retention); resume with {name} at least {pruned}, or without it to start after the newest (GET /v1/inbox lists what is kept)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_beyond_the_newest_entry_is_refused_naming_it() {
        assert_eq!(cursor_refusal("since", 412, 412, 0), None, "the newest itself: nothing after it yet");
        assert_eq!(cursor_refusal("since", 0, 0, 0), None, "an empty inbox from the start");
        assert_eq!(
            cursor_refusal("since", 9_000_000_000_000, 412, 0).as_deref(),
            Some("since 9000000000000 is beyond the newest inbox entry of this account (412); resume with since at most 412, or without it to start after the newest")
        );
        let header = cursor_refusal("Last-Event-ID", 413, 412, 0).expect("one past");
        assert!(header.starts_with("Last-Event-ID 413 is beyond"), "{header}");
    }

    #[test]
    fn a_cursor_below_what_retention_pruned_is_refused_naming_the_bound() {
        assert_eq!(cursor_refusal("since", 300, 412, 300), None, "nothing after 300 was pruned");
        assert_eq!(
            cursor_refusal("since", 299, 412, 300).as_deref(),
            Some("since 299 is older than the inbox this server keeps (entries up to 300 were removed by its retention); resume with since at least 300, or without it to start after the newest (GET /v1/inbox lists what is kept)")
        );
        assert!(cursor_refusal("Last-Event-ID", 0, 412, 1).is_some_and(|m| m.starts_with("Last-Event-ID 0 is older")));
    }
}
