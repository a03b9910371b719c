//! Site sessions (`decisions.md` §10): signing in with one of an account's keys opens a session
//! named by a random id that travels in a cookie (`HttpOnly`, `SameSite=Strict`; never the
//! key), with a CSRF token of its own that every state-changing request must echo in the
//! `X-CSRF-Token` header. A session ends when it is signed out, after
//! [`SESSION_IDLE_MS`] without use, or as soon as the key it was opened with is revoked.
//! Pure logic: time and randomness are arguments.
//!
//! Sessions are stored in the database (`rampart_store::store::SessionRecord`), so any server on
//! it serves any session and a restart signs nobody out; [`Sessions`] is each front's copy of
//! the ones it served lately, trusted for [`SESSION_RECHECK_MS`] before the database is asked
//! again (a sign-out on another server takes effect here within that time; on this server, and
//! a key's revocation anywhere, at once). Bound: [`SESSIONS_MAX`] sessions in the database and in
//! each copy; one more ends the least recently used.

use std::collections::{HashMap, HashSet, VecDeque};

use rampart_store::store::SessionRecord;
use sha2::{Digest, Sha256};

/// A session unused this long ends (7 days).
pub const SESSION_IDLE_MS: i64 = 7 * 86_400_000;
/// Sessions held at most; one more ends the least recently used.
pub const SESSIONS_MAX: usize = 100_000;
/// How long a front trusts its copy of a session before asking the database again: a sign-out
/// on another api node ends this node's requests and streams of the session within it (streams
/// look every 100 ms, so within 0.6 s in all: issue #45 asks 1 s).
pub const SESSION_RECHECK_MS: i64 = 500;
/// The cookie's name.
pub const COOKIE: &str = "rampart_session";
/// The header a state-changing request carries its CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";
/// Random bytes a session takes: 32 for its id, 32 for its CSRF token.
pub const RANDOM_BYTES: usize = 64;

/// One signed-in session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    /// The account.
    pub account_id: i64,
    /// The key it was opened with (revoking it ends the session).
    pub key_id: i64,
    /// That key's SHA-256, to find it in the key table.
    pub key_hash: [u8; 32],
    /// The token state-changing requests must echo.
    pub csrf: String,
    /// When it was opened, Unix milliseconds.
    pub opened_ms: i64,
    last_used_ms: i64,
}

impl Session {
    /// The session a stored record describes.
    pub fn from_record(r: &SessionRecord) -> Session {
        Session {
            account_id: r.account_id,
            key_id: r.key_id,
            key_hash: r.key_hash,
            csrf: r.csrf.clone(),
            opened_ms: r.opened_ms,
            last_used_ms: r.used_ms,
        }
    }

    /// The record that stores it under `id_hash`.
    pub fn record(&self, id_hash: [u8; 32]) -> SessionRecord {
        SessionRecord {
            id_hash,
            account_id: self.account_id,
            key_id: self.key_id,
            key_hash: self.key_hash,
            csrf: self.csrf.clone(),
            opened_ms: self.opened_ms,
            used_ms: self.last_used_ms,
        }
    }
}

/// Sessions this process saw end (signed out here, or found gone in the database) remembered
/// at most; one more forgets the oldest. A session id is never reused, so an ended one is
/// remembered only so that a read of the database that raced its sign-out cannot put it back
/// into the copy, and so an open stream of it ends before its next batch.
pub const ENDED_REMEMBERED_MAX: usize = 4_096;

/// A front's copy of the sessions it served lately, by the SHA-256 of their ids, each with
/// when the database last confirmed it; and the sessions seen ending lately.
#[derive(Debug, Default)]
pub struct Sessions {
    by_hash: HashMap<[u8; 32], (Session, i64)>,
    ended: HashSet<[u8; 32]>,
    ended_order: VecDeque<[u8; 32]>,
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    bytes.iter().flat_map(|b| [DIGITS[usize::from(b >> 4)] as char, DIGITS[usize::from(b & 15)] as char]).collect()
}

/// The SHA-256 a session is stored under, of its id.
pub fn hash(id: &str) -> [u8; 32] {
    Sha256::digest(id.as_bytes()).into()
}

/// A new session for `account_id` signed in with key `key_id` at `now_ms`, from `random`
/// (fresh bytes from the OS): its id (for the cookie) and the session.
pub fn new_session(
    (account_id, key_id, key_hash): (i64, i64, [u8; 32]),
    now_ms: i64,
    random: &[u8; RANDOM_BYTES],
) -> (String, Session) {
    let id = hex(&random[..32]);
    let csrf = hex(&random[32..]);
    (id, Session { account_id, key_id, key_hash, csrf, opened_ms: now_ms, last_used_ms: now_ms })
}

