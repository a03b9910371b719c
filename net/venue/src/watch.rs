//! Logs every change of a live venue's state (down, degraded, back to ok), checked once a second
//! from the counters the shards publish, so an operator reading the log sees an outage begin
//! and end without polling `/healthz`.
//!
//! The first check after the shards are ready logs any venue that is not ok; afterwards only
//! changes are logged. The thread stops within [`CHECK_SLICE`] of [`VenueWatch::stop`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rampart_engine::Venue;

use rampart_state::{Shared, VenueState};

/// Time between two checks.
pub const CHECK_PERIOD: Duration = Duration::from_secs(1);
/// The thread looks at its stop flag this often.
pub const CHECK_SLICE: Duration = Duration::from_millis(100);

/// The watching thread.
pub struct VenueWatch {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl VenueWatch {
    /// Starts watching `venues`.
    pub fn start(shared: Arc<Shared>, venues: Vec<Venue>) -> std::io::Result<VenueWatch> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new().name("venue-watch".into()).spawn(move || {
            let mut last: Vec<Option<VenueState>> = vec![None; venues.len()];
            while !flag.load(Ordering::Acquire) {
                if shared.ready() {
                    for (i, v) in venues.iter().enumerate() {
                        let h = shared.venue_health(*v);
                        if let Some(line) = transition(*v, last[i], h.state, h.why) {
                            match h.state {
                                VenueState::Down => tracing::warn!("{line}"),
                                _ => tracing::info!("{line}"),
                            }
                        }
                        last[i] = Some(h.state);
                    }
                }
                let mut slept = Duration::ZERO;
                while slept < CHECK_PERIOD && !flag.load(Ordering::Acquire) {
                    std::thread::sleep(CHECK_SLICE);
                    slept += CHECK_SLICE;
                }
            }
        })?;
        Ok(VenueWatch { stop, thread: Some(thread) })
    }

    /// Stops the thread.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The log line for a venue going from `before` (`None`: first check) to `now`, if any.
pub fn transition(venue: Venue, before: Option<VenueState>, now: VenueState, why: &str) -> Option<String> {
    match (before, now) {
        (Some(b), n) if b == n => None,
        (None, VenueState::Ok) => None,
        (_, VenueState::Down) => Some(format!("{venue}: down: {why}")),
        (Some(VenueState::Down), n) => Some(format!("{venue}: recovered ({})", n.as_str())),
        (_, VenueState::Degraded) => Some(format!("{venue}: degraded: {why}")),
        (Some(_), VenueState::Ok) => Some(format!("{venue}: ok")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_changes_are_logged() {
        use VenueState::{Degraded, Down, Ok};
        let v = Venue::Okx;
        assert_eq!(transition(v, None, Ok, ""), None, "a healthy start is quiet");
        assert_eq!(transition(v, None, Down, "no connection open").as_deref(), Some("okx: down: no connection open"));
        assert_eq!(transition(v, Some(Down), Down, "x"), None);
        assert_eq!(transition(v, Some(Down), Ok, "").as_deref(), Some("okx: recovered (ok)"));
        assert_eq!(transition(v, Some(Down), Degraded, "y").as_deref(), Some("okx: recovered (degraded)"));
        assert_eq!(transition(v, Some(Ok), Degraded, "z").as_deref(), Some("okx: degraded: z"));
        assert_eq!(transition(v, Some(Degraded), Ok, "").as_deref(), Some("okx: ok"));
    }
}
