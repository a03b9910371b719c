//! The benchmarks in their cheap mode: they must keep compiling and produce sane numbers.

use rampart_bench::{
    alert_decision, binance_decode, delivery, front_hop, levels_consumption_check, levels_recompute, parsers,
    parsers_table, tick_apply, wall_scan,
};

// Counting allocations lets the parsers test check the allocation figures too.
#[global_allocator]
static GLOBAL: rampart_bench::alloc_count::Counting = rampart_bench::alloc_count::Counting;

#[test]
fn tick_apply_cheap() {
    let s = tick_apply(20, 200);
    assert!(s.count > 1_000, "{s:?}");
    assert!(s.p50_ns > 0 && s.p50_ns <= s.p99_ns && s.p99_ns <= s.max_ns, "{s:?}");
    assert!(s.rate_per_s.is_some_and(|r| r > 0.0));
}

#[test]
fn front_hop_cheap() {
    let s = front_hop(20, 1, 50);
    assert_eq!(s.len(), 2);
    assert!(s[0].count >= 45, "pings answered: {:?}", s[0]);
    assert!(s[1].count >= 500);
}

#[test]
fn levels_cheap() {
    let s = levels_recompute(10, 1);
    assert!(s.count >= 10 && s.p50_ns > 0, "{s:?}");
    let c = levels_consumption_check(2_000);
    assert_eq!(c.count, 2_000);
}

#[test]
fn wall_scan_cheap() {
    let s = wall_scan(10, 2);
    assert!(s.count >= 20 && s.p50_ns > 0, "{s:?}");
}

#[test]
fn alert_decision_cheap() {
    let s = alert_decision(1_000, 5_000, 2_000);
    assert_eq!(s.count, 2_000);
    assert!(s.name.contains("firings"), "{s:?}");
}

#[test]
fn delivery_cheap() {
    let s = delivery(200, 4);
    assert_eq!(s.count, 198, "every fast delivery arrived: {s:?}");
}

#[test]
fn binance_decode_cheap() {
    let s = binance_decode(1_000);
    assert_eq!(s.len(), 2);
    assert!(s.iter().all(|x| x.count == 1_000));
}

#[test]
fn parsers_agree_and_run_cheap() {
    // Every parser gives the same levels, ids and trades on every frame.
    let checked = rampart_bench::parsers::verify().expect("parsers agree");
    let cases = rampart_bench::parsers::cases();
    assert!(checked >= cases.len() * 5, "{checked} checks for {} frames", cases.len());
    let rows = parsers(200).expect("parsers run");
    // One row per supported (frame, parser) pair, plus the clock-only row.
    assert_eq!(rows.len(), checked + 1);
    for r in &rows {
        assert_eq!(r.summary.count as usize, rampart_bench::parsers::frames_for(200, r.bytes), "{r:?}");
        assert!(r.summary.p50_ns > 0 && r.summary.p50_ns <= r.summary.p99_ns, "{r:?}");
    }
    // The engine decoders allocate nothing per frame once warm.
    for r in rows.iter().filter(|r| r.parser.starts_with("engine")) {
        assert_eq!(r.allocs_per_frame, Some(0.0), "{r:?}");
    }
    let table = parsers_table(&[rows.clone(), rows]);
    assert!(table.lines().count() >= checked + 2, "{table}");
}

#[test]
fn live_ingest_cheap() {
    let s = rampart_bench::ingest::live_ingest(20, 3_000, 1_000);
    assert_eq!(s.count, 3_000, "{s:?}");
    assert!(s.p50_ns > 0 && s.p50_ns <= s.p99_ns && s.p99_ns <= s.max_ns, "{s:?}");
    assert!(s.rate_per_s.is_some_and(|r| r > 0.0));
}
