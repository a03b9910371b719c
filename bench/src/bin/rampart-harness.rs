//! `rampart-harness`: the latency benchmark harness (see `rampart_bench::scenarios`). It
//! starts `rampart sim-venue` and `rampart serve --feed live` pointed at it, webhook receivers and
//! a load of alerts, runs one scenario and writes `perf/runs/<date>-<scenario>.{json,md}`.
//!
//! Usage: `rampart-harness curve DIR` (a `perf/scripts/scale.sh` run's figures as one table, also
//! written to `DIR/curve.md`), or `rampart-harness quiet|burst|storm|http|writes|ingest|streams|soak|liquidations [--rampart PATH] [--out DIR]
//! [--pairs N] [--alerts N] [--secs S] [--storm-alerts N] [--signed] [--backend sqlite|postgres|cluster|roles]
//! [--shards N] [--fronts N] [--load-threads N] [--rampart-cpus LIST]` (rampart's shards, 1 unless
//! told; its front threads, its own default unless told; the HTTP load generator's threads, 2
//! unless told; the CPUs rampart, and the http baseline's threads, run on: `taskset -c LIST`)
//! (`--signed`: storm with the account's webhooks signed, each signature verified after the run)
//! (`--backend` as `scenarios::Opts::backend` says; `--rampart` defaults to the
//! `rampart` binary beside this one: build both with `cargo build --release -p rampart -p
//! rampart-bench`). `--help` prints the usage; an unknown flag is refused with it (exit 2), never
//! ignored.

use std::path::PathBuf;
use std::time::Duration;

use rampart_bench::scenarios::{self, Opts, BACKENDS, SCENARIOS};

/// The flags that take a value.
const VALUED: [&str; 15] = [
    "--rampart",
    "--perp-alerts",
    "--rounds",
    "--out",
    "--pairs",
    "--alerts",
    "--secs",
    "--storm-alerts",
    "--streams",
    "--shards",
    "--fronts",
    "--load-threads",
    "--rampart-cpus",
    "--backend",
    "--deliver-workers",
];

/// The flags that take none.
const SWITCHES: [&str; 1] = ["--signed"];

fn usage() -> String {
    format!(
        "usage: rampart-harness {} [--rampart PATH] [--out DIR] [--pairs N] [--alerts N] [--secs S] [--storm-alerts N] [--rounds N] [--perp-alerts N] [--signed] [--streams N] [--shards N] [--fronts N] [--load-threads N] [--rampart-cpus LIST] [--backend {}] [--deliver-workers N]\n       rampart-harness curve DIR",
        SCENARIOS.join("|"),
        BACKENDS.join("|")
    )
}

/// Every argument after the scenario is a known flag (with its value when it takes one): a
/// misspelt or unknown flag is refused rather than ignored, so a run measures what was asked.
fn known_flags(args: &[String]) -> Result<(), String> {
    let mut rest = args.iter().skip(2);
    while let Some(a) = rest.next() {
        if VALUED.contains(&a.as_str()) {
            rest.next().ok_or_else(|| format!("{a} takes a value\n{}", usage()))?;
        } else if !SWITCHES.contains(&a.as_str()) {
            return Err(format!("unknown argument '{a}'\n{}", usage()));
        }
    }
    Ok(())
}

fn opts() -> Result<Opts, String> {
    let args: Vec<String> = std::env::args().collect();
    let get = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let num =
        |name: &str, d: usize| get(name).map_or(Ok(d), |v| v.parse().map_err(|_| format!("{name} takes a number")));
    let scenario = args.get(1).cloned().unwrap_or_default();
    if !SCENARIOS.contains(&scenario.as_str()) {
        return Err(usage());
    }
    known_flags(&args)?;
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
        // `liquidations`: `*` alerts per venue, each collecting every pair's liquidations.
        storm_alerts: num("--storm-alerts", if scenario == "liquidations" { 100 } else { 10_000 })?,
        storm_receivers: 100,
        // `liquidations`: injection rounds, `ROUND_GAP` apart.
        liq_rounds: num("--rounds", 3)?.max(1),
        perp_alerts: num("--perp-alerts", 0)?,
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
        deliver_workers: num("--deliver-workers", 2)?.clamp(1, 64),
        scenario,
    })
}

fn main() {
    // `curve DIR`: a scale run's result files as one table (perf/scripts/scale.sh).
    let args: Vec<String> = std::env::args().collect();
    if args.iter().skip(1).any(|a| a == "--help" || a == "-h") {
        println!("{}", usage());
        return;
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    /// Known flags pass with their values; an unknown or misspelt flag, a stray word and a flag
    /// missing its value are refused, each naming the problem and the usage.
    #[test]
    fn unknown_flags_are_refused_not_ignored() {
        let ok = "rampart-harness storm --backend roles --out d --signed --secs 3 --rampart-cpus 0,1";
        assert_eq!(known_flags(&args(ok)), Ok(()));
        for (line, said) in [
            ("rampart-harness storm --backendd roles", "unknown argument '--backendd'"),
            ("rampart-harness storm roles", "unknown argument 'roles'"),
            ("rampart-harness storm --signed --out", "--out takes a value"),
        ] {
            let e = known_flags(&args(line)).expect_err(line);
            assert!(e.starts_with(said) && e.contains("usage: rampart-harness"), "{line}: {e}");
        }
    }
}
