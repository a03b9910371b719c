//! Fuzzes the cluster's message decoders (snapshots, alert commands, queries, the answers to
//! queries, and the webhook delivery a firing's message carries): any bytes decode or give a
//! `WireError`, never a panic, and whatever decodes encodes back to bytes that decode to the
//! same message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rampart_cluster::wire;

fuzz_target!(|data: &[u8]| {
    let _ = wire::read_snapshot(data);
    if let Ok(c) = wire::read_alert_command(data) {
        assert_eq!(wire::read_alert_command(&wire::alert_command(&c)), Ok(c));
    }
    if let Ok(q) = wire::read_query(data) {
        assert_eq!(wire::read_query(&wire::query(&q)), Ok(q));
    }
    if let Ok(bars) = wire::read_candles(data) {
        assert_eq!(wire::read_candles(&wire::candles(&bars)).map(|b| b.len()), Ok(bars.len()));
    }
    if let Ok(view) = wire::read_depth(data) {
        assert_eq!(wire::read_depth(&wire::depth(&view)), Ok(view));
    }
    if let Ok(slots) = wire::read_perp_history(data) {
        assert_eq!(wire::read_perp_history(&wire::perp_history(&slots)).map(|s| s.len()), Ok(slots.len()));
    }
    if let Ok(d) = wire::read_delivery(data) {
        assert_eq!(wire::delivery(&d).map(|b| wire::read_delivery(&b)), Some(Ok(d)));
    }
    if let Ok(t) = wire::read_perp_trigger(data) {
        let again = wire::read_perp_trigger(&wire::perp_trigger(t.as_ref()));
        assert_eq!(again.map(|a| a.is_some()), Ok(t.is_some()));
    }
});
