//! A throwaway PostgreSQL server for tests: Debian's server binaries (`/usr/lib/postgresql/<v>/bin`)
//! run `initdb` into a fresh temporary directory and start on a free loopback port, once per
//! test process; the server stops and its directory is removed when that process exits (a shell
//! beside it waits for the end of a pipe the test process holds).
//!
//! Started as root (CI), the server runs as the `postgres` user the Debian package creates,
//! since PostgreSQL refuses to run as root. Durability is off (`fsync = off`): these servers
//! hold test data only ([`durable_server`] keeps it on, for benchmarks).

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::{Mutex, OnceLock};

use crate::daemon::{free_port, fresh_dir, start_watched, wait_until};

/// A running test server.
pub struct PgServer {
    port: u16,
    /// The watcher shell: its stdin is the pipe whose end stops the server.
    _watcher: Mutex<Child>,
}

static SERVER: OnceLock<PgServer> = OnceLock::new();
static DURABLE: OnceLock<PgServer> = OnceLock::new();
static NEXT_SCHEMA: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// The test process's server, started at the first call.
///
/// # Panics
/// When the server cannot be started, with what to install: a test that needs PostgreSQL fails
/// rather than passing without it.
pub fn server() -> &'static PgServer {
    SERVER.get_or_init(|| start(false).unwrap_or_else(|e| panic!("cannot start a test PostgreSQL server: {e}")))
}

/// A second server of the process, with PostgreSQL's default durability (`fsync` on, so a
/// commit waits for the disk): for benchmarks compared with SQLite's `synchronous = FULL`.
///
/// # Panics
/// As [`server`].
pub fn durable_server() -> &'static PgServer {
    DURABLE.get_or_init(|| start(true).unwrap_or_else(|e| panic!("cannot start a test PostgreSQL server: {e}")))
}

impl PgServer {
    /// The loopback port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A connection string for database `postgres` as the superuser, with `search_path` set to
    /// `schema` (so tests sharing the server do not see each other's tables).
    pub fn url_in_schema(&self, schema: &str) -> String {
        format!("host=127.0.0.1 port={} user=postgres dbname=postgres options='-c search_path={schema}'", self.port)
    }

    /// The superuser's connection string (default `search_path`).
    pub fn admin_url(&self) -> String {
        format!("host=127.0.0.1 port={} user=postgres dbname=postgres", self.port)
    }

    /// A schema name not used before by this process (`t<pid>_<n>`); the caller creates it.
    pub fn fresh_schema_name(&self) -> String {
        let n = NEXT_SCHEMA.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("t{}_{n}", std::process::id())
    }
}

/// The newest installed server's binary directory.
pub fn bin_dir() -> Result<PathBuf, String> {
    let root = Path::new("/usr/lib/postgresql");
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir(root)
        .map_err(|e| format!("{}: {e} (install Debian's package postgresql; .ci/run does)", root.display()))?
        .filter_map(Result::ok)
        .filter_map(|d| Some((d.file_name().to_str()?.parse().ok()?, d.path().join("bin"))))
        .filter(|(_, bin)| bin.join("postgres").is_file())
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin).ok_or_else(|| "no PostgreSQL server under /usr/lib/postgresql".into())
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

/// `program args` as the server's user: the `postgres` user when this process is root.
fn as_server_user(program: &Path) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

/// Server settings added to the command line from `RAMPART_PG_EXTRA` (for instance
/// `-c log_min_duration_statement=1 -c logging_collector=on -c log_directory=/tmp/pglog`, to see
/// where a benchmark's statements spend their time); empty when unset.
fn extra_settings() -> String {
    std::env::var("RAMPART_PG_EXTRA").map(|s| format!(" {s}")).unwrap_or_default()
}

fn start(durable: bool) -> Result<PgServer, String> {
    let bin = bin_dir()?;
    let dir = fresh_dir("rampart-pg")?;
    if is_root() {
        let ok = Command::new("chown").arg("postgres:postgres").arg(&dir).status().is_ok_and(|s| s.success());
        if !ok {
            return Err("chown to the postgres user failed (is Debian's postgresql package installed?)".into());
        }
    }
    let data = dir.join("data");
    let out = as_server_user(&bin.join("initdb"))
        .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "-D"])
        .arg(&data)
        .output()
        .map_err(|e| format!("initdb: {e}"))?;
    if !out.status.success() {
        return Err(format!("initdb failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let port = free_port()?;
    let fast = if durable { "" } else { " -c fsync=off -c full_page_writes=off" };
    let postgres = format!(
        "{} -D {} -p {port} -k {} -c listen_addresses=127.0.0.1 -c max_connections=200{fast}{}",
        bin.join("postgres").display(),
        data.display(),
        dir.display(),
        extra_settings()
    );
    let watcher = start_watched(as_server_user(Path::new("/bin/sh")), &postgres, &dir)?;
    let port_arg = port.to_string();
    wait_until(&dir, || {
        Command::new(bin.join("pg_isready"))
            .args(["-q", "-h", "127.0.0.1", "-p", &port_arg, "-U", "postgres"])
            .status()
            .is_ok_and(|s| s.success())
    })?;
    Ok(PgServer { port, _watcher: Mutex::new(watcher) })
}
