//! The latency benchmark harness's scenarios at a small scale, against the real binary: each
//! runs end to end (simulator, live feed, alerts, webhook receivers), passes its correctness
//! checks (every expected firing arrived exactly once, none early; the storm's webhooks signed,
//! each signature verified) and writes its result files.

use std::path::PathBuf;
use std::time::Duration;

use rampart_bench::scenarios::{run, Opts};

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");

fn opts(scenario: &str, out: &std::path::Path) -> Opts {
    Opts {
        scenario: scenario.to_owned(),
        rampart: PathBuf::from(BIN),
        out: out.to_path_buf(),
        pairs: 20,
        alerts: 200,
        secs: 3,
        storm_alerts: 300,
        storm_receivers: 10,
        liq_rounds: 1,
        // `quiet` loads a few derivatives alerts too (`perp_load`), so that path is run.
        perp_alerts: if scenario == "quiet" { 40 } else { 0 },
        // The storm here runs signed, so the harness's check of signatures is exercised too.
        signed: scenario == "storm",
        probe_every: Duration::from_millis(200),
        ingest_messages: 2_000,
        command: format!("tests/harness.rs {scenario}"),
        backend: "sqlite".to_owned(),
        deliver_workers: 2,
        streams: 20,
        shards: 1,
        // Two front threads: the harness's own servers run as a many-core machine's would.
        fronts: Some(2),
        load_threads: 2,
        rampart_cpus: None,
    }
}

