//! The Markdown table of medians over several [`parsers`](super::parsers) runs.

use super::measure::ParserRow;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The Markdown table of medians over `runs` (each the rows of one [`parsers`] call, in the same
/// order): per frame and parser, the median p50, p99 and p99.9, allocations per frame, and the
/// median p50 against the engine's on the same frame.
///
/// [`parsers`]: super::parsers
pub fn parsers_table(runs: &[Vec<ParserRow>]) -> String {
    let Some(first) = runs.first() else {
        return String::new();
    };
    let mut s = String::from(
        "| venue | frame | source | bytes | parser | p50 ns | p99 ns | p99.9 ns | allocs/frame | p50 / engine p50 |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
    );
    let med = |i: usize, f: &dyn Fn(&ParserRow) -> f64| median(runs.iter().filter_map(|r| r.get(i)).map(f).collect());
    let mut engine_p50 = None;
    for (i, row) in first.iter().enumerate() {
        let p50 = med(i, &|r| r.summary.p50_ns as f64);
        if row.parser.starts_with("engine") {
            engine_p50 = Some(p50);
        } else if i > 0 && first[i - 1].source != row.source {
            engine_p50 = None;
        }
        let allocs = row.allocs_per_frame.map_or_else(
            || "-".to_owned(),
            |_| {
                let a = med(i, &|r| r.allocs_per_frame.unwrap_or(0.0));
                if a.fract() == 0.0 {
                    format!("{a:.0}")
                } else {
                    format!("{a:.2}")
                }
            },
        );
        let ratio = engine_p50.filter(|e| *e > 0.0).map_or_else(|| "-".to_owned(), |e| format!("{:.2}", p50 / e));
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {:.0} | {:.0} | {:.0} | {} | {} |\n",
            row.venue.as_str(),
            row.kind.as_str(),
            row.source,
            row.bytes,
            row.parser,
            p50,
            med(i, &|r| r.summary.p99_ns as f64),
            med(i, &|r| r.summary.p999_ns as f64),
            allocs,
            ratio
        ));
    }
    s
}
