//! A throwaway NATS server with JetStream for tests: Debian's `nats-server` started on a free
//! loopback port with its JetStream store in a fresh temporary directory, once per test
//! process, stopped and removed when that process exits (`daemon`).

use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::{Mutex, OnceLock};

use crate::daemon::{free_port, fresh_dir, start_watched, wait_until};

/// A running test server.
pub struct NatsServer {
    port: u16,
    _watcher: Mutex<Child>,
}

static SERVER: OnceLock<NatsServer> = OnceLock::new();

/// The test process's server, started at the first call.
///
/// # Panics
/// When it cannot be started, with what to install: a test that needs NATS fails rather than
/// passing without it.
pub fn server() -> &'static NatsServer {
    SERVER.get_or_init(|| start().unwrap_or_else(|e| panic!("cannot start a test NATS server: {e}")))
}

impl NatsServer {
    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }
}

/// The `nats-server` binary: on `PATH`, or where Debian's package puts it.
fn binary() -> Result<PathBuf, String> {
    let on_path =
        Command::new("sh").args(["-c", "command -v nats-server"]).output().ok().filter(|o| o.status.success());
    if let Some(o) = on_path {
        return Ok(PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    }
    let debian = PathBuf::from("/usr/bin/nats-server");
    if debian.is_file() {
        return Ok(debian);
    }
    Err("nats-server not found (install Debian's package nats-server; tools/nats-deps.sh does)".into())
}

/// A server of the caller's own on `port` (a free one when `None`), stopped when dropped (for
/// tests that take NATS away and bring it back on the same port; its store starts empty).
///
/// # Errors
/// When it cannot be started.
pub fn start_owned(port: Option<u16>) -> Result<NatsServer, String> {
    start_on(match port {
        Some(p) => p,
        None => free_port()?,
    })
}

fn start() -> Result<NatsServer, String> {
    start_on(free_port()?)
}

fn start_on(port: u16) -> Result<NatsServer, String> {
    let bin = binary()?;
    let dir = fresh_dir("rampart-nats")?;
    let command = format!("{} -js -a 127.0.0.1 -p {port} -sd {}", bin.display(), dir.join("js").display());
    let watcher = start_watched(Command::new("/bin/sh"), &command, &dir)?;
    wait_until(&dir, || std::fs::read_to_string(dir.join("log")).is_ok_and(|log| log.contains("Server is ready")))?;
    Ok(NatsServer { port, _watcher: Mutex::new(watcher) })
}
