//! Hardening through the real binary: what an attacker or an unlucky operator did to rampart,
//! each reproduced against a running server: a second server on the same data directory,
//! request bodies and connections from clients without a key, a locked database, errors produced
//! below the router, alert values kept exactly as sent, and a bounded shutdown.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use rampart_tests::{connect, raw_exchange, run_with_timeout, Server, FAST};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");

fn bearer(key: &str) -> String {
    format!("Bearer {key}")
}

/// A second server on a data directory in use refuses to start, before printing a key or a
/// port, and the first one keeps serving.
#[test]
fn a_second_server_on_the_same_data_directory_refuses_to_start() {
    let server = Server::start(BIN, FAST);
    let mut second = Command::new(BIN);
    second.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"]).arg(&server.data_dir).args(FAST);
    let out = run_with_timeout(second, Duration::from_secs(30));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "exit status; stderr: {stderr}");
    assert!(stderr.contains("another rampart server is using this data directory"), "stderr: {stderr}");
    assert!(!stdout.contains("listening") && !stdout.contains("api key"), "stdout: {stdout}");
    assert_eq!(server.get("/healthz", None).status, 200, "the first server still serves");
    assert!(server.alive());
}
