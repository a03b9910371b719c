//! Logging: `tracing` on stderr, as text or JSON lines, with `log` records (glommio's) taken in
//! and glommio's stall reports cut to one line.

use anyhow::{bail, Result};

/// Logs go to stderr through `tracing`: one line per event with its time (UTC), level and
/// target, filtered by `RUST_LOG` (default `info`), as text or as JSON objects
/// (`--log-format json`). Events of crates that log through `log` (glommio's stall detector)
/// are taken in too.
pub(crate) fn init_logging(format: Option<&str>) -> Result<()> {
    let (filter, bad) = match tracing_subscriber::EnvFilter::try_from_default_env() {
        Ok(f) => (f, None),
        Err(e) => (tracing_subscriber::EnvFilter::new("info"), std::env::var("RUST_LOG").ok().map(|v| (v, e))),
    };
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(false);
    // `set_default`-style install without tracing-subscriber's own `log` bridge: ours is below.
    let installed = match format.unwrap_or("text") {
        "text" => tracing::subscriber::set_global_default(builder.finish()),
        "json" => tracing::subscriber::set_global_default(builder.json().finish()),
        other => bail!("invalid --log-format '{other}'. Allowed: text, json"),
    };
    installed.map_err(|e| anyhow::anyhow!("logging: {e}"))?;
    log::set_boxed_logger(Box::new(LogBridge(tracing_log::LogTracer::new())))
        .map_err(|e| anyhow::anyhow!("logging: {e}"))?;
    log::set_max_level(log::LevelFilter::Trace);
    if let Some((value, e)) = bad.filter(|(v, _)| !v.is_empty()) {
        tracing::warn!("RUST_LOG={value:?} is not a valid filter ({e}); logging at info");
    }
    Ok(())
}

/// Forwards `log` records to `tracing`, with one change: glommio's stall reports (a task queue
/// of a shard that ran past its budget) lose their multi-line backtrace, so each stall is one
/// warning line (`[stall-detector -- executor N] task queue Q went over-budget: ...`).
struct LogBridge(tracing_log::LogTracer);

/// Where glommio's stall report turns into its backtrace.
const STALL_BACKTRACE_MARK: &str = ". Backtrace:";

impl log::Log for LogBridge {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        self.0.enabled(metadata)
    }

    fn log(&self, record: &log::Record<'_>) {
        if !record.target().starts_with("glommio::executor::stall") {
            return self.0.log(record);
        }
        let head = stall_summary(record.args());
        self.0.log(&log::Record::builder().args(format_args!("{head}")).metadata(record.metadata().clone()).build());
    }

    fn flush(&self) {
        self.0.flush();
    }
}

/// A stall report up to its backtrace. The formatting is stopped there (the writer refuses more),
/// so the backtrace's symbols are never resolved just to be dropped.
fn stall_summary(args: &std::fmt::Arguments<'_>) -> String {
    struct UpToTrace(String);
    impl std::fmt::Write for UpToTrace {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0.push_str(s);
            match self.0.contains(STALL_BACKTRACE_MARK) {
                true => Err(std::fmt::Error),
                false => Ok(()),
            }
        }
    }
    let mut w = UpToTrace(String::with_capacity(160));
    // An error here is the writer stopping at the backtrace, as intended.
    let _ = std::fmt::write(&mut w, *args);
    let mut s = w.0;
    if let Some(i) = s.find(STALL_BACKTRACE_MARK) {
        s.truncate(i);
    }
    s
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    /// Stands for glommio's backtrace: formatting it fails the test.
    struct Trace;

    impl std::fmt::Debug for Trace {
        fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            panic!("the backtrace was formatted")
        }
    }

    #[test]
    fn a_stall_report_is_cut_before_its_backtrace_which_is_never_formatted() {
        let (over, budget) = (Duration::from_millis(25), Duration::from_millis(110));
        let line = super::stall_summary(&format_args!(
            "[stall-detector -- executor 1] task queue default went over-budget: {over:#?} (budget: {budget:#?}). Backtrace: {:#?}",
            Trace
        ));
        assert_eq!(line, "[stall-detector -- executor 1] task queue default went over-budget: 25ms (budget: 110ms)");
        assert_eq!(super::stall_summary(&format_args!("no trace here")), "no trace here");
    }
}