impl Sessions {
    /// No session.
    pub fn new() -> Sessions {
        Sessions::default()
    }

    /// Sessions held.
    pub fn len(&self) -> usize {
        self.by_hash.len()
    }

    /// True when none is held.
    pub fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }

    /// Holds `session` (stored under `id_hash`) as confirmed at `now_ms`; at the bound, the
    /// least recently used one goes first. A session seen ending is not held again (a read of
    /// the database from before its sign-out).
    pub fn put(&mut self, id_hash: [u8; 32], session: Session, now_ms: i64) {
        if self.ended.contains(&id_hash) {
            return;
        }
        if self.by_hash.len() >= SESSIONS_MAX && !self.by_hash.contains_key(&id_hash) {
            self.by_hash.retain(|_, (s, _)| now_ms - s.last_used_ms <= SESSION_IDLE_MS);
            if self.by_hash.len() >= SESSIONS_MAX {
                let oldest = self.by_hash.iter().min_by_key(|(_, (s, _))| s.last_used_ms).map(|(h, _)| *h);
                if let Some(h) = oldest {
                    self.by_hash.remove(&h);
                }
            }
        }
        self.by_hash.insert(id_hash, (session, now_ms));
        debug_assert!(self.by_hash.len() <= SESSIONS_MAX, "the copy stays within its bound");
    }

    /// The held session stored under `id_hash`, if the database confirmed it less than
    /// [`SESSION_RECHECK_MS`] ago, marked used; `None` otherwise (ask the database). One that
    /// was idle too long, or whose key `revoked` says is revoked, is dropped.
    pub fn fresh(&mut self, id_hash: &[u8; 32], now_ms: i64, revoked: impl Fn(&Session) -> bool) -> Option<Session> {
        let (s, checked_ms) = self.by_hash.get_mut(id_hash)?;
        if now_ms - s.last_used_ms > SESSION_IDLE_MS || revoked(s) {
            self.by_hash.remove(id_hash);
            return None;
        }
        if now_ms - *checked_ms >= SESSION_RECHECK_MS {
            return None;
        }
        s.last_used_ms = s.last_used_ms.max(now_ms);
        Some(s.clone())
    }

    /// Drops the session stored under `id_hash` and remembers it ended; true when one was held.
    pub fn close(&mut self, id_hash: &[u8; 32]) -> bool {
        if self.ended.insert(*id_hash) {
            if self.ended_order.len() >= ENDED_REMEMBERED_MAX {
                if let Some(old) = self.ended_order.pop_front() {
                    self.ended.remove(&old);
                }
            }
            self.ended_order.push_back(*id_hash);
        }
        debug_assert_eq!(self.ended.len(), self.ended_order.len());
        self.by_hash.remove(id_hash).is_some()
    }

    /// True when the session stored under `id_hash` was seen ending (no database read).
    pub fn ended(&self, id_hash: &[u8; 32]) -> bool {
        self.ended.contains(id_hash)
    }
}

/// The inbox id in a `Last-Event-ID` header's value (a browser resuming a stream): a
/// non-negative decimal integer, spaces around it allowed; anything else is no id (the stream
/// then starts after the newest entry).
pub fn last_event_id(value: &[u8]) -> Option<i64> {
    std::str::from_utf8(value).ok()?.trim().parse::<i64>().ok().filter(|&i| i >= 0)
}

