//! Build script: the table of the site's files, made from the folder `net/site/` itself, so the
//! server serves every file of the site and no hand-kept list can miss a module.
//!
//! Writes `$OUT_DIR/site_assets.rs`, included by `src/api/front/site/assets.rs`: `const ASSETS:
//! [Asset; N]`, one entry per file (URL path, content type, bytes embedded with
//! `include_bytes!`), the page first, then by URL path. A file's URL is `/assets/` and its path
//! under `net/site/` (`js/pages/pair.js` is `/assets/js/pages/pair.js`), except `index.html`,
//! which is `/`, and the files of [`RENAMED`]. Files are served by extension ([`SERVED`]);
//! documents (`*.md`), licences (`LICENSE*`) and hidden files (an editor's `.swp`) are not; any
//! other file stops the build, so a new kind of file gets its content type on purpose.
//!
//! Rationale: a build script rather than a crate such as `include_dir`: a few dozen lines, no new
//! dependency, and the table is a plain `const` the server indexes as before.

use std::fmt::Write as _;
use std::path::Path;

/// The content type of each extension served.
const SERVED: [(&str, &str); 3] = [
    ("html", "text/html; charset=utf-8"),
    ("css", "text/css; charset=utf-8"),
    ("js", "text/javascript; charset=utf-8"),
];

/// Files served under a name other than their path: the vendored chart library keeps its
/// upstream file name (it is checked in byte for byte, `net/site/vendor/README.md`) and is sent
/// as `/assets/lightweight-charts.js`, the name the pair page loads it by.
const RENAMED: [(&str, &str); 1] =
    [("vendor/lightweight-charts.standalone.production.js", "/assets/lightweight-charts.js")];

/// Every file under `dir`, as its path relative to `root` with `/` between segments.
fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.unwrap_or_else(|e| panic!("{}: {e}", dir.display())).path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name.starts_with('.') {
            continue;
        }
        if path.is_dir() {
            walk(root, &path, out);
        } else {
            let rel = path.strip_prefix(root).expect("under the site folder");
            let parts: Vec<&str> = rel.iter().map(|s| s.to_str().unwrap_or_default()).collect();
            out.push(parts.join("/"));
        }
    }
}

/// The URL path and content type of the file at `rel`, or `None` for a file that is not served.
fn served(rel: &str) -> Option<(String, &'static str)> {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    if name.ends_with(".md") || name.starts_with("LICENSE") {
        return None;
    }
    assert!(
        rel.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-/".contains(&b)),
        "net/site/{rel}: a served file's path is letters, digits and . _ - / only (it is a URL and a Rust string)"
    );
    let ext = name.rsplit_once('.').map_or("", |(_, e)| e);
    let Some(&(_, content_type)) = SERVED.iter().find(|(e, _)| *e == ext) else {
        panic!("net/site/{rel}: no content type for `.{ext}`; add it to SERVED in net/build.rs, or leave the file out of net/site")
    };
    let url = match RENAMED.iter().find(|(from, _)| *from == rel) {
        Some(&(_, to)) => to.to_owned(),
        None if rel == "index.html" => "/".to_owned(),
        None => format!("/assets/{rel}"),
    };
    Some((url, content_type))
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // A folder is scanned whole: a file added, removed or changed anywhere under it reruns this.
    println!("cargo:rerun-if-changed=site");
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let site = Path::new(&manifest).join("site");
    let mut files = Vec::new();
    walk(&site, &site, &mut files);
    for (from, _) in RENAMED {
        assert!(files.iter().any(|f| f == from), "RENAMED in net/build.rs names net/site/{from}, which is not there");
    }
    let mut assets: Vec<(String, &str, String)> =
        files.into_iter().filter_map(|rel| served(&rel).map(|(url, kind)| (url, kind, rel))).collect();
    assets.sort();
    for pair in assets.windows(2) {
        assert!(pair[0].0 != pair[1].0, "net/site/{} and net/site/{} are both {}", pair[0].2, pair[1].2, pair[0].0);
    }
    assert!(assets.first().is_some_and(|a| a.0 == "/"), "net/site/index.html, the page, is missing");
    let mut out = String::from(
        "/// Every file the site serves, made by `net/build.rs` from `net/site/`; `/` (the page) first.\n",
    );
    let _ = writeln!(out, "const ASSETS: [Asset; {}] = [", assets.len());
    for (url, kind, rel) in &assets {
        let _ = writeln!(
            out,
            "    Asset {{ path: {url:?}, content_type: {kind:?}, bytes: include_bytes!(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/site/{rel}\")) }},"
        );
    }
    out.push_str("];\n");
    let dest = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("site_assets.rs");
    std::fs::write(&dest, out).unwrap_or_else(|e| panic!("{}: {e}", dest.display()));
}
