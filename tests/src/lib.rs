//! Harness for the black-box tests: starts the real `rampart` binary on a fresh data directory,
//! waits until it is ready, and talks to it over loopback, with an HTTP client for well-formed
//! requests and raw TCP for malformed ones.
//!
//! Cargo only sets `CARGO_BIN_EXE_rampart-under-test` while compiling integration tests, so every entry
//! point that launches the binary takes its path as an argument and the test files pass
//! `env!("CARGO_BIN_EXE_rampart-under-test")`.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

pub mod netns;
pub mod resume;

/// Arguments that keep a test server small and quick to start: 60 simulated pairs, one shard.
pub const FAST: &[&str] = &["--sim-pairs", "60", "--shards", "1"];

/// How long the server may take to print its key and port.
pub const STARTUP_OUTPUT_TIMEOUT: Duration = Duration::from_secs(60);

/// How long the server may take, after printing its port, until `/healthz` answers 200.
pub const READY_TIMEOUT: Duration = Duration::from_secs(90);

/// How long a graceful shutdown (SIGTERM until exit) may take.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

/// How long one run of the keys CLI may take.
pub const CLI_TIMEOUT: Duration = Duration::from_secs(30);

/// Stderr lines kept (for tests that look for a line, and failure messages); older lines are
/// dropped.
const STDERR_LINES_MAX: usize = 2_000;
/// Stderr lines a failure message shows, the last ones.
const STDERR_LINES_SHOWN: usize = 400;

/// The venues in the order the API lists them.
pub const VENUES: [&str; 4] = ["binance", "bybit", "okx", "bitget"];

/// A directory for one server's data, removed on drop.
#[derive(Debug)]
pub struct DataDir {
    path: PathBuf,
}

