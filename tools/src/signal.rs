//! The stop signals every long-running command waits for: SIGTERM or Ctrl-C.

use anyhow::Result;

/// Blocks until SIGTERM or Ctrl-C.
pub(crate) fn wait_for_stop_signal() -> Result<()> {
    tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(stop_signal())
}

/// Until SIGTERM or Ctrl-C.
pub(crate) async fn stop_signal() -> Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    Ok(())
}
