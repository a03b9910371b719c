//! A client of the `alerts` stream (server-sent events) that reconnects every half second,
//! going round the api nodes it is given, resuming with `since` from the last id it received
//! (issue #50: no resume may skip or repeat an inbox entry). A node that does not answer is
//! skipped for that turn.

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
    /// Every inbox id received, in the order received.
    pub ids: Vec<i64>,
    /// Connections that delivered the stream's head (status 200).
    pub resumes: usize,
}

impl Resumer {
    /// Starts following `key`'s `alerts` channel from `since` through `nodes` in turn (the
    /// thread is spawned from the calling one: in the fault test, inside the client's host).
    pub fn start(nodes: Vec<SocketAddr>, key: &str, since: i64) -> Resumer {
        let stop = Arc::new(AtomicBool::new(false));
        let (stopping, key) = (stop.clone(), key.to_owned());
        let thread = thread::spawn(move || {
            let mut got = Resumed::default();
            let mut turn = 0;
            while !stopping.load(Ordering::Acquire) {
                let node = nodes[turn % nodes.len()];
                turn += 1;
                let last = got.ids.last().copied().unwrap_or(since);
                if follow(node, &key, last, &mut got.ids) {
                    got.resumes += 1;
                } else {
                    thread::sleep(Duration::from_millis(50));
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

/// One connection for [`TURN`]: every `id:` line read is pushed to `ids`. False when the node
/// could not be reached or did not answer 200.
fn follow(node: SocketAddr, key: &str, since: i64, ids: &mut Vec<i64>) -> bool {
    let Ok(mut tcp) = TcpStream::connect_timeout(&node, Duration::from_secs(1)) else { return false };
    if tcp.set_read_timeout(Some(Duration::from_millis(50))).is_err() {
        return false;
    }
    let head = format!(
        "GET /v1/stream?channels=alerts&since={since} HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nAuthorization: Bearer {key}\r\n\r\n"
    );
    if tcp.write_all(head.as_bytes()).is_err() {
        return false;
    }
    let mut reader = BufReader::new(tcp);
    let (until, mut line, mut ok) = (Instant::now() + TURN, String::new(), false);
    while Instant::now() < until {
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
    ok
}