impl DataDir {
    /// Creates a fresh, empty directory under the system temp directory.
    pub fn new() -> DataDir {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
        let name = format!("rampart-test-{}-{}-{nanos}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed));
        let path = std::env::temp_dir().join(name);
        std::fs::create_dir_all(&path).expect("create the temp data dir");
        DataDir { path }
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Default for DataDir {
    fn default() -> DataDir {
        DataDir::new()
    }
}

impl Drop for DataDir {
    fn drop(&mut self) {
        // Best effort: a leftover temp dir is not worth failing a test over.
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// One HTTP response: status, headers, and the body both as text and parsed as JSON.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The HTTP status code.
    pub status: u16,
    /// Every header, lower-cased name first, in the order received.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON, or `Value::Null` if it is not JSON.
    pub body: Value,
    /// The body as received.
    pub text: String,
}

impl Reply {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// Asserts that the response is labelled `application/json` and its body parses as JSON.
    pub fn assert_json(&self, what: &str) {
        let content_type = self.header("content-type").unwrap_or("");
        assert!(
            content_type.starts_with("application/json"),
            "{what}: Content-Type is {content_type:?}, want application/json; reply: {self:?}"
        );
        assert!(!self.body.is_null(), "{what}: body is not JSON: {:?}", self.text);
    }

    /// Asserts status `status`, a JSON content type, and the body exactly `{"error": message}`.
    pub fn assert_error(&self, status: u16, message: &str, what: &str) {
        assert_eq!(self.status, status, "{what}: status; reply: {self:?}");
        self.assert_json(what);
        assert_eq!(self.body, serde_json::json!({ "error": message }), "{what}: body");
    }

    /// Asserts status `status`, a JSON content type and a body `{"error": "<non-empty>"}`,
    /// and returns the message.
    pub fn assert_some_error(&self, status: u16, what: &str) -> String {
        assert_eq!(self.status, status, "{what}: status; reply: {self:?}");
        self.assert_json(what);
        let object = self.body.as_object().unwrap_or_else(|| panic!("{what}: body is not an object: {:?}", self.text));
        assert_eq!(object.len(), 1, "{what}: error body has other fields: {:?}", self.text);
        let message = object
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("{what}: no string field `error`: {:?}", self.text));
        assert!(!message.is_empty(), "{what}: empty error message");
        message.to_owned()
    }

    /// Asserts status 200 and a JSON body, and returns the body.
    pub fn ok(&self, what: &str) -> &Value {
        assert_eq!(self.status, 200, "{what}: status; reply: {self:?}");
        self.assert_json(what);
        &self.body
    }

    /// Parses `Retry-After` as whole seconds, panicking with context if absent or not a number.
    pub fn retry_after_s(&self, what: &str) -> u64 {
        let value =
            self.header("retry-after").unwrap_or_else(|| panic!("{what}: no Retry-After header; reply: {self:?}"));
        value.trim().parse().unwrap_or_else(|_| panic!("{what}: Retry-After {value:?} is not whole seconds"))
    }
}

/// One row of `rampart keys list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRow {
    /// The key's id, as `keys revoke` takes it.
    pub id: String,
    /// The label, `-` when none.
    pub label: String,
    /// The plan name.
    pub plan: String,
    /// Creation time, ISO 8601.
    pub created: String,
    /// Revocation time, ISO 8601, or `-`.
    pub revoked: String,
}

/// The header line of `rampart keys list`.
pub const KEYS_LIST_HEADER: &str = "id\tlabel\tplan\tcreated\trevoked";

/// A running `rampart serve` on an ephemeral loopback port with its own data directory.
///
/// Drop stops it (SIGTERM, then SIGKILL if it does not exit in time) and removes the directory.
pub struct Server {
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    /// The API key printed at first start (or, after [`Server::restart`], the one printed before).
    pub key: String,
    /// The data directory.
    pub data_dir: PathBuf,
    /// The process id.
    pub pid: u32,
    /// The first `/healthz` reply that was not 200 while waiting for readiness, if any was seen.
    pub startup_not_ready: Option<Reply>,
    bin: PathBuf,
    extra_args: Vec<String>,
    child: Mutex<Option<Child>>,
    dir: Option<DataDir>,
    stdout: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    agent: ureq::Agent,
}

/// What the stdout reader thread reports while the server starts.
enum Startup {
    Line(String),
    Closed,
}

impl Server {
    /// The simulated market's more volatile Binance USDT pairs (the 41st to the 55th listed),
    /// where 0.1 % moves from the 5-minute open happen within seconds: what tests that need an
    /// alert to fire soon create their alerts on.
    pub fn volatile_pairs(&self) -> Vec<String> {
        let symbols = self.get_authed("/v1/exchanges/binance/symbols");
        symbols.ok("symbols")["data"]
            .as_array()
            .expect("data")
            .iter()
            .filter(|s| s["quote"] == "USDT")
            .filter_map(|s| s["symbol"].as_str().map(str::to_owned))
            .skip(40)
            .take(15)
            .collect()
    }

    /// Starts `rampart serve --listen 127.0.0.1:0 --data-dir <fresh dir> <extra_args>` and waits
    /// until it has printed its API key and port and `/healthz` answers 200.
    pub fn start(bin: &str, extra_args: &[&str]) -> Server {
        Server::launch(PathBuf::from(bin), DataDir::new(), extra_args, None, None)
    }

    /// Like [`Server::start`] on `dir` (a directory the test prepared: a small filesystem
    /// mounted there, a restored backup in it).
    pub fn start_in(bin: &str, dir: DataDir, extra_args: &[&str]) -> Server {
        Server::launch(PathBuf::from(bin), dir, extra_args, None, None)
    }

    /// Like [`Server::start_in`] for a database that has its account already (a restored
    /// backup): the server prints no key; its clients use `key`.
    pub fn start_in_with_key(bin: &str, dir: DataDir, extra_args: &[&str], key: &str) -> Server {
        Server::launch(PathBuf::from(bin), dir, extra_args, Some(key.to_owned()), None)
    }

    /// Like [`Server::start`], with the server started by `sh -c '<shell>; exec ...'`, so a
    /// test can lower its limits first (`ulimit -n 1024`) without touching its own.
    pub fn start_under_shell(bin: &str, shell: &str, extra_args: &[&str]) -> Server {
        Server::launch(PathBuf::from(bin), DataDir::new(), extra_args, None, Some(shell))
    }

    /// The last lines the server printed on stderr (at most 2 000).
    pub fn stderr_tail(&self) -> Vec<String> {
        lock(&self.stderr).iter().cloned().collect()
    }

    /// Stops this server gracefully (asserting exit status 0) and starts it again on the same
    /// data directory with `extra_args`. The new server must not print a key; its `key` is the
    /// one printed at first start.
    pub fn restart(mut self, extra_args: &[&str]) -> Server {
        let status = self.terminate();
        assert_eq!(status.code(), Some(0), "exit status after SIGTERM: {status:?}\n{}", self.diagnostics());
        let dir = self.dir.take().expect("the server owns its data dir");
        let key = std::mem::take(&mut self.key);
        let bin = self.bin.clone();
        Server::launch(bin, dir, extra_args, Some(key), None)
    }

    /// Like [`Server::start`] for a server that prints no key (a cluster's market node, or a
    /// node on a database that already has an account), whose clients use `key`.
    pub fn start_with_key(bin: &str, extra_args: &[&str], key: &str) -> Server {
        let mut server = Server::start_waiting(bin, extra_args, key);
        server.wait_ready();
        server
    }

    /// Like [`Server::start_with_key`], returning once the port is printed, before `/healthz`
    /// answers 200 (a market node waiting as its partition's standby answers meanwhile);
    /// [`Server::wait_ready`] waits for the rest.
    pub fn start_waiting(bin: &str, extra_args: &[&str], key: &str) -> Server {
        Server::spawn(PathBuf::from(bin), DataDir::new(), extra_args, Some(key.to_owned()), None)
    }

    /// Kills this server with SIGKILL (no chance to clean up); [`Server::relaunch`] starts it
    /// again.
    pub fn kill(&self) {
        self.kill_hard();
    }

    /// Starts a killed (or exited) server again on the same data directory with the same
    /// arguments, and waits until it is ready.
    pub fn relaunch(mut self) -> Server {
        self.kill_hard();
        let dir = self.dir.take().expect("the server owns its data dir");
        let key = std::mem::take(&mut self.key);
        let (bin, args) = (self.bin.clone(), self.extra_args.clone());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Server::launch(bin, dir, &args, Some(key), None)
    }

    /// Kills this server with SIGKILL (no chance to clean up) and starts it again on the same
    /// data directory with `extra_args`.
    pub fn crash_and_restart(mut self, extra_args: &[&str]) -> Server {
        self.kill_hard();
        let dir = self.dir.take().expect("the server owns its data dir");
        let key = std::mem::take(&mut self.key);
        let bin = self.bin.clone();
        Server::launch(bin, dir, extra_args, Some(key), None)
    }

    fn launch(
        bin: PathBuf,
        dir: DataDir,
        extra_args: &[&str],
        known_key: Option<String>,
        shell: Option<&str>,
    ) -> Server {
        let mut server = Server::spawn(bin, dir, extra_args, known_key, shell);
        server.wait_ready();
        server
    }

    /// Starts the process and reads its key and port (not waiting for `/healthz`).
    fn spawn(
        bin: PathBuf,
        dir: DataDir,
        extra_args: &[&str],
        known_key: Option<String>,
        shell: Option<&str>,
    ) -> Server {
        let mut command = match shell {
            None => Command::new(&bin),
            Some(prefix) => {
                // `exec` keeps the pid: the server is the process the test signals.
                let mut c = Command::new("sh");
                c.arg("-c").arg(format!("{prefix}; exec \"$0\" \"$@\"")).arg(&bin);
                c
            }
        };
        command
            .arg("serve")
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--data-dir")
            .arg(dir.path())
            .args(extra_args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        scrub_env(&mut command);
        let mut child = command.spawn().unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
        let pid = child.id();

        let stdout_lines = Arc::new(Mutex::new(Vec::new()));
        let stderr_lines = Arc::new(Mutex::new(VecDeque::new()));
        let (tx, rx) = mpsc::channel();
        let out = child.stdout.take().expect("stdout is piped");
        let shared = Arc::clone(&stdout_lines);
        thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                lock(&shared).push(line.clone());
                // The receiver is gone once startup is over; later lines are only stored.
                let _ = tx.send(Startup::Line(line));
            }
            let _ = tx.send(Startup::Closed);
        });
        let err = child.stderr.take().expect("stderr is piped");
        let shared = Arc::clone(&stderr_lines);
        thread::spawn(move || {
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                let mut lines = lock(&shared);
                if lines.len() == STDERR_LINES_MAX {
                    lines.pop_front();
                }
                lines.push_back(line);
            }
        });

