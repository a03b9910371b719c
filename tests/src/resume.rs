//! A client of the `alerts` stream (server-sent events) that reconnects every half second,
//! going round the api nodes it is given (issue #50: no resume may skip or repeat an inbox
//! entry). Every other turn resumes with `since` from the last id it received; the turns
//! between resume from an earlier id it saw, and what they receive must be what followed that id
//! before (then anything new). [`every_id`] afterwards resumes once from every id seen.
//! A node that does not answer is skipped for that turn.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// How long each connection is kept before the next resume.
const TURN: Duration = Duration::from_millis(500);

/// The running client.
pub struct Resumer {
    stop: Arc<AtomicBool>,
    thread: thread::JoinHandle<Resumed>,
}

/// What the client received.
#[derive(Debug, Default)]
pub struct Resumed {
    /// Every inbox id received, once each, in the order first received.
    pub ids: Vec<i64>,
    /// Connections that answered 200.
    pub resumes: usize,
    /// What a resume received that differs from what followed its `since` before.
    pub mismatches: Vec<String>,
}

impl Resumed {
    /// Takes in what a resume from `since` received: the ids known after `since` must come
    /// first and in order, then new ones, which are appended.
    fn take(&mut self, since: i64, received: &[i64]) {
        let from = self.ids.iter().position(|&id| id == since).map_or(0, |i| i + 1);
        for (i, &id) in received.iter().enumerate() {
            match self.ids.get(from + i) {
                Some(&known) if known != id => {
                    let known_after = &self.ids[from..(from + 8).min(self.ids.len())];
                    self.mismatches.push(format!("since {since}: got {received:?}, known after it {known_after:?}…"));
                    return;
                }
                Some(_) => {}
                None => self.ids.push(id),
            }
        }
    }
}

impl Resumer {
    /// Starts following `key`'s `alerts` channel from `since` through `nodes` in turn (the
    /// thread is spawned from the calling one: in the fault test, inside the client's host).
    pub fn start(nodes: Vec<SocketAddr>, key: &str, since: i64) -> Resumer {
        let stop = Arc::new(AtomicBool::new(false));
        let (stopping, key) = (stop.clone(), key.to_owned());
        let thread = thread::spawn(move || {
            let mut got = Resumed::default();
            let mut turn = 0usize;
            while !stopping.load(Ordering::Acquire) {
                let node = nodes[turn % nodes.len()];
                let from = match (turn % 2, got.ids.len()) {
                    (1, n) if n > 1 => got.ids[(turn / 2).wrapping_mul(7_919) % (n - 1)],
                    _ => got.ids.last().copied().unwrap_or(since),
                };
                turn += 1;
                match follow(node, &key, from, TURN, None) {
                    Some(received) => {
                        got.resumes += 1;
                        got.take(from, &received);
                    }
                    None => thread::sleep(Duration::from_millis(50)),
                }
            }
            got
        });
        Resumer { stop, thread }
    }

    /// Stops after one more round; what was received.
    pub fn finish(self) -> Resumed {
        thread::sleep(TURN * 2 + Duration::from_millis(200));
        self.stop.store(true, Ordering::Release);
        self.thread.join().expect("the resumer")
    }
}

/// Resumes `key`'s `alerts` channel once from every id in `got` (through `nodes` in turn, the
/// next one when one does not answer); each must receive exactly the ids that followed it.
/// What differs.
pub fn every_id(nodes: &[SocketAddr], key: &str, got: &Resumed) -> Vec<String> {
    let mut wrong = Vec::new();
    for (i, &since) in got.ids.iter().enumerate() {
        let want = &got.ids[i + 1..];
        let answered = (0..nodes.len() * 3).find_map(|t| {
            let node = nodes[(i + t) % nodes.len()];
            follow(node, key, since, Duration::from_secs(5), Some(want.len()))
        });
        match answered {
            Some(received) if received == want => {}
            Some(received) => {
                wrong.push(format!("since {since}: {} received, {} expected", received.len(), want.len()))
            }
            None => wrong.push(format!("since {since}: no node answered")),
        }
    }
    wrong
}

/// One connection for at most `turn` (or until `enough` ids came): the ids of its `id:` lines,
/// in order; `None` when the node could not be reached or did not answer 200.
fn follow(node: SocketAddr, key: &str, since: i64, turn: Duration, enough: Option<usize>) -> Option<Vec<i64>> {
    let mut tcp = TcpStream::connect_timeout(&node, Duration::from_secs(1)).ok()?;
    tcp.set_read_timeout(Some(Duration::from_millis(50))).ok()?;
    let head = format!(
        "GET /v1/stream?channels=alerts&since={since} HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nAuthorization: Bearer {key}\r\n\r\n"
    );
    tcp.write_all(head.as_bytes()).ok()?;
    let mut reader = BufReader::new(tcp);
    let (until, mut line, mut ok, mut ids) = (Instant::now() + turn, String::new(), false, Vec::new());
    while Instant::now() < until && enough.is_none_or(|n| ids.len() < n || !ok) {
        match reader.read_line(&mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(_) => continue,
        }
        if line.starts_with("HTTP/1.1 200") {
            ok = true;
        }
        if let Some(id) = line.trim_end().strip_prefix("id: ").and_then(|v| v.parse::<i64>().ok()) {
            ids.push(id);
        }
        line.clear();
    }
    ok.then_some(ids)
}

#[cfg(test)]
mod tests {
    use super::Resumed;

    #[test]
    fn a_resume_from_an_earlier_id_must_receive_what_followed_it_then_new_entries() {
        let mut got = Resumed::default();
        got.take(0, &[1, 2, 3]);
        got.take(1, &[2, 3, 4]);
        assert_eq!((got.ids.as_slice(), got.mismatches.len()), (&[1, 2, 3, 4][..], 0));
        // A resume from 1 that skips 2: told.
        got.take(1, &[3, 4]);
        assert_eq!(got.mismatches.len(), 1, "{:?}", got.mismatches);
    }

    #[test]
    fn a_repeat_after_the_last_id_is_kept_for_the_final_comparison() {
        let mut got = Resumed::default();
        got.take(0, &[1, 2]);
        got.take(2, &[2, 3]);
        assert_eq!(got.ids, [1, 2, 2, 3], "the listing compared at the end has 2 once");
    }
}
