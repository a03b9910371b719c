//! `rampart-bench`: runs a benchmark in full and prints a Markdown report for `perf/`.
//!
//! Usage: `rampart-bench tick [--runs N]` or `rampart-bench hop [--runs N]` `rampart-bench levels [--runs N]` or `rampart-bench walls [--runs N]`.

use rampart_bench::{
    alert_decision, binance_decode, delivery, front_hop, levels_consumption_check, levels_recompute, tick_apply,
    wall_scan, Summary,
};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let which = args.get(1).map(String::as_str).unwrap_or("");
    let runs: usize =
        args.iter().position(|a| a == "--runs").and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(3);
    let mut rows = Vec::new();
    for run in 1..=runs {
        let summaries = match which {
            "tick" => vec![tick_apply(500, 20_000)],
            "hop" => front_hop(500, 1, 20_000),
            "levels" => vec![levels_recompute(500, 3), levels_consumption_check(1_000_000)],
            "walls" => vec![wall_scan(500, 20)],
            "delivery" => vec![delivery(20_000, 50)],
            "decode" => binance_decode(2_000_000),
            "alerts" => vec![
                alert_decision(0, 0, 1_000_000),
                alert_decision(1_000, 1_000, 1_000_000),
                alert_decision(100_000, 100_000, 1_000_000),
                alert_decision(100_000, 1_000_000, 1_000_000),
            ],
            _ => {
                eprintln!("usage: rampart-bench tick|hop|levels|walls|alerts|delivery|decode [--runs N]");
                std::process::exit(2);
            }
        };
        for s in summaries {
            eprintln!("run {run}: {}", s.row());
            rows.push(format!("{} (run {run})", s.row()));
        }
    }
    println!("{}", Summary::header());
    for r in rows {
        println!("{r}");
    }
}