        let agent = ureq::AgentBuilder::new()
            .timeout_connect(Duration::from_secs(5))
            .timeout(Duration::from_secs(20))
            .max_idle_connections(0)
            .redirects(0)
            .build();
        let mut server = Server {
            port: 0,
            key: String::new(),
            data_dir: dir.path().to_owned(),
            pid,
            startup_not_ready: None,
            bin,
            extra_args: extra_args.iter().map(|s| (*s).to_owned()).collect(),
            child: Mutex::new(Some(child)),
            dir: Some(dir),
            stdout: stdout_lines,
            stderr: stderr_lines,
            agent,
        };

        let first_start = known_key.is_none();
        let mut printed_key = None;
        let deadline = Instant::now() + STARTUP_OUTPUT_TIMEOUT;
        while server.port == 0 || (first_start && printed_key.is_none()) {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(Startup::Line(line)) => {
                    if let Some(key) = line.strip_prefix("api key: ") {
                        printed_key = Some(key.trim().to_owned());
                    } else if let Some(addr) = line.strip_prefix("listening on ") {
                        server.port = parse_port(addr.trim()).unwrap_or_else(|| panic!("bad listening line {line:?}"));
                    }
                }
                Ok(Startup::Closed) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                    thread::sleep(Duration::from_millis(200));
                    panic!(
                        "server closed stdout before printing its key and port (status {:?})\n{}",
                        server.exit_status(),
                        server.diagnostics()
                    );
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    panic!("no key and port after {STARTUP_OUTPUT_TIMEOUT:?}\n{}", server.diagnostics())
                }
            }
        }
        server.key = match known_key {
            Some(key) => key,
            None => {
                let key = printed_key.expect("loop ends only with a key on first start");
                assert!(is_api_key(&key), "printed key {key:?} is not rk_ + 32 base62 characters");
                key
            }
        };
        server
    }

    /// Polls `/healthz` until it answers 200, remembering the first other reply.
    pub fn wait_ready(&mut self) {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if !self.alive() {
                panic!("server exited while starting (status {:?})\n{}", self.exit_status(), self.diagnostics());
            }
            let last = match self.try_request("GET", "/healthz", None, None) {
                Ok(reply) if reply.status == 200 => return,
                Ok(reply) => {
                    let last = format!("{reply:?}");
                    if self.startup_not_ready.is_none() {
                        self.startup_not_ready = Some(reply);
                    }
                    last
                }
                Err(e) => e,
            };
            if Instant::now() > deadline {
                panic!("/healthz not 200 after {READY_TIMEOUT:?}; last: {last}\n{}", self.diagnostics());
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// `http://127.0.0.1:PORT` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// `GET path`, with `Authorization: Bearer <key>` when `key` is given.
    pub fn get(&self, path: &str, key: Option<&str>) -> Reply {
        let auth = key.map(|k| format!("Bearer {k}"));
        self.request("GET", path, auth.as_deref(), None)
    }

    /// `GET path` with the server's own key.
    pub fn get_authed(&self, path: &str) -> Reply {
        self.get(path, Some(&self.key))
    }

    /// `GET path` with `authorization` as the literal `Authorization` header value, if given.
    pub fn get_with_authorization(&self, path: &str, authorization: Option<&str>) -> Reply {
        self.request("GET", path, authorization, None)
    }

    /// Sends one request on a fresh connection and returns the reply, panicking (with the
    /// server's output) if no HTTP reply arrives.
    pub fn request(&self, method: &str, path: &str, authorization: Option<&str>, body: Option<&str>) -> Reply {
        self.try_request(method, path, authorization, body)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}\n{}", self.diagnostics()))
    }

    /// Sends `method path` with the given headers (and a JSON body) and returns the reply.
    pub fn request_with(&self, method: &str, path: &str, headers: &[(&str, &str)], body: Option<&str>) -> Reply {
        let mut request = self.agent.request(method, &self.url(path));
        for (name, value) in headers {
            request = request.set(name, value);
        }
        let result = match body {
            Some(body) => request.set("Content-Type", "application/json").send_string(body),
            None => request.call(),
        };
        match result {
            Ok(response) | Err(ureq::Error::Status(_, response)) => reply_from(response),
            Err(ureq::Error::Transport(e)) => panic!("{method} {path}: transport error: {e}\n{}", self.diagnostics()),
        }
    }

    fn try_request(
        &self,
        method: &str,
        path: &str,
        authorization: Option<&str>,
        body: Option<&str>,
    ) -> Result<Reply, String> {
        let mut request = self.agent.request(method, &self.url(path));
        if let Some(value) = authorization {
            request = request.set("Authorization", value);
        }
        let result = match body {
            Some(body) => request.set("Content-Type", "application/json").send_string(body),
            None => request.call(),
        };
        match result {
            Ok(response) | Err(ureq::Error::Status(_, response)) => Ok(reply_from(response)),
            Err(ureq::Error::Transport(e)) => Err(format!("transport error: {e}")),
        }
    }

    /// Runs `rampart keys <args> --data-dir <this server's dir>` and returns its output.
    pub fn keys(&self, args: &[&str]) -> Output {
        let mut command = Command::new(&self.bin);
        command.arg("keys").args(args).arg("--data-dir").arg(&self.data_dir);
        run_with_timeout(command, CLI_TIMEOUT)
    }

    /// Runs `rampart site-alerts <args> --data-dir <this server's dir>` and returns its output.
    pub fn site_alerts(&self, args: &[&str]) -> Output {
        let mut command = Command::new(&self.bin);
        command.arg("site-alerts").args(args).arg("--data-dir").arg(&self.data_dir);
        run_with_timeout(command, CLI_TIMEOUT)
    }

    /// Creates a key with `keys create --plan <plan> [--label <label>]`, asserts success and the
    /// key format, and returns the key.
    pub fn create_key(&self, plan: &str, label: Option<&str>) -> String {
        let mut args = vec!["create", "--plan", plan];
        if let Some(label) = label {
            args.extend(["--label", label]);
        }
        let output = self.keys(&args);
        assert!(output.status.success(), "keys create --plan {plan}: {}", describe_output(&output));
        let stdout = String::from_utf8_lossy(&output.stdout);
        let key = stdout.lines().last().unwrap_or("").trim().to_owned();
        assert!(is_api_key(&key), "last stdout line of keys create is not a key: {}", describe_output(&output));
        self.await_key(&key);
        key
    }

    /// Waits until the server knows `key` (its key watcher picks a new key up within its poll
    /// period, 20 ms): until a request with it is answered anything but 401.
    pub fn await_key(&self, key: &str) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.get("/v1/exchanges", Some(key)).status == 401 {
            assert!(Instant::now() < deadline, "the server did not take key {key} within 5 s");
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Runs `keys list`, asserts success and the header line, and parses the rows.
    pub fn key_rows(&self) -> Vec<KeyRow> {
        let output = self.keys(&["list"]);
        assert!(output.status.success(), "keys list: {}", describe_output(&output));
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let mut lines = stdout.lines();
        assert_eq!(lines.next(), Some(KEYS_LIST_HEADER), "keys list header; stdout: {stdout:?}");
        lines
            .filter(|line| !line.is_empty())
            .map(|line| {
                let fields: Vec<&str> = line.split('\t').collect();
                assert_eq!(fields.len(), 5, "keys list row {line:?} has {} tab-separated fields, want 5", fields.len());
                KeyRow {
                    id: fields[0].to_owned(),
                    label: fields[1].to_owned(),
                    plan: fields[2].to_owned(),
                    created: fields[3].to_owned(),
                    revoked: fields[4].to_owned(),
                }
            })
            .collect()
    }

    /// Whether the process is still running.
    pub fn alive(&self) -> bool {
        let mut child = lock(&self.child);
        match child.as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// The exit status if the process has exited.
    pub fn exit_status(&self) -> Option<ExitStatus> {
        let mut child = lock(&self.child);
        child.as_mut().and_then(|c| c.try_wait().ok().flatten())
    }

    /// Sends SIGTERM (with the `kill` command) and waits for the exit, at most
    /// [`SHUTDOWN_TIMEOUT`]; past that it kills the process and panics.
    pub fn terminate(&self) -> ExitStatus {
        if let Some(status) = self.exit_status() {
            return status;
        }
        let sent = Command::new("kill").arg("-TERM").arg(self.pid.to_string()).status().expect("run kill -TERM");
        assert!(sent.success(), "kill -TERM {} failed: {sent:?}", self.pid);
        let deadline = Instant::now() + SHUTDOWN_TIMEOUT;
        loop {
            if let Some(status) = self.exit_status() {
                return status;
            }
            if Instant::now() > deadline {
                self.kill_hard();
                panic!("server did not exit within {SHUTDOWN_TIMEOUT:?} of SIGTERM\n{}", self.diagnostics());
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    fn kill_hard(&self) {
        let mut child = lock(&self.child);
        if let Some(child) = child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Everything the server printed on stdout so far.
    pub fn stdout_lines(&self) -> Vec<String> {
        lock(&self.stdout).clone()
    }

    /// The command line, stdout and the tail of stderr, for failure messages.
    pub fn diagnostics(&self) -> String {
        let stdout = lock(&self.stdout).join("\n");
        let kept = lock(&self.stderr);
        let stderr: Vec<String> = kept.iter().skip(kept.len().saturating_sub(STDERR_LINES_SHOWN)).cloned().collect();
        drop(kept);
        format!(
            "--- server: {} serve --data-dir {} {} (pid {}, port {})\n--- stdout:\n{stdout}\n--- stderr (last {} lines):\n{}",
            self.bin.display(),
            self.data_dir.display(),
            self.extra_args.join(" "),
            self.pid,
            self.port,
            stderr.len(),
            stderr.join("\n")
        )
    }

    /// Asserts that the process is alive and that an authenticated `GET /v1/exchanges` on a
    /// fresh connection gets 200 within 2 s.
    pub fn assert_serving(&self, after: &str) {
        assert!(self.alive(), "server died after {after} (status {:?})\n{}", self.exit_status(), self.diagnostics());
        let started = Instant::now();
        let reply = self
            .try_request("GET", "/v1/exchanges", Some(&format!("Bearer {}", self.key)), None)
            .unwrap_or_else(|e| panic!("after {after}: no reply to a normal request: {e}\n{}", self.diagnostics()));
        let elapsed = started.elapsed();
        assert_eq!(reply.status, 200, "after {after}: normal request answered {reply:?}");
        assert!(elapsed < Duration::from_secs(2), "after {after}: normal request took {elapsed:?}");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.alive() {
            let _ = Command::new("kill").arg("-TERM").arg(self.pid.to_string()).status();
            let deadline = Instant::now() + Duration::from_secs(10);
            while self.alive() && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(50));
            }
            self.kill_hard();
        }
    }
}

/// Locks `mutex`, ignoring poisoning (a panicking test thread must not hide the output).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Removes `RAMPART_*` variables so the developer's environment cannot change the server's
/// configuration.
fn scrub_env(command: &mut Command) {
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("RAMPART_") {
            command.env_remove(name);
        }
    }
    // Logs at their default level, whatever the caller's shell says.
    command.env_remove("RUST_LOG");
}

fn parse_port(addr: &str) -> Option<u16> {
    let (host, port) = addr.rsplit_once(':')?;
    if host != "127.0.0.1" {
        return None;
    }
    port.parse().ok().filter(|&p| p != 0)
}

fn reply_from(response: ureq::Response) -> Reply {
    let status = response.status();
    let headers = response
        .headers_names()
        .into_iter()
        .map(|name| {
            let value = response.header(&name).unwrap_or("").to_owned();
            (name.to_ascii_lowercase(), value)
        })
        .collect();
    let text = response.into_string().unwrap_or_else(|e| format!("<unreadable body: {e}>"));
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    Reply { status, headers, body, text }
}

/// Runs `command` with piped output; kills it and panics if it runs longer than `timeout`.
pub fn run_with_timeout(mut command: Command, timeout: Duration) -> Output {
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    scrub_env(&mut command);
    let child = command.spawn().unwrap_or_else(|e| panic!("spawn {command:?}: {e}"));
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(timeout) {
        Ok(output) => output.unwrap_or_else(|e| panic!("wait for {command:?}: {e}")),
        Err(_) => {
            let _ = Command::new("kill").arg("-KILL").arg(pid.to_string()).status();
            panic!("{command:?} did not finish within {timeout:?}");
        }
    }
}

/// Exit status, stdout and stderr of a finished command, for failure messages.
pub fn describe_output(output: &Output) -> String {
    format!(
        "status {:?}\n--- stdout:\n{}\n--- stderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Whether `s` is `rk_` followed by exactly 32 base62 characters.
pub fn is_api_key(s: &str) -> bool {
    s.strip_prefix("rk_").is_some_and(|rest| rest.len() == 32 && rest.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// Whether `s` starts with an ISO 8601 date and time, `YYYY-MM-DDTHH:MM:SS`, and is followed by
/// nothing, fractional seconds, or a zone (`Z` or `±HH:MM`).
pub fn is_iso8601(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 19 {
        return false;
    }
    let digits = |range: std::ops::Range<usize>| b[range].iter().all(u8::is_ascii_digit);
    let shape = digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19);
    shape && s[19..].bytes().all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'Z' | b'+' | b'-' | b':'))
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)).unwrap_or(0)
}

/// What came back on a raw TCP connection.
#[derive(Debug, Clone)]
pub struct RawOutcome {
    /// Everything read.
    pub bytes: Vec<u8>,
    /// Everything read, lossily decoded.
    pub text: String,
    /// Whether the server closed (or reset) the connection within the read window.
    pub closed: bool,
    /// The error that stopped writing the request, if any (the server may close early).
    pub write_error: Option<String>,
}

/// One response parsed from a raw TCP answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawResponse {
    /// The status code, or 0 when the bytes are not an HTTP/1.x status line.
    pub status: u16,
    /// The header block, status line included.
    pub head: String,
    /// The body: `Content-Length` bytes, or everything up to the close when there is none.
    pub body: String,
}

impl RawResponse {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.split("\r\n").skip(1).find_map(|line| {
            let (n, v) = line.split_once(':')?;
            n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

impl RawOutcome {
    /// The responses read, in order, delimited by their `Content-Length`.
    pub fn responses(&self) -> Vec<RawResponse> {
        let mut out = Vec::new();
        let mut rest: &[u8] = &self.bytes;
        while !rest.is_empty() {
            let Some(end) = rest.windows(4).position(|w| w == b"\r\n\r\n") else {
                // An incomplete head: report it as unparseable.
                out.push(RawResponse {
                    status: 0,
                    head: String::from_utf8_lossy(rest).into_owned(),
                    body: String::new(),
                });
                break;
            };
            let head = String::from_utf8_lossy(&rest[..end]).into_owned();
            let status = head
                .strip_prefix("HTTP/1.1 ")
                .or_else(|| head.strip_prefix("HTTP/1.0 "))
                .and_then(|r| r.get(..3))
                .and_then(|code| code.parse().ok())
                .unwrap_or(0);
            let body_start = end + 4;
            let available = rest.len() - body_start;
            let mut response = RawResponse { status, head, body: String::new() };
            let length = response.header("content-length").and_then(|v| v.parse::<usize>().ok()).unwrap_or(available);
            let length = length.min(available);
            response.body = String::from_utf8_lossy(&rest[body_start..body_start + length]).into_owned();
            out.push(response);
            rest = &rest[body_start + length..];
        }
        out
    }

    /// The status codes of the responses read, in order (0 for bytes that are not a response).
    pub fn statuses(&self) -> Vec<u16> {
        self.responses().iter().map(|r| r.status).collect()
    }
}

/// Opens a connection to the server at `port` with read and write timeouts.
pub fn connect(port: u16) -> TcpStream {
    let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to the server");
    stream.set_read_timeout(Some(Duration::from_secs(1))).expect("set read timeout");
    stream.set_write_timeout(Some(Duration::from_secs(10))).expect("set write timeout");
    stream
}

/// Writes `request` on a fresh connection, then reads until the server closes the connection
/// or `window` has passed. With `half_close`, shuts down the write side after the request.
pub fn raw_exchange(port: u16, request: &[u8], half_close: bool, window: Duration) -> RawOutcome {
    let mut stream = connect(port);
    let write_error = stream.write_all(request).err().map(|e| e.to_string());
    if half_close && write_error.is_none() {
        let _ = stream.shutdown(Shutdown::Write);
    }
    let (bytes, closed) = read_until_closed(&mut stream, window);
    RawOutcome { text: String::from_utf8_lossy(&bytes).into_owned(), bytes, closed, write_error }
}

/// Reads from `stream` until EOF or a reset (closed = true) or until `window` passes.
pub fn read_until_closed(stream: &mut TcpStream, window: Duration) -> (Vec<u8>, bool) {
    let deadline = Instant::now() + window;
    let mut bytes = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return (bytes, false);
        }
        let _ = stream.set_read_timeout(Some(left.min(Duration::from_millis(500))));
        match stream.read(&mut buf) {
            Ok(0) => return (bytes, true),
            Ok(n) => bytes.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return (bytes, true),
        }
    }
}

/// A running `rampart sim-venue` (the four venues' protocols on one loopback port), killed on
/// drop.
pub struct SimVenue {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    child: Child,
    agent: ureq::Agent,
}

/// The simulator with `--sim-pairs 8` on Binance alone, and a server following it live on one
/// shard, once the venue's state is `ok`.
pub fn live_binance(bin: &str) -> (SimVenue, Server) {
    live_binance_with(bin, "")
}

/// [`live_binance`] with `extra` (TOML lines) at the head of the server's config.
pub fn live_binance_with(bin: &str, extra: &str) -> (SimVenue, Server) {
    let sim = SimVenue::start(bin, &["--sim-pairs", "8", "--venues", "binance"]);
    let config = sim.config(&["binance"], 8, extra).display().to_string();
    let server = Server::start(bin, &["--feed", "live", "--config", &config, "--shards", "1", "--venues", "binance"]);
    server.wait_venue("binance", "state ok", 30, |h| h["state"] == "ok");
    (sim, server)
}

impl SimVenue {
    /// Starts `rampart sim-venue --listen 127.0.0.1:0 <args>` and waits for its address.
    pub fn start(bin: &str, args: &[&str]) -> SimVenue {
        let mut command = Command::new(bin);
        command
            .arg("sim-venue")
            .arg("--listen")
            .arg("127.0.0.1:0")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        scrub_env(&mut command);
        let mut child = command.spawn().unwrap_or_else(|e| panic!("spawn {bin} sim-venue: {e}"));
        let out = child.stdout.take().expect("stdout is piped");
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let mut lines = BufReader::new(out).lines();
            if let Some(Ok(first)) = lines.next() {
                let _ = tx.send(first);
            }
            // Keep draining so the simulator never blocks on a full pipe.
            for _ in lines {}
        });
        let line = rx.recv_timeout(STARTUP_OUTPUT_TIMEOUT).unwrap_or_else(|_| {
            let _ = child.kill();
            panic!("sim-venue printed no address")
        });
        let url = line.strip_prefix("sim-venue listening on ").unwrap_or_else(|| panic!("unexpected line: {line}"));
        SimVenue {
            url: url.to_owned(),
            child,
            agent: ureq::AgentBuilder::new().timeout(Duration::from_secs(10)).build(),
        }
    }

    /// `ws://127.0.0.1:PORT`.
    pub fn ws_url(&self) -> String {
        self.url.replacen("http://", "ws://", 1)
    }

    /// A config file pointing `venues` at this simulator, with limits relaxed for loopback and
    /// `pairs_per_connection` pairs per connection; returns its path.
    pub fn config(&self, venues: &[&str], pairs_per_connection: usize, extra: &str) -> PathBuf {
        self.config_with(venues, pairs_per_connection, extra, "")
    }

    /// [`SimVenue::config`] with `venue_extra` (TOML lines) added to every venue's table.
    pub fn config_with(&self, venues: &[&str], pairs_per_connection: usize, extra: &str, venue_extra: &str) -> PathBuf {
        static N: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "rampart-live-{}-{}.toml",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let mut text = String::from(extra);
        for v in venues {
            text.push_str(&format!(
                "[venues.{v}]\nrest = \"{}\"\nws = \"{}\"\npairs_per_connection = {pairs_per_connection}\nrest_weight_per_s = 100000\nconnects_per_s = 100\nrefresh_s = 10\n",
                self.url,
                self.ws_url()
            ));
            text.push_str(venue_extra);
        }
        std::fs::write(&path, text).expect("write config");
        path
    }

    /// `POST /sim/<what>` with a JSON body; panics unless the answer is 200.
    pub fn control(&self, what: &str, body: &Value) -> Value {
        let url = format!("{}/sim/{what}", self.url);
        match self.agent.post(&url).set("Content-Type", "application/json").send_string(&body.to_string()) {
            Ok(r) => serde_json::from_str(&r.into_string().unwrap_or_default()).unwrap_or(Value::Null),
            Err(e) => panic!("POST {url} {body}: {e}"),
        }
    }

    /// `GET /sim/<path>` as JSON.
    pub fn get(&self, path: &str) -> Value {
        let url = format!("{}/sim/{path}", self.url);
        match self.agent.get(&url).call() {
            Ok(r) => serde_json::from_str(&r.into_string().unwrap_or_default()).unwrap_or(Value::Null),
            Err(e) => panic!("GET {url}: {e}"),
        }
    }
}

