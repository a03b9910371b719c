//! The benchmarks in their cheap mode: they must keep compiling and produce sane numbers.

use rampart_bench::{
    alert_decision, binance_decode, delivery, front_hop, levels_consumption_check, levels_recompute, parsers,
    parsers_table, tick_apply, wall_scan, Backend,
};

// Counting allocations lets the parsers test check the allocation figures too.
#[global_allocator]
static GLOBAL: rampart_testkit::alloc::Counting = rampart_testkit::alloc::Counting;

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
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let s = delivery(backend, 200, 4);
        assert_eq!(s.count, 198, "every fast delivery arrived: {s:?}");
    }
}

#[test]
fn firing_commits_cheap() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let s = rampart_bench::firing_commits(backend, 16, 64);
        assert_eq!(s.count, 4, "four commits of 16: {s:?}");
    }
}

#[test]
fn attempt_records_cheap() {
    use rampart_bench::records::{attempt_records, Came};
    for backend in [Backend::Sqlite, Backend::Postgres] {
        for came in [Came::Delivered, Came::TimedOut] {
            let s = attempt_records(backend, 16, 64, came);
            assert_eq!(s.count, 4, "four records of 16: {s:?}");
        }
    }
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
fn perp_round_cheap() {
    use rampart_bench::perp_round::{perp_round, Perps};
    for perps in [Perps::Off, Perps::On, Perps::WithAlerts(2_000)] {
        let s = perp_round(20, 2, perps);
        assert!(s.count == 400 && s.rate_per_s.is_some_and(|r| r > 0.0), "{perps:?}: {s:?}");
    }
}

#[test]
fn perp_memory_cheap() {
    let row = rampart_bench::perp_memory::perp_memory(20);
    let cells: Vec<&str> = row.split('|').map(str::trim).filter(|c| !c.is_empty()).collect();
    assert_eq!(cells.len(), 5, "{row}");
    assert!(cells[0].ends_with("contracts (20 pairs × 4 venues)") && !cells[0].starts_with("0 "), "{row}");
    // From the types' sizes: at least the book and the ring of 128 (40 bytes an entry), and within
    // §17's about 21 KiB a pair.
    let floor = (rampart_engine::perp_book::PERP_BOOK_BYTES + rampart_state::liq_feed::LIQ_FEED_LEN * 40) as f64;
    assert!(
        cells[3].ends_with("KiB")
            && cells[3].trim_end_matches(" KiB").parse::<f64>().is_ok_and(|k| k * 1024.0 >= floor - 52.0 && k <= 21.0),
        "{row}"
    );
}

#[test]
fn live_ingest_cheap() {
    let s = rampart_bench::ingest::live_ingest(20, 3_000, 1_000);
    assert_eq!(s.count, 3_000, "{s:?}");
    assert!(s.p50_ns > 0 && s.p50_ns <= s.p99_ns && s.p99_ns <= s.max_ns, "{s:?}");
    assert!(s.rate_per_s.is_some_and(|r| r > 0.0));
}

#[test]
fn book_baseline_cheap() {
    let started = std::time::Instant::now();
    // `compare` panics unless both paths end every run with the same book, prices and firings.
    let c = rampart_bench::book_baseline::compare(2_000, 2);
    assert_eq!((c.frames, c.runs), (2_000, 2));
    assert!(c.engine_p50_ns > 0 && c.engine_p50_ns <= c.engine_p99_ns, "{c:?}");
    assert!(c.baseline_p50_ns > 0 && c.baseline_p50_ns <= c.baseline_p99_ns, "{c:?}");
    assert!(c.ratio_p50 > 0.0, "{c:?}");
    assert!(c.book_levels.0 > 100 && c.book_levels.1 > 100, "{c:?}");
    // All, diffs, trades, then one row per run; every message of every run timed.
    assert_eq!(c.rows.len(), 5);
    assert_eq!(c.rows[0].samples, 4_000);
    assert_eq!(c.rows[1].samples + c.rows[2].samples, 4_000);
    // The engine path allocates nothing per message; the baseline does.
    assert_eq!(c.engine_allocs_per_msg, Some(0.0), "{c:?}");
    assert!(c.baseline_allocs_per_msg.is_some_and(|a| a >= 1.0), "{c:?}");
    assert!(c.table().lines().count() >= 2 + 2 + 5, "{}", c.table());
    assert!(started.elapsed() < std::time::Duration::from_secs(2), "took {:?}", started.elapsed());
}

#[test]
fn http_load_against_the_baseline_server() {
    use rampart_bench::{baseline_http, http_load};
    use std::time::Duration;

    let small = br#"{"symbol":"BTCUSDT","price":"64000.12"}"#.to_vec();
    let large = vec![b'x'; 100_000];
    let server = baseline_http::start(vec![
        ("/v1/symbols/BTCUSDT".to_owned(), small.clone()),
        ("/v1/exchanges/binance/symbols?quote=USDT".to_owned(), large),
    ])
    .expect("baseline server starts");
    let head = |path: &str| format!("GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer K\r\n\r\n");
    let requests = [
        head("/v1/symbols/BTCUSDT"),
        head("/v1/exchanges/binance/symbols?quote=USDT"),
        head("/v1/nowhere"),
        head("/v1/exchanges/binance/symbols?quote=BTC"),
    ];

    let r = http_load::run(server.addr(), &requests, 4, 2, Duration::from_millis(300), None);
    assert!(r.requests > 0, "{r:?}");
    assert_eq!(r.errors, 0, "{r:?}");
    // Half the requests go to unknown paths or queries: 404s, counted apart.
    assert!(r.non_2xx > 0 && r.non_2xx < r.requests, "{r:?}");
    assert_eq!(r.latency_us.len(), r.requests);
    assert!(r.duration_s >= 0.3 && r.req_per_s > 0.0, "{r:?}");
    let s = r.summary();
    assert!(s.p50_us >= 1 && s.p50_us <= s.p90_us && s.p99_us <= s.max_us, "{s}");

    // Only the unknown path: every answer a 404.
    let only_404 = [head("/nope")];
    let r = http_load::run(server.addr(), &only_404, 1, 1, Duration::from_millis(50), None);
    assert!(r.requests > 0 && r.non_2xx == r.requests && r.errors == 0, "{r:?}");

    // Open loop at 400 req/s over 2 connections for 250 ms: about 100 requests, on schedule.
    let r = http_load::run(server.addr(), &requests[..1], 2, 1, Duration::from_millis(250), Some(400.0));
    assert!((90..=101).contains(&r.requests), "{r:?}");
    assert_eq!((r.errors, r.non_2xx), (0, 0), "{r:?}");
}

#[test]
fn http_load_counts_a_dead_server_as_errors() {
    use rampart_bench::http_load;
    use std::time::Duration;
    // A port nobody listens on: bind one, note it, close it.
    let addr = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port");
    let requests = ["GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_owned()];
    let r = http_load::run(addr, &requests, 2, 1, Duration::from_millis(100), None);
    assert_eq!(r.requests, 0, "{r:?}");
    assert!(r.errors > 0, "{r:?}");
}

#[test]
fn wrk_against_the_baseline_server() {
    use rampart_bench::{baseline_http, http_load};
    let server =
        baseline_http::start(vec![("/v1/symbols/BTCUSDT".to_owned(), b"{}".to_vec())]).expect("baseline server starts");
    let url = format!("http://{}/v1/symbols/BTCUSDT", server.addr());
    match http_load::wrk(&url, Some("Authorization: Bearer K"), 4, 1, 1) {
        Some(w) => {
            assert!(w.req_per_s > 0.0, "{w:?}");
            assert!(w.p50_us > 0.0 && w.p50_us <= w.p75_us && w.p75_us <= w.p90_us && w.p90_us <= w.p99_us, "{w:?}");
        }
        // Not a failure where wrk is not installed (`None` is the documented answer then).
        None => assert!(
            std::process::Command::new("wrk").arg("--version").output().is_err(),
            "wrk is installed but its run or report failed"
        ),
    }
}
