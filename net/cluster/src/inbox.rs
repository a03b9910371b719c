//! Inbox commits made known across a cluster, so a stream's `alerts` on any api node reads a
//! firing the moment a market node (or another api node's site market alerts) wrote it
//! (`decisions.md` §12: within 100 ms), not at its next one-second look.
//!
//! A node with a writer runs a [`Beacon`]: woken by the writer's `inbox_written`, it publishes an
//! empty message on [`INBOX_SUBJECT`] (core NATS; one per wake-up, however many commits it
//! covers). Every api node runs a [`Listener`] that counts each such message as an inbox commit
//! of its own front's `WriterStats` (`note_inbox_write`), which wakes the streams waiting on it.
//! A message lost (NATS away, a node restarting) costs nothing but latency: the streams still
//! read the inbox every second.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures_lite::StreamExt;

use super::snapshots::connect_until;
use rampart_state::shutdown::StoppableThread;
use rampart_store::writer::WriterStats;

/// The subject inbox commits are announced on.
pub const INBOX_SUBJECT: &str = "rampart.inbox";

/// Longest wait of the beacon between two looks at its writer's count (a commit's wake-up that
/// came between two waits is seen at the next look).
const LOOK_EVERY: Duration = Duration::from_millis(50);

/// Announces `stats`' inbox commits; stopped on drop.
pub struct Beacon {
    _thread: StoppableThread,
}

impl Beacon {
    /// Starts announcing on the NATS server at `url`.
    pub fn start(url: String, stats: Arc<WriterStats>) -> std::io::Result<Beacon> {
        let thread = super::spawn_async("inbox-beacon", move |stop| async move {
            let Some(client) = connect_until(&url, "inbox-beacon", &stop).await else { return };
            let mut seen = stats.inbox_writes.load(Ordering::Acquire);
            while !stop.load(Ordering::Acquire) {
                let _ = tokio::time::timeout(LOOK_EVERY, stats.inbox_written.notified()).await;
                let now = stats.inbox_writes.load(Ordering::Acquire);
                if now != seen {
                    seen = now;
                    // A failed publish is the loss the streams' one-second look covers.
                    let _ = client.publish(INBOX_SUBJECT, bytes::Bytes::new()).await;
                    let _ = client.flush().await;
                }
            }
        })?;
        Ok(Beacon { _thread: thread })
    }
}

/// Counts announced inbox commits into `stats`; stopped on drop.
pub struct Listener {
    _thread: StoppableThread,
}

impl Listener {
    /// Starts listening on the NATS server at `url`.
    pub fn start(url: String, stats: Arc<WriterStats>) -> std::io::Result<Listener> {
        let thread = super::spawn_async("inbox-listener", move |stop| async move {
            let Some(client) = connect_until(&url, "inbox-listener", &stop).await else { return };
            let Ok(mut messages) = client.subscribe(INBOX_SUBJECT).await else {
                tracing::error!("inbox-listener: cannot subscribe; streams read the inbox each second");
                return;
            };
            while !stop.load(Ordering::Acquire) {
                // The stop flag is looked at every half second.
                if let Ok(Some(_)) = tokio::time::timeout(Duration::from_millis(500), messages.next()).await {
                    stats.note_inbox_write();
                }
            }
        })?;
        Ok(Listener { _thread: thread })
    }
}
