//! A server process a test starts and never has to stop: a shell beside it starts the command,
//! waits for the end of a pipe the test process holds, then interrupts the server and removes
//! its directory. The pipe ends when the test process exits, however it exits, so no server
//! outlives the tests that use it.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `command_line` (its output to `dir/log`) under `shell` (`/bin/sh`, or a wrapper that
/// runs it as another user); `dir` is removed when the server has stopped.
pub(crate) fn start_watched(mut shell: Command, command_line: &str, dir: &Path) -> Result<Child, String> {
    let script = format!(
        "{command_line} >{log} 2>&1 & pid=$!; cat >/dev/null; kill -INT $pid; wait $pid; rm -rf {dir}",
        log = dir.join("log").display(),
        dir = dir.display()
    );
    shell.args(["-c", &script]).stdin(Stdio::piped()).spawn().map_err(|e| format!("starting the server: {e}"))
}

/// Waits up to 30 s for `ready`; the server's log in the error otherwise.
pub(crate) fn wait_until(dir: &Path, mut ready: impl FnMut() -> bool) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ready() {
        if Instant::now() > deadline {
            let log = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
            return Err(format!("not ready after 30 s; its log:\n{log}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// A loopback port free now (the server binds it right after; a race another process could
/// win, which fails that server's start loudly).
pub(crate) fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

/// A fresh directory under the temp dir, named `prefix-<pid>-<nanos>`.
pub(crate) fn fresh_dir(prefix: &str) -> Result<std::path::PathBuf, String> {
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!("{prefix}-{}-{stamp}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(dir)
}
