//! [`wrk`]: runs the `wrk` tool for a second opinion and reads its report.

use std::io::{self, Read};
use std::process::{Command, Stdio};

/// What [`wrk`] read from the tool's report.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct WrkResult {
    /// `Requests/sec`.
    pub req_per_s: f64,
    /// Median latency, µs.
    pub p50_us: f64,
    /// 75th percentile, µs.
    pub p75_us: f64,
    /// 90th percentile, µs.
    pub p90_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
}

/// Most bytes of wrk's report kept; the rest is read and dropped.
const WRK_OUTPUT_BYTES_MAX: u64 = 1024 * 1024;

/// Runs `wrk -t THREADS -c CONNECTIONS -d SECSs --latency [-H HEADER] URL` and parses its report.
///
/// `connections` is at least 1, `threads` is 1 ..= `connections` (wrk refuses more threads than
/// connections), `secs` at least 1. Returns `None` when `wrk` is not on `PATH`, when it fails, or
/// when its report cannot be read. wrk is closed loop: its latencies are subject to coordinated
/// omission, unlike [`run`](super::run)'s open loop.
pub fn wrk(url: &str, header: Option<&str>, connections: usize, threads: usize, secs: u64) -> Option<WrkResult> {
    let connections = connections.max(1);
    let mut cmd = Command::new("wrk");
    cmd.arg("-t")
        .arg(threads.clamp(1, connections).to_string())
        .arg("-c")
        .arg(connections.to_string())
        .arg("-d")
        .arg(format!("{}s", secs.max(1)))
        .arg("--latency");
    if let Some(h) = header {
        cmd.arg("-H").arg(h);
    }
    cmd.arg(url).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null());
    // Not on PATH (or not runnable): `None`, as documented.
    let mut child = cmd.spawn().ok()?;
    let mut report = String::new();
    if let Some(mut out) = child.stdout.take() {
        let read = out.by_ref().take(WRK_OUTPUT_BYTES_MAX).read_to_string(&mut report);
        // Drain the rest so wrk never blocks on a full pipe.
        let _ = io::copy(&mut out, &mut io::sink());
        if read.is_err() {
            let _ = child.wait();
            return None;
        }
    }
    let status = child.wait().ok()?;
    if !status.success() {
        return None;
    }
    parse_wrk(&report)
}

/// Reads `Requests/sec` and the `Latency Distribution` block of a wrk report.
fn parse_wrk(report: &str) -> Option<WrkResult> {
    let mut req_per_s = None;
    let mut pct = [None; 4];
    let mut in_distribution = false;
    for line in report.lines().map(str::trim) {
        if let Some(v) = line.strip_prefix("Requests/sec:") {
            req_per_s = v.trim().parse::<f64>().ok();
        } else if line.starts_with("Latency Distribution") {
            in_distribution = true;
        } else if in_distribution {
            let mut parts = line.split_whitespace();
            let slot = match parts.next() {
                Some("50%") => 0,
                Some("75%") => 1,
                Some("90%") => 2,
                Some("99%") => 3,
                _ => {
                    in_distribution = false;
                    continue;
                }
            };
            pct[slot] = parts.next().and_then(wrk_time_us);
        }
    }
    Some(WrkResult { req_per_s: req_per_s?, p50_us: pct[0]?, p75_us: pct[1]?, p90_us: pct[2]?, p99_us: pct[3]? })
}

/// A wrk time (`812.00us`, `1.23ms`, `2.00s`, `1.50m`, `1.00h`) in µs.
fn wrk_time_us(s: &str) -> Option<f64> {
    let split = s.find(|c: char| c.is_ascii_alphabetic())?;
    let (number, unit) = s.split_at(split);
    let v: f64 = number.parse().ok()?;
    let scale = match unit {
        "us" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        "m" => 60e6,
        "h" => 3_600e6,
        _ => return None,
    };
    Some(v * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrk_report_is_read() {
        let report = "Running 1s test @ http://127.0.0.1:1/\n  1 threads and 2 connections\n\
            \x20 Thread Stats   Avg      Stdev     Max   +/- Stdev\n\
            \x20   Latency   180.00us   50.00us   1.20ms   90.00%\n\
            \x20 Latency Distribution\n\
            \x20    50%  162.00us\n     75%  190.00us\n     90%    1.02ms\n     99%    2.50s\n\
            \x20 123456 requests in 1.00s, 12.00MB read\n\
            Requests/sec: 123456.78\nTransfer/sec:     12.00MB\n";
        let r = parse_wrk(report).expect("parses");
        assert_eq!(
            r,
            WrkResult { req_per_s: 123_456.78, p50_us: 162.0, p75_us: 190.0, p90_us: 1_020.0, p99_us: 2_500_000.0 }
        );
        assert_eq!(wrk_time_us("1.50m"), Some(90e6));
        assert!(parse_wrk("Requests/sec: 1\n").is_none(), "no distribution");
    }
}
