//! `rampart-harness`: the latency benchmark harness (see `rampart_bench::scenarios`). It
//! starts `rampart sim-venue` and `rampart serve --feed live` pointed at it, webhook receivers and
//! a load of alerts, runs one scenario and writes `perf/runs/<date>-<scenario>.{json,md}`.
//!
//! Usage: `rampart-harness curve DIR` (a `perf/scripts/scale.sh` run's figures as one table, also
//! written to `DIR/curve.md`), or `rampart-harness quiet|burst|storm|http|writes|ingest [--rampart PATH] [--out DIR]
//! [--pairs N] [--alerts N] [--secs S] [--storm-alerts N] [--signed] [--backend sqlite|postgres|cluster|roles]
//! [--shards N] [--fronts N] [--load-threads N] [--rampart-cpus LIST]` (rampart's shards, 1 unless
//! told; its front threads, its own default unless told; the HTTP load generator's threads, 2
//! unless told; the CPUs rampart, and the http baseline's threads, run on: `taskset -c LIST`)
//! (`--signed`: storm with the account's webhooks signed, each signature verified after the run)
//! (`--backend` as `scenarios::Opts::backend` says; `--rampart` defaults to the
//! `rampart` binary beside this one: build both with `cargo build --release -p rampart -p
//! rampart-bench`).

use std::path::PathBuf;
use std::time::Duration;

use rampart_bench::scenarios::{self, Opts, BACKENDS, SCENARIOS};

fn opts() -> Result<Opts, String> {
    let args: Vec<String> = std::env::args().collect();
    let get = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let num =
        |name: &str, d: usize| get(name).map_or(Ok(d), |v| v.parse().map_err(|_| format!("{name} takes a number")));
    let scenario = args.get(1).cloned().unwrap_or_default();
    if !SCENARIOS.contains(&scenario.as_str()) {
        return Err(format!(
            "usage: rampart-harness {} [--rampart PATH] [--out DIR] [--pairs N] [--alerts N] [--secs S] [--storm-alerts N] [--signed] [--streams N] [--shards N] [--fronts N] [--load-threads N] [--rampart-cpus LIST]",
            SCENARIOS.join("|")
        ));
    }
    let beside = std::env::current_exe().ok().and_then(|p| p.parent().map(|d| d.join("rampart")));
    let rampart = get("--rampart").map(PathBuf::from).or(beside).ok_or("--rampart PATH is needed")?;
    let default_alerts = if scenario == "storm" { 0 } else { 100_000 };
    let backend = get("--backend").unwrap_or_else(|| "sqlite".to_owned());
    if !BACKENDS.contains(&backend.as_str()) {
        return Err(format!("--backend is one of {}", BACKENDS.join(", ")));
    }
    Ok(Opts {
        rampart,
        out: get("--out").map_or_else(|| PathBuf::from("perf/runs"), PathBuf::from),
        pairs: num("--pairs", 500)?,
        alerts: num("--alerts", default_alerts)?,
        secs: num("--secs", 30)? as u64,
        storm_alerts: num("--storm-alerts", 10_000)?,
        storm_receivers: 100,
        signed: args.iter().any(|a| a == "--signed"),
        probe_every: Duration::from_millis(200),
        ingest_messages: 1_000_000,
        command: args.join(" "),
        streams: num("--streams", 1_000)?,
        shards: num("--shards", 1)?.max(1),
        fronts: get("--fronts")
            .map(|v| v.parse::<usize>().map_err(|_| "--fronts takes a number".to_owned()))
            .transpose()?,
        load_threads: num("--load-threads", 2)?.max(1),
        rampart_cpus: get("--rampart-cpus"),
        backend,
        scenario,
    })
}

fn main() {
    // `curve DIR`: a scale run's result files as one table (perf/scripts/scale.sh).
    let args: Vec<String> = std::env::args().collect();
    if let (Some("curve"), Some(dir)) = (args.get(1).map(String::as_str), args.get(2)) {
        let table = rampart_bench::curve::table(std::path::Path::new(dir));
        print!("{table}");
        if let Err(e) = std::fs::write(std::path::Path::new(dir).join("curve.md"), &table) {
            eprintln!("rampart-harness: writing {dir}/curve.md: {e}");
            std::process::exit(1);
        }
        return;
    }
    let o = match opts() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    match scenarios::run(&o) {
        Ok(r) => {
            let ok = r["correctness"]["ok"].as_bool().unwrap_or(true);
            if !ok {
                eprintln!("rampart-harness: the correctness checks failed: {}", r["correctness"]);
                std::process::exit(1);
            }
        }
        Err(e) => {
            eprintln!("rampart-harness: {e}");
            std::process::exit(1);
        }
    }
}
