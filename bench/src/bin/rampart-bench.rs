//! `rampart-bench`: runs a benchmark in full and prints a Markdown report for `perf/`.
//!
//! Usage: `rampart-bench tick|ingest|perp|perp-memory|hop|levels|walls|metrics|alerts|delivery|storage|firings|firings-storm|records|pruning|decode|parsers|book-baseline [--runs N]`.
//!
//! The binary counts allocations (`rampart_testkit::alloc::Counting` is its global allocator) so
//! the `parsers` benchmark can report allocations per frame.

use rampart_bench::{
    alert_decision, binance_decode, delivery, front_hop, levels_consumption_check, levels_recompute, parsers,
    parsers_table, tick_apply, wall_scan, Backend, Summary,
};

#[global_allocator]
static GLOBAL: rampart_testkit::alloc::Counting = rampart_testkit::alloc::Counting;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let which = args.get(1).map(String::as_str).unwrap_or("");
    let runs: usize =
        args.iter().position(|a| a == "--runs").and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(3);
    if which == "parsers" {
        parsers_main(runs);
        return;
    }
    if which == "perp-memory" {
        // Issue #61: the memory of the perpetuals of about 2 000 pairs against §17's bound; one
        // run per process (a second in the same process would reuse the first one's pages).
        println!("| contracts | RSS added | per pair | per pair from the types' sizes | 2 000 pairs |");
        println!("|---|---|---|---|---|");
        println!("{}", rampart_bench::perp_memory::perp_memory(750));
        return;
    }
    if which == "book-baseline" {
        book_baseline_main(runs);
        return;
    }
    let mut rows = Vec::new();
    for run in 1..=runs {
        let summaries = match which {
            "tick" => vec![tick_apply(500, 20_000)],
            "ingest" => vec![rampart_bench::ingest::live_ingest(500, 1_000_000, 100_000)],
            // Issue #48: the same with 100 000 level alerts held, then with 1 000 `*` alerts more,
            // against the first line.
            "ingest-levels" => vec![
                rampart_bench::ingest::live_ingest(500, 1_000_000, 100_000),
                rampart_bench::ingest::live_ingest_with_levels(500, 1_000_000, 100_000, 100_000, 0),
                rampart_bench::ingest::live_ingest_with_levels(500, 1_000_000, 100_000, 100_000, 1_000),
            ],
            // Issue #61: the shard's simulated round, spot only, with the perpetuals, and with
            // 100 000 derivatives alerts held (1 000 of them `*`), in one run.
            "perp" => {
                use rampart_bench::perp_round::{perp_round, Perps};
                vec![
                    perp_round(500, 20, Perps::Off),
                    perp_round(500, 20, Perps::On),
                    perp_round(500, 20, Perps::WithAlerts(100_000)),
                ]
            }
            "hop" => front_hop(500, 1, 20_000),
            "levels" => vec![levels_recompute(500, 3), levels_consumption_check(1_000_000)],
            "walls" => vec![wall_scan(500, 20)],
            // Metrics refresh per book, and the wall scan of the same books as its baseline.
            "metrics" => rampart_bench::metrics_refresh(500, 20),
            // SQLite (the baseline) and PostgreSQL, in the same run.
            "delivery" => vec![delivery(Backend::Sqlite, 20_000, 50), delivery(Backend::Postgres, 20_000, 50)],
            // The baseline (one commit per create) and group commit, on each backend, in the same run.
            "storage" => [Backend::Sqlite, Backend::Postgres]
                .into_iter()
                .flat_map(|b| {
                    [
                        rampart_bench::storage_creates(b, 64, 2_000, 1),
                        rampart_bench::storage_creates(b, 64, 2_000, rampart_store::storage::GROUP_JOBS_MAX),
                    ]
                })
                .collect(),
            // Issue #59: firings per second of the writer's commits, per batch size, per backend.
            "firings" => [Backend::Sqlite, Backend::Postgres]
                .into_iter()
                .flat_map(|b| [1, 16, 256, 4_096].map(|n| rampart_bench::firing_commits(b, n, 4_096)))
                .collect(),
            // Issue #59: a storm's commits on PostgreSQL, 4 096 firings each, three of them (with
            // `RAMPART_PG_EXTRA` logging the statements: where a commit's time goes).
            "firings-storm" => vec![rampart_bench::firing_commits(Backend::Postgres, 4_096, 12_288)],
            // Issue #59: a worker's record of 256 outcomes, all delivered (the baseline) and all
            // timed out, per backend, in one run.
            "records" => [Backend::Sqlite, Backend::Postgres]
                .into_iter()
                .flat_map(|b| {
                    use rampart_bench::records::{attempt_records, Came};
                    [Came::Delivered, Came::TimedOut].map(|c| attempt_records(b, 256, 4_096, c))
                })
                .collect(),
            // Issue #62: the writer's commits with and without retention pruning, in one run.
            "pruning" => [false, true, false, true]
                .into_iter()
                .map(|prune| rampart_bench::firing_commits_while_pruning(256, 20_480, 40_960, prune))
                .collect(),
            "decode" => binance_decode(2_000_000),
            "alerts" => vec![
                alert_decision(0, 0, 1_000_000),
                alert_decision(1_000, 1_000, 1_000_000),
                alert_decision(100_000, 100_000, 1_000_000),
                alert_decision(100_000, 1_000_000, 1_000_000),
            ],
            _ => {
                eprintln!(
                    "usage: rampart-bench tick|ingest|ingest-levels|perp|perp-memory|hop|levels|walls|metrics|alerts|delivery|storage|firings|firings-storm|records|pruning|decode|parsers|book-baseline [--runs N]"
                );
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

/// `rampart-bench parsers`: every run's rows, then the medians over the runs.
fn parsers_main(runs: usize) {
    let mut all = Vec::new();
    println!("{}", rampart_bench::parsers::simd_notes());
    println!();
    println!("| measure | samples | p50 ns | p99 ns | p99.9 ns | max ns | ops/s | allocs/frame |");
    println!("|---|---|---|---|---|---|---|---|");
    for run in 1..=runs.max(1) {
        let rows = match parsers(200_000) {
            Ok(rows) => rows,
            Err(e) => {
                eprintln!("parsers: {e}");
                std::process::exit(1);
            }
        };
        for r in &rows {
            let allocs = r.allocs_per_frame.map_or_else(|| "-".to_owned(), |a| format!("{a}"));
            eprintln!("run {run}: {} {allocs} |", r.summary.row());
            println!("{} {allocs} | (run {run})", r.summary.row());
        }
        all.push(rows);
    }
    println!();
    println!("Medians over {} runs:", all.len());
    println!();
    print!("{}", parsers_table(&all));
}

/// Messages per run of `rampart-bench book-baseline` (half depth diffs, half trades).
const BOOK_BASELINE_FRAMES: usize = 200_000;

/// `rampart-bench book-baseline`: the engine's decode + book path against serde_json and a
/// `BTreeMap` book on the same frames, every run and the totals in one table.
fn book_baseline_main(runs: usize) {
    let c = rampart_bench::book_baseline::compare(BOOK_BASELINE_FRAMES, runs);
    eprintln!(
        "book-baseline: engine p50 {} ns p99 {} ns, baseline p50 {} ns p99 {} ns, p50 ratio {:.2}",
        c.engine_p50_ns, c.engine_p99_ns, c.baseline_p50_ns, c.baseline_p99_ns, c.ratio_p50
    );
    print!("{}", c.table());
}