impl Drop for SimVenue {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// Rationale: helpers are appended after this module, at the end of the file, so that parallel
// branches adding helpers do not conflict.
#[allow(clippy::items_after_test_module)]
/// One request a [`hook_receiver`] got.
#[derive(Clone, Debug)]
pub struct Hit {
    /// `POST /path HTTP/1.1`.
    pub request_line: String,
    /// Every header, as sent.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: String,
    /// When it arrived, Unix ms.
    pub at_ms: i64,
}

impl Hit {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// A receiver that answers 200 to everything and records what it got.
pub fn hook_receiver() -> (u16, Arc<Mutex<Vec<Hit>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let hits = Arc::new(Mutex::new(Vec::new()));
    let h = hits.clone();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let h = h.clone();
            thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let mut request_line = String::new();
                let _ = reader.read_line(&mut request_line);
                let mut headers = Vec::new();
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some((k, v)) = line.trim_end().split_once(": ") {
                        headers.push((k.to_owned(), v.to_owned()));
                    }
                }
                let len: usize = headers
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                    .and_then(|(_, v): &(String, String)| v.parse().ok())
                    .unwrap_or(0);
                let mut body = vec![0u8; len];
                let _ = reader.read_exact(&mut body);
                let at_ms = now_ms();
                if let Ok(mut g) = h.lock() {
                    g.push(Hit {
                        request_line: request_line.trim_end().to_owned(),
                        headers,
                        body: String::from_utf8_lossy(&body).into_owned(),
                        at_ms,
                    });
                }
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            });
        }
    });
    (port, hits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(bytes: &[u8]) -> RawOutcome {
        RawOutcome {
            bytes: bytes.to_vec(),
            text: String::from_utf8_lossy(bytes).into_owned(),
            closed: true,
            write_error: None,
        }
    }

    #[test]
    fn responses_are_split_by_content_length() {
        // A pipelined 200 whose JSON body runs straight into hyper's 400.
        let raw = outcome(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{\"data\":[]}\
              HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n",
        );
        let responses = raw.responses();
        assert_eq!(raw.statuses(), vec![200, 400]);
        assert_eq!(responses[0].body, "{\"data\":[]}");
        assert_eq!(responses[0].header("Content-Type"), Some("application/json"));
        assert_eq!(responses[1].body, "");
    }

    #[test]
    fn garbage_is_status_0() {
        assert_eq!(outcome(b"garbage").statuses(), vec![0]);
        assert_eq!(outcome(b"SPDY/9 200\r\n\r\n").statuses(), vec![0]);
        assert!(outcome(b"").statuses().is_empty());
    }

    #[test]
    fn key_format() {
        assert!(is_api_key("rk_0123456789abcdefghijABCDEFGHIJ01"));
        assert!(!is_api_key("rk_0123456789abcdefghijABCDEFGHIJ0"));
        assert!(!is_api_key("rk_0123456789abcdefghijABCDEFGHIJ012"));
        assert!(!is_api_key("rk_0123456789abcdefghijABCDEFGHI-01"));
        assert!(!is_api_key("xk_0123456789abcdefghijABCDEFGHIJ01"));
    }

    #[test]
    fn iso8601() {
        assert!(is_iso8601("2026-11-20T14:03:07.123+00:00"));
        assert!(is_iso8601("2026-11-20T14:03:07Z"));
        assert!(!is_iso8601("2026-11-20 14:03:07"));
        assert!(!is_iso8601("1763647387123"));
        assert!(!is_iso8601("-"));
    }

    #[test]
    fn listening_port() {
        assert_eq!(parse_port("127.0.0.1:4242"), Some(4242));
        assert_eq!(parse_port("127.0.0.1:0"), None);
        assert_eq!(parse_port("0.0.0.0:4242"), None);
    }
}

/// A shell wrapper around `bin` that runs it with a file-size limit of `limit_bytes` (rounded
/// down to 512-byte blocks) and `SIGXFSZ` ignored, so a write past the limit fails with `EFBIG`
/// (as on a full disk) instead of killing the process; returns the wrapper's path, usable
/// wherever the binary's path is (the wrapper `exec`s it, so the pid is the binary's).
pub fn file_size_limited(bin: &str, limit_bytes: u64) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let path = std::env::temp_dir().join(format!(
        "rampart-fsize-{}-{}.sh",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    // POSIX `ulimit -f` counts 512-byte blocks; the tests check /proc/<pid>/limits.
    let text = format!("#!/bin/sh\ntrap '' XFSZ\nulimit -f {}\nexec '{bin}' \"$@\"\n", limit_bytes / 512);
    std::fs::write(&path, text).expect("write the wrapper");
    let _ = Command::new("chmod").arg("755").arg(&path).status();
    path
}

/// The soft file-size limit of process `pid` in bytes (`None`: unlimited or unreadable).
pub fn file_size_limit(pid: u32) -> Option<u64> {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max file size"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

impl Server {
    /// The `/healthz` entry of `venue` (live feed).
    pub fn venue_health(&self, venue: &str) -> Value {
        let h = self.get("/healthz", None);
        let v: Value = serde_json::from_str(&h.text).unwrap_or_else(|_| panic!("healthz is not JSON: {}", h.text));
        v["exchanges"]
            .as_array()
            .and_then(|a| a.iter().find(|e| e["exchange"] == venue).cloned())
            .unwrap_or_else(|| panic!("{venue} not in healthz: {v}"))
    }

    /// Waits up to `secs` until `check` holds for `venue`'s health entry; returns it.
    pub fn wait_venue(&self, venue: &str, what: &str, secs: u64, check: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let h = self.venue_health(venue);
            if check(&h) {
                return h;
            }
            assert!(Instant::now() < deadline, "{venue}: {what} not reached in {secs} s: {h}\n{}", self.diagnostics());
            thread::sleep(Duration::from_millis(100));
        }
    }
}

/// A signed-in site session: its cookie (`name=value`) and CSRF token.
#[derive(Clone, Debug)]
pub struct SiteSession {
    /// `rampart_session=<id>`, as a `Cookie` header sends it.
    pub cookie: String,
    /// The token every state change sends in `X-CSRF-Token`.
    pub csrf: String,
}

impl SiteSession {
    /// Signs in with `key` (`POST /site/signin`): the reply, and the session if it was 200.
    pub fn signin(server: &Server, key: &str) -> (Reply, Option<SiteSession>) {
        let r = server.request_with("POST", "/site/signin", &[], Some(&serde_json::json!({ "key": key }).to_string()));
        if r.status != 200 {
            return (r, None);
        }
        let set = r.header("set-cookie").expect("a cookie").to_owned();
        let cookie = set.split(';').next().unwrap_or("").to_owned();
        let csrf = r.body["data"]["csrf"].as_str().expect("a CSRF token").to_owned();
        (r, Some(SiteSession { cookie, csrf }))
    }

    /// `GET path` with the cookie.
    pub fn get(&self, server: &Server, path: &str) -> Reply {
        server.request_with("GET", path, &[("Cookie", &self.cookie)], None)
    }

    /// A state change with the cookie and the token.
    pub fn change(&self, server: &Server, method: &str, path: &str, body: Option<&Value>) -> Reply {
        let headers = [("Cookie", self.cookie.as_str()), ("X-CSRF-Token", self.csrf.as_str())];
        server.request_with(method, path, &headers, body.map(Value::to_string).as_deref())
    }
}

/// A fresh schema on the test process's PostgreSQL server (`rampart_testkit::pg`); the
/// connection string that uses it (for `--postgres`).
pub fn pg_database() -> String {
    let server = rampart_testkit::pg::server();
    let schema = server.fresh_schema_name();
    let admin = rampart_store::db::Db::postgres(&server.admin_url()).expect("connect as admin");
    admin.batch(&format!("CREATE SCHEMA {schema}")).expect("create the schema");
    server.url_in_schema(&schema)
}

/// The smallest cluster on the live feed: one market node owning the only partition and one api
/// node, both reading `config` for `venue` with one shard, over a fresh PostgreSQL schema and a
/// NATS server of their own (on one shared by several tests, their delivery processes would take
/// each other's firings). Returned once both answer `/healthz`; the api node's key is its own.
pub struct SmallCluster {
    /// The market node (no key of its own).
    pub market: Server,
    /// The api node.
    pub api: Server,
    _nats: rampart_testkit::nats::NatsServer,
}

impl SmallCluster {
    /// Starts it (see [`SmallCluster`]).
    pub fn start(bin: &str, config: &str, venue: &str) -> SmallCluster {
        let postgres = pg_database();
        let nats = rampart_testkit::nats::start_owned(None).expect("a NATS server");
        let url = nats.url();
        let live = ["--feed", "live", "--config", config, "--shards", "1", "--venues", venue];
        let common = [live.as_slice(), &["--postgres", &postgres, "--nats", &url]].concat();
        let market =
            Server::start_with_key(bin, &[common.as_slice(), &["--role", "market", "--partition", "0/1"]].concat(), "");
        let api = Server::start(bin, &[common.as_slice(), &["--role", "api", "--partitions", "1"]].concat());
        SmallCluster { market, api, _nats: nats }
    }
}

/// A fresh schema on the test process's PostgreSQL server owned by a role of its own, so the
/// test can cut that role off ([`pg_cut_off`]): the connection string and the role.
pub fn pg_database_with_role() -> (String, String) {
    let server = rampart_testkit::pg::server();
    let schema = server.fresh_schema_name();
    let role = format!("r_{schema}");
    let admin = rampart_store::db::Db::postgres(&server.admin_url()).expect("connect as admin");
    admin
        .batch(&format!("CREATE ROLE {role} LOGIN; CREATE SCHEMA {schema} AUTHORIZATION {role};"))
        .expect("the role and its schema");
    let url =
        format!("host=127.0.0.1 port={} user={role} dbname=postgres options='-c search_path={schema}'", server.port());
    (url, role)
}

/// Ends the role's connections and refuses new ones (`off`), or allows them again: PostgreSQL
/// unreachable for whoever uses the role, as far as it can tell.
pub fn pg_cut_off(role: &str, off: bool) {
    let admin = rampart_store::db::Db::postgres(&rampart_testkit::pg::server().admin_url()).expect("connect as admin");
    let login = if off { "NOLOGIN" } else { "LOGIN" };
    admin.batch(&format!("ALTER ROLE {role} {login}")).expect("alter the role");
    if off {
        admin
            .batch(&format!("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}'"))
            .expect("end its connections");
    }
}

/// A webhook receiver on loopback that answers 200 and keeps each request's JSON body.
pub fn json_receiver() -> (u16, Arc<Mutex<Vec<Value>>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let b = bodies.clone();
    thread::spawn(move || {
        for stream in listener.incoming().map_while(Result::ok) {
            receive_json(stream, &b);
        }
    });
    (port, bodies)
}

/// Reads one HTTP request from `stream`, keeps its body in `kept` when it is JSON, then
/// answers 200 (after keeping it: a sender that saw the 200 has its body kept).
pub fn receive_json(mut stream: TcpStream, kept: &Mutex<Vec<Value>>) {
    let Ok(clone) = stream.try_clone() else { return };
    let mut reader = BufReader::new(clone);
    let mut len = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; len];
    let _ = reader.read_exact(&mut body);
    if let Ok(v) = serde_json::from_slice::<Value>(&body) {
        lock(kept).push(v);
    }
    let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
}

/// The ids of the server's first account's alerts with `status` (`all`, `active`, `triggered`).
pub fn alert_ids(server: &Server, status: &str) -> Vec<i64> {
    let list = server.get(&format!("/v1/alerts?status={status}"), Some(&server.key));
    list.ok("alerts")["data"].as_array().expect("data").iter().filter_map(|a| a["id"].as_i64()).collect()
}

/// A config file that lets webhooks reach loopback receivers (`webhooks.allow_private`).
pub fn allow_private_config(name: &str) -> String {
    let path = std::env::temp_dir().join(format!("rampart-{name}-{}.toml", std::process::id()));
    std::fs::write(&path, "[webhooks]\nallow_private = true\n").expect("write the config");
    path.display().to_string()
}

/// The first `n` symbols the server lists on Binance.
pub fn binance_symbols(server: &Server, n: usize) -> Vec<String> {
    let symbols = server.get_authed("/v1/exchanges/binance/symbols");
    let data = symbols.ok("symbols")["data"].as_array().cloned().unwrap_or_default();
    data.iter().filter_map(|s| s["symbol"].as_str().map(str::to_owned)).take(n).collect()
}

/// A `rampart deliver` process (two workers), killed when dropped, so a failing test leaves none
/// behind.
pub struct Deliver {
    child: Child,
    /// `http://ADDR` of its `/healthz` and `/metrics`.
    pub health: String,
}

impl Deliver {
    /// Starts `rampart deliver` with two worker threads on `postgres` and `nats` and waits for
    /// its ready line.
    pub fn start(bin: &str, postgres: &str, nats: &str, config: &str) -> Deliver {
        Deliver::start_with_workers(bin, postgres, nats, config, 2)
    }

    /// [`Deliver::start`] with `workers` threads.
    pub fn start_with_workers(bin: &str, postgres: &str, nats: &str, config: &str, workers: usize) -> Deliver {
        let mut child = Command::new(bin)
            .args(["deliver", "--postgres", postgres, "--nats", nats, "--config", config])
            .args(["--workers", &workers.to_string()])
            .args(["--listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn deliver");
        let out = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(out).read_line(&mut line).expect("a ready line");
        assert!(line.starts_with(&format!("delivering with {workers} workers")), "{line:?}");
        let addr = line.trim().rsplit(' ').next().unwrap_or_default().to_owned();
        Deliver { child, health: format!("http://{addr}") }
    }

    /// SIGKILL.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Deliver {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Cluster tests' helpers: alerts that fire at a pair's next trade, and who received what.
pub mod cluster {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};

    use serde_json::{json, Value};

    use super::{binance_symbols, Server};

    /// Alert id → times its webhook arrived at a [`super::json_receiver`].
    pub fn arrivals(hits: &Arc<Mutex<Vec<Value>>>) -> BTreeMap<i64, usize> {
        let mut m = BTreeMap::new();
        for h in hits.lock().map(|g| g.clone()).unwrap_or_default() {
            *m.entry(h["alert"]["id"].as_i64().unwrap_or(-1)).or_insert(0) += 1;
        }
        m
    }

    /// Creates through `node` a one-shot alert that fires at the pair's next trade on Binance
    /// (a 0.1 % move since the day's open: the pairs are chosen 0.3 % or more away from it, see
    /// [`movers`]) with its webhook on loopback port `hook`; its id.
    pub fn create_firing(node: &Server, key: &str, symbol: &str, hook: u16) -> i64 {
        let body = json!({"symbol": symbol, "type": "pct", "direction": "any", "pct": 0.1, "window": "1d",
                          "webhook_url": format!("http://127.0.0.1:{hook}/hook")});
        let reply = node.request("POST", "/v1/alerts", Some(&format!("Bearer {key}")), Some(&body.to_string()));
        reply.ok("create")["data"]["id"].as_i64().expect("an id")
    }

    /// The Binance pairs whose price is 0.3 % or more from the day's open (so a 0.1 % alert
    /// over the day fires at their next trade: a pair near its open may not move 0.1 % for
    /// minutes).
    pub fn movers(node: &Server, key: &str) -> Vec<String> {
        let mut out = Vec::new();
        for s in binance_symbols(node, 200) {
            let bars = node.get(&format!("/v1/candles/{s}?exchange=binance&interval=1d&limit=1"), Some(key));
            let bar = &bars.ok("candles")["data"][0];
            let (open, close) = (bar["open"].as_f64().unwrap_or(0.0), bar["close"].as_f64().unwrap_or(0.0));
            if open > 0.0 && (close / open - 1.0).abs() >= 0.003 {
                out.push(s);
            }
        }
        out
    }

    /// A key on the config's `roomy` plan (no developer limit of 120 requests a minute: the
    /// tests read often), made with `bin keys create`.
    pub fn unlimited_key(bin: &str, config: &str, postgres: &str) -> String {
        let out = std::process::Command::new(bin)
            .args(["keys", "create", "--plan", "roomy", "--config", config, "--postgres", postgres])
            .output()
            .expect("keys create");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or_default().trim().to_owned()
    }

    /// A config file for cluster tests: webhooks to loopback, and the `roomy` plan.
    pub fn roomy_config(name: &str) -> String {
        let cfg = std::env::temp_dir().join(format!("rampart-{name}-{}.toml", std::process::id()));
        let plan = "[plans.roomy]\napi = true\nprice_alert_cap = 1000\npct_alerts = true\nrepeat = true\nburst_per_min = 1000000\ndaily_quota = 100000000\n";
        std::fs::write(&cfg, format!("[webhooks]\nallow_private = true\n\n{plan}")).expect("write the config");
        cfg.display().to_string()
    }
}
