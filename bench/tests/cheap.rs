//! The benchmarks in their cheap mode: they must keep compiling and produce sane numbers.

use rampart_bench::{front_hop, tick_apply};

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
