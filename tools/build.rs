//! Build script: the git revision the binary is built from, for `/version` and `/healthz`.
//!
//! `RAMPART_REVISION` in the build's environment wins (a container build has no `.git`);
//! otherwise `git rev-parse --short=12 HEAD` (uncommitted changes are not marked: watching the
//! index would rebuild on every `git add`); else `unknown`. Only this small binary crate is
//! rebuilt when HEAD moves; the front is given the value.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn main() {
    println!("cargo:rerun-if-env-changed=RAMPART_REVISION");
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        if let Some(head) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={dir}/{head}");
        }
    }
    let revision = std::env::var("RAMPART_REVISION")
        .ok()
        .filter(|r| !r.is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]));
    println!("cargo:rustc-env=RAMPART_REVISION={}", revision.as_deref().unwrap_or("unknown"));
}
