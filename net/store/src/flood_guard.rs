//! The flood guard of `decisions.md` §16, sans-I/O: a repeating alert fires at most
//! [`FLOOD_FIRINGS_MAX`] times within any [`FLOOD_WINDOW_MS`]; the firing that would be one more
//! pauses it instead (`paused: flood_guard`, with a notice). Pure: fed an alert's latest firing
//! times as stored (`alerts.recent_fires`) and each new firing's time; the store's transaction
//! reads and writes what it answers (`Store::record_firings`), as it does for the retry schedule
//! (`rampart_delivery::schedule`). A resume of the paused alert starts it with an empty window.
//!
//! Bound: a window holds at most [`FLOOD_FIRINGS_MAX`] times (older ones fall out as it admits).

/// A repeating alert fires at most this many times within [`FLOOD_WINDOW_MS`]; the next firing
/// pauses it instead.
pub const FLOOD_FIRINGS_MAX: usize = 15;
/// The flood guard's window: 3 minutes.
pub const FLOOD_WINDOW_MS: i64 = 180_000;

/// A repeating alert's latest firing times, as stored (comma-separated, oldest first).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FloodWindow(Vec<i64>);

impl FloodWindow {
    /// The window stored as `stored` (what does not read as a time is left out).
    pub fn parse(stored: &str) -> FloodWindow {
        FloodWindow(stored.split(',').filter_map(|t| t.parse().ok()).collect())
    }

    /// As it is stored.
    pub fn stored(&self) -> String {
        let times: Vec<String> = self.0.iter().map(i64::to_string).collect();
        times.join(",")
    }

    /// Takes a firing at `ts_ms`: true when it may be sent (then it is in the window), false when
    /// it would be one more than [`FLOOD_FIRINGS_MAX`] within [`FLOOD_WINDOW_MS`] up to it (the
    /// alert is paused; the window is left as it was). A time `FLOOD_WINDOW_MS` or more before
    /// `ts_ms` is out of its window.
    pub fn admit(&mut self, ts_ms: i64) -> bool {
        self.0.retain(|&t| t > ts_ms - FLOOD_WINDOW_MS);
        if self.0.len() >= FLOOD_FIRINGS_MAX {
            return false;
        }
        self.0.push(ts_ms);
        debug_assert!(self.0.len() <= FLOOD_FIRINGS_MAX);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifteen_firings_within_three_minutes_pass_and_the_sixteenth_pauses() {
        let mut w = FloodWindow::default();
        for i in 0..FLOOD_FIRINGS_MAX as i64 {
            assert!(w.admit(1_000 + i), "firing {}", i + 1);
        }
        assert!(!w.admit(1_000 + FLOOD_WINDOW_MS - 1), "the 16th, the first still within the window");
        assert_eq!(w.stored().split(',').count(), FLOOD_FIRINGS_MAX, "a refused firing leaves it as it was");
        // Exactly a window after the first, the first is out: one more passes.
        assert!(w.admit(1_000 + FLOOD_WINDOW_MS));
        assert!(!w.admit(1_000 + FLOOD_WINDOW_MS), "and no more, the second is in");
    }

    #[test]
    fn the_window_reads_back_as_stored_and_skips_what_is_not_a_time() {
        let mut w = FloodWindow::parse("5,x,,7");
        assert_eq!(w.stored(), "5,7");
        assert_eq!(FloodWindow::parse(""), FloodWindow::default());
        assert!(w.admit(9));
        assert_eq!(FloodWindow::parse(&w.stored()), w);
        // Times a window or more old are dropped as a firing is admitted.
        assert!(w.admit(7 + FLOOD_WINDOW_MS));
        assert_eq!(w.stored(), format!("9,{}", 7 + FLOOD_WINDOW_MS));
    }
}
