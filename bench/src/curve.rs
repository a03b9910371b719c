//! `rampart-harness curve DIR`: the figures of a `perf/scripts/scale.sh` run as curves, one row per
//! core count. DIR holds one folder per count (`1/`, `2/`, `4/`, `8/`), each with the result files
//! of its `http`, `storm`, `streams` and `quiet` runs; the table says, for each count, what rampart
//! did and what the axum baseline of as many threads did in the same run. Reads files only: it runs
//! where the scale run ran (no toolchain needed) or here on the files fetched back.

use std::path::Path;

use serde_json::Value;

/// The newest result file of `scenario` in `dir` (names start with the run's time, so the last
/// in name order), parsed.
fn newest(dir: &Path, scenario: &str) -> Option<Value> {
    let suffix = format!("-{scenario}.json");
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(&suffix)))
        .collect();
    names.sort();
    let text = std::fs::read_to_string(names.last()?).ok()?;
    serde_json::from_str(&text).ok()
}

/// `v` as a whole number, or `-`.
fn int(v: &Value) -> String {
    v.as_f64().map_or_else(|| "-".to_owned(), |x| format!("{x:.0}"))
}

/// `v` (microseconds) in milliseconds, or `-`.
fn ms(v: &Value) -> String {
    v.as_f64().map_or_else(|| "-".to_owned(), |x| format!("{:.1}", x / 1000.0))
}

/// One row of the http figures of a path: rampart's requests per second, the baseline's of as
/// many threads as rampart's fronts, and their ratio.
fn http_cells(http: &Value, path_start: &str) -> [String; 3] {
    let row = http["http"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["path"].as_str().is_some_and(|p| p.starts_with(path_start))));
    let Some(r) = row else { return ["-".into(), "-".into(), "-".into()] };
    let ratio = r["ratioSameThreads"].as_f64().or_else(|| r["ratio"].as_f64()).unwrap_or(0.0);
    let same = r["rampart"]["reqPerS"].as_f64().unwrap_or(0.0) / ratio.max(1e-9);
    [int(&r["rampart"]["reqPerS"]), format!("{same:.0}"), format!("{ratio:.2}")]
}

/// The curve table of the scale run under `dir`, as markdown.
pub fn table(dir: &Path) -> String {
    let mut counts: Vec<(usize, std::path::PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path())))
        .collect();
    counts.sort();
    let mut s = String::from(
        "| cores | levels/BTCUSDT req/s | axum, same threads | ratio | bulk levels req/s | axum | ratio | storm deliveries/s | storm tick → webhook p99 ms | streams connected | handshake p99 ms | settled price p99 ms | quiet tick → webhook p99 ms | quiet tick → decision p99 µs |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for (n, d) in counts {
        let http = newest(&d, "http").unwrap_or(Value::Null);
        let storm = newest(&d, "storm").unwrap_or(Value::Null);
        let streams = newest(&d, "streams").unwrap_or(Value::Null);
        let quiet = newest(&d, "quiet").unwrap_or(Value::Null);
        let one = http_cells(&http, "/v1/levels/");
        let bulk = http_cells(&http, "/v1/levels?");
        let st = &streams["streams"];
        s.push_str(&format!(
            "| {n} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            one[0],
            one[1],
            one[2],
            bulk[0],
            bulk[1],
            bulk[2],
            int(&storm["deliveriesPerS"]),
            ms(&storm["tickToWebhookUs"]["p99"]),
            int(&st["connected"]),
            ms(&st["handshakeUs"]["p99"]),
            ms(&st["priceTradeToClientSettledUs"]["p99"]),
            ms(&quiet["tickToWebhookUs"]["p99"]),
            int(&quiet["tickToDecisionUs"]["p99"]),
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scale_folder_becomes_one_row_per_core_count() {
        let dir = std::env::temp_dir().join(format!("rampart-curve-{}", std::process::id()));
        let one = dir.join("2");
        std::fs::create_dir_all(&one).expect("dir");
        let http = serde_json::json!({"http": [
            {"path": "/v1/levels/BTCUSDT?exchange=binance", "rampart": {"reqPerS": 120.0}, "ratioSameThreads": 1.2},
            {"path": "/v1/levels?exchange=binance", "rampart": {"reqPerS": 10.0}, "ratio": 0.5},
        ]});
        std::fs::write(one.join("2026-11-27T1000-http.json"), http.to_string()).expect("write");
        std::fs::write(
            one.join("2026-11-27T1001-storm.json"),
            r#"{"deliveriesPerS": 20000.4, "tickToWebhookUs": {"p99": 250000}}"#,
        )
        .expect("write");
        let t = table(&dir);
        let row = t.lines().nth(2).expect("a row");
        assert_eq!(row, "| 2 | 120 | 100 | 1.20 | 10 | 20 | 0.50 | 20000 | 250.0 | - | - | - | - | - |");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