/// The session id in a `Cookie` header's value, if it names one.
pub fn cookie_id(header: &str) -> Option<&str> {
    header
        .split(';')
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.trim())
        .filter(|v| v.len() == 64 && v.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The `Set-Cookie` value that stores session `id` (`None`: the one that clears it).
pub fn set_cookie(id: Option<&str>) -> String {
    match id {
        Some(id) => format!("{COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}", SESSION_IDLE_MS / 1000),
        None => format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"),
    }
}

/// Whether `sent` (the request's `X-CSRF-Token`) is the session's token; compared in time that
/// does not depend on where they differ.
pub fn csrf_ok(session: &Session, sent: Option<&str>) -> bool {
    let Some(sent) = sent else { return false };
    let (a, b) = (session.csrf.as_bytes(), sent.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random(seed: u8) -> [u8; RANDOM_BYTES] {
        std::array::from_fn(|i| seed.wrapping_mul(31).wrapping_add(i as u8))
    }

    #[test]
    fn a_last_event_id_is_a_non_negative_integer_or_nothing() {
        assert_eq!(last_event_id(b"42"), Some(42));
        assert_eq!(last_event_id(b" 7 "), Some(7));
        assert_eq!(last_event_id(b"0"), Some(0));
        for bad in [&b""[..], b"-1", b"1.5", b"abc", b"99999999999999999999", b"\xff\xfe", b"4 2", b"+"] {
            assert_eq!(last_event_id(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_held_session_is_trusted_for_a_while_then_asked_again() {
        let mut t = Sessions::new();
        let (id, s) = new_session((7, 70, [7; 32]), 1_000, &random(1));
        assert_eq!((id.len(), s.csrf.len(), s.account_id), (64, 64, 7));
        assert_ne!(id, s.csrf, "the CSRF token is not the id");
        assert_eq!(s.clone(), Session::from_record(&s.record(hash(&id))), "a record round-trips");
        t.put(hash(&id), s, 1_000);
        assert_eq!(t.fresh(&hash(&id), 1_000 + SESSION_RECHECK_MS - 1, |_| false).map(|s| s.key_id), Some(70));
        assert!(t.fresh(&hash(&id), 1_000 + SESSION_RECHECK_MS, |_| false).is_none(), "ask the database again");
        assert!(t.fresh(&hash(&"0".repeat(64)), 1_100, |_| false).is_none(), "an unknown id");
        assert!(t.close(&hash(&id)));
        assert!(t.fresh(&hash(&id), 1_100, |_| false).is_none(), "signed out");
        assert!(!t.close(&hash(&id)));
    }

    /// A session signed out is not held again by a database read that raced the sign-out, and
    /// says so without a read; the memory of ended sessions is bounded.
    #[test]
    fn a_signed_out_session_stays_out_of_the_copy() {
        let mut t = Sessions::new();
        let (id, s) = new_session((7, 70, [7; 32]), 1_000, &random(1));
        t.put(hash(&id), s.clone(), 1_000);
        assert!(!t.ended(&hash(&id)));
        assert!(t.close(&hash(&id)));
        assert!(t.ended(&hash(&id)), "known ended without asking the database");
        t.put(hash(&id), s.clone(), 1_001);
        assert!(t.fresh(&hash(&id), 1_002, |_| false).is_none(), "a read from before the sign-out is not held");
        for n in 0..ENDED_REMEMBERED_MAX as u32 {
            let mut h = [0u8; 32];
            h[..4].copy_from_slice(&n.to_le_bytes());
            h[31] = 1;
            t.close(&h);
        }
        assert!(!t.ended(&hash(&id)), "the oldest is forgotten at the bound");
        assert_eq!(t.ended.len(), ENDED_REMEMBERED_MAX);
    }

    #[test]
    fn a_held_session_ends_when_idle_too_long_or_when_its_key_is_revoked() {
        let mut t = Sessions::new();
        let (a, sa) = new_session((1, 10, [1; 32]), 0, &random(1));
        let (b, sb) = new_session((2, 20, [2; 32]), 0, &random(2));
        t.put(hash(&a), sa, 3 * SESSION_IDLE_MS);
        t.put(hash(&b), sb, 0);
        assert!(t.fresh(&hash(&a), 3 * SESSION_IDLE_MS + 1, |_| false).is_none(), "idle for more than 7 days");
        assert!(t.fresh(&hash(&b), 1, |s| s.key_id == 20).is_none(), "its key was revoked");
        assert!(t.is_empty(), "both dropped");
    }

    #[test]
    fn the_cookie_and_the_csrf_token_are_checked_exactly() {
        let id = "ab".repeat(32);
        assert_eq!(cookie_id(&format!("theme=dark; {COOKIE}={id}; x=1")), Some(id.as_str()));
        assert_eq!(cookie_id(&format!("{COOKIE}=short")), None);
        assert_eq!(cookie_id("other=1"), None);
        let set = set_cookie(Some(&id));
        for flag in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=604800"] {
            assert!(set.contains(flag), "{set}");
        }
        assert!(set_cookie(None).contains("Max-Age=0"));
        let (_, s) = new_session((1, 1, [1; 32]), 0, &random(3));
        assert!(csrf_ok(&s, Some(&s.csrf)));
        assert!(!csrf_ok(&s, None));
        assert!(!csrf_ok(&s, Some(&s.csrf[1..])));
        assert!(!csrf_ok(&s, Some(&"0".repeat(64))));
    }
}