#[test]
fn quiet_and_storm_scenarios_run_and_check_out() {
    let out = std::env::temp_dir().join(format!("rampart-harness-test-{}", std::process::id()));
    for scenario in ["quiet", "storm"] {
        let r = run(&opts(scenario, &out)).unwrap_or_else(|e| panic!("{scenario}: {e}"));
        assert_eq!(r["correctness"]["ok"], true, "{scenario}: {}", r["correctness"]);
        assert_eq!(r["correctness"]["duplicates"], 0, "{scenario}");
        assert_eq!(r["correctness"]["early"], 0, "{scenario}");
        assert!(r["tickToWebhookUs"]["count"].as_u64().is_some_and(|n| n > 0), "{scenario}: {r}");
        // The result names the binary it measured.
        assert!(r["rampartVersion"]["revision"].as_str().is_some_and(|v| !v.is_empty()), "{scenario}: {r}");
        // The simulator publishes a trade after the harness asked for it: measured from the
        // publication, no webhook can take longer than measured from the request.
        let (tick, request) = (&r["tickToWebhookUs"], &r["requestToWebhookUs"]);
        assert_eq!(tick["count"], request["count"], "{scenario}: {r}");
        for q in ["p50", "p99", "max"] {
            assert!(tick[q].as_u64() <= request[q].as_u64(), "{scenario}: {q}: {r}");
        }
        assert!(r["tickToDecisionUs"]["count"].as_u64().is_some_and(|n| n > 0), "{scenario}: trades were timed: {r}");
        assert!(r["machine"]["cores"].as_u64().is_some_and(|c| c > 0));
        if scenario == "quiet" {
            assert_eq!(r["perpAlerts"]["loaded"], 40, "{r}");
        }
        if scenario == "storm" {
            let healthy = &r["correctness"]["expectedHealthy"];
            assert_eq!(&r["correctness"]["signatures"]["verified"], healthy, "every delivery verified: {r}");
            assert!(r["deliveriesPerS"].as_f64().is_some_and(|d| d > 0.0), "{r}");
        }
    }
    let files: Vec<String> = std::fs::read_dir(&out)
        .expect("result dir")
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    for suffix in ["quiet.json", "quiet.md", "storm.json", "storm.md"] {
        assert!(files.iter().any(|f| f.ends_with(suffix)), "{suffix} in {files:?}");
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn ingest_scenario_runs_in_process() {
    let out = std::env::temp_dir().join(format!("rampart-harness-ingest-{}", std::process::id()));
    let r = run(&opts("ingest", &out)).expect("ingest");
    assert!(r["ingestPerCore"]["medianMsgsPerS"].as_f64().is_some_and(|r| r > 0.0), "{r}");
    assert!(r["bookBaseline"]["ratioP50"].as_f64().is_some_and(|x| x > 0.0), "{r}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn http_scenario_compares_with_the_baseline() {
    let out = std::env::temp_dir().join(format!("rampart-harness-http-{}", std::process::id()));
    let mut o = opts("http", &out);
    o.secs = 1;
    let r = run(&o).expect("http");
    let rows = r["http"].as_array().cloned().unwrap_or_default();
    assert_eq!(rows.len(), 6, "levels, densities (one pair and bulk), metrics and a ranking: {r}");
    for row in rows {
        assert!(row["rampart"]["reqPerS"].as_f64().is_some_and(|x| x > 0.0), "{row}");
        assert_eq!(row["rampart"]["errors"], 0, "{row}");
        assert_eq!(row["rampart"]["non2xx"], 0, "every request answered 200: {row}");
        assert!(row["baseline"]["reqPerS"].as_f64().is_some_and(|x| x > 0.0), "{row}");
        assert!(row["ratio"].as_f64().is_some_and(|x| x > 0.0), "{row}");
        assert!(row["ratioSameThreads"].as_f64().is_some_and(|x| x > 0.0), "against two axum threads: {row}");
    }
    assert_eq!(r["httpBaselineThreads"], 2, "the baseline has as many threads as rampart's fronts");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn writes_scenario_creates_alerts_beside_the_reads() {
    let out = std::env::temp_dir().join(format!("rampart-harness-writes-{}", std::process::id()));
    let mut o = opts("writes", &out);
    o.secs = 1;
    let r = run(&o).expect("writes");
    let rounds = r["writes"]["rounds"].as_array().cloned().unwrap_or_default();
    assert_eq!(rounds.len(), 3, "three rounds of reads alone and with creates: {r}");
    for round in rounds {
        for load in ["alone", "withCreates"] {
            assert!(round[load]["reqPerS"].as_f64().is_some_and(|x| x > 0.0), "{load}: {round}");
            assert_eq!(round[load]["errors"], 0, "{load}: {round}");
            assert_eq!(round[load]["non2xx"], 0, "{load}: every read answered 200: {round}");
        }
        assert!(round["creates"]["made"].as_u64().is_some_and(|n| n > 0), "alerts were created: {round}");
        assert_eq!(round["creates"]["failed"], 0, "every create answered 2xx: {round}");
        assert!(round["p99Ratio"].as_f64().is_some_and(|x| x > 0.0), "{round}");
    }
    let md = std::fs::read_dir(&out)
        .expect("result files")
        .filter_map(Result::ok)
        .find(|e| e.path().extension().is_some_and(|x| x == "md"))
        .map(|e| std::fs::read_to_string(e.path()).expect("readable"))
        .expect("a markdown result");
    assert!(md.contains("Median p99 ratio"), "{md}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn liquidations_scenario_delivers_every_injected_liquidation() {
    let out = std::env::temp_dir().join(format!("rampart-harness-liquidations-{}", std::process::id()));
    let mut o = opts("liquidations", &out);
    o.storm_alerts = 3;
    let r = run(&o).expect("liquidations");
    let s = &r["liquidationStorm"];
    assert!(s["expected"].as_u64().is_some_and(|n| n > 0), "{s}");
    assert_eq!(s["delivered"], s["expected"], "every injected liquidation reached every `*` alert: {s}");
    assert_eq!(s["duplicates"], 0, "{s}");
    assert!(s["triggersPerBodyMax"].as_u64().is_some_and(|n| (1..=100).contains(&n)), "{s}");
    let _ = std::fs::remove_dir_all(&out);
}
