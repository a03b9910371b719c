//! House rules that erode quietly, checked over the workspace's sources (rust-analyzer's `tidy`
//! tests are the model): library crates return typed errors, per-venue tables are sized by
//! `Venue::COUNT`, a constant name means one value across crates, the service reads time from its
//! one clock, a long function in the engine or the runtime says why it is long, and each floor
//! keeps its boundary (the paths its files never refer to).
//!
//! Only the non-test part of each file is read: the whole file, less every item gated by
//! `#[cfg(test)]` (the attribute and the `mod`, `fn`, `impl`, `use`... it gates, through its `;` or
//! its matching closing brace), so code after a test module or a test-only helper is checked too.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Lines a function of the engine or the runtime may span without a written reason.
const FUNCTION_LINES_MAX: usize = 70;
/// The marker of a written reason, in a comment within the five lines above a long function.
const LONG_REASON: &str = "Long:";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root").to_owned()
}

/// The runtime's crates, floor by floor (ARCHITECTURE.md, "Floors of the runtime"): their
/// sources are held to every rule below.
const RUNTIME: [&str; 8] = [
    "net/state/src",
    "net/outbound/src",
    "net/venue/src",
    "net/store/src",
    "net/delivery/src",
    "net/shard/src",
    "net/cluster/src",
    "net/src",
];

/// The engine's and the runtime's source folders.
fn engine_and_runtime() -> Vec<&'static str> {
    std::iter::once("engine/src").chain(RUNTIME).collect()
}

/// Every `.rs` file under `dir` (relative to the root; a file names itself), sorted.
fn sources(dir: &str) -> Vec<PathBuf> {
    let whole = root().join(dir);
    if whole.is_file() {
        return vec![whole];
    }
    let mut out = Vec::new();
    let mut stack = vec![root().join(dir)];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The file's non-test lines: line `i + 1` of the file at index `i`, the lines of the items gated by
/// `#[cfg(test)]` left empty (so an index is still a line number).
fn code_lines(path: &Path) -> Vec<String> {
    non_test(&read(path)).0
}

/// `text`'s lines with the lines of its test-only items emptied, twice: as written, and masked
/// (comments and the insides of literals blanked, see [`mask`]).
fn non_test(text: &str) -> (Vec<String>, Vec<String>) {
    let masked = mask(text);
    let test = test_only_lines(&masked);
    let keep = |(i, l): (usize, &str)| if test[i] { String::new() } else { l.to_owned() };
    (text.lines().enumerate().map(keep).collect(), masked.lines().enumerate().map(keep).collect())
}

/// `text` with every comment and the inside of every string and char literal turned into spaces,
/// newlines kept: what is left is code, so a brace or a `crate::` in it is one of the code's.
/// Lifetimes (`'a`) stay; raw strings (`r#"..."#`) and nested block comments are understood.
fn mask(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = c.clone();
    let blank = |out: &mut Vec<char>, from: usize, to: usize| {
        for x in out.iter_mut().take(to.min(c.len())).skip(from) {
            if *x != '\n' {
                *x = ' ';
            }
        }
    };
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let mut i = 0;
    while i < c.len() {
        match (c[i], at(i + 1)) {
            ('/', '/') => {
                let end = (i..c.len()).find(|&j| c[j] == '\n').unwrap_or(c.len());
                blank(&mut out, i, end);
                i = end;
            }
            ('/', '*') => {
                let (mut depth, mut j) = (1, i + 2);
                while j < c.len() && depth > 0 {
                    match (c[j], at(j + 1)) {
                        ('/', '*') => (depth, j) = (depth + 1, j + 2),
                        ('*', '/') => (depth, j) = (depth - 1, j + 2),
                        _ => j += 1,
                    }
                }
                blank(&mut out, i, j);
                i = j;
            }
            ('"', _) => {
                let mut j = i + 1;
                while j < c.len() && c[j] != '"' {
                    j += if c[j] == '\\' { 2 } else { 1 };
                }
                blank(&mut out, i + 1, j);
                i = j + 1;
            }
            ('\'', '\\') => {
                // An escaped char literal: `'\''`, `'\n'`, `'\u{7f}'`.
                let end = (i + 3..c.len()).find(|&j| c[j] == '\'').unwrap_or(c.len());
                blank(&mut out, i + 1, end);
                i = end + 1;
            }
            ('\'', _) if at(i + 2) == '\'' => {
                blank(&mut out, i + 1, i + 2);
                i += 3;
            }
            (x, _) if x.is_alphanumeric() || x == '_' => {
                let end = (i..c.len()).find(|&j| !(c[j].is_alphanumeric() || c[j] == '_')).unwrap_or(c.len());
                let word: String = c[i..end].iter().collect();
                let hashes = (end..c.len()).take_while(|&j| c[j] == '#').count();
                if ["r", "br", "cr"].contains(&word.as_str()) && at(end + hashes) == '"' {
                    // A raw string: it ends at the first `"` followed by as many `#`.
                    let open = end + hashes + 1;
                    let close = (open..c.len())
                        .find(|&j| c[j] == '"' && (1..=hashes).all(|k| at(j + k) == '#'))
                        .unwrap_or(c.len());
                    blank(&mut out, open, close);
                    i = close + 1 + hashes;
                } else {
                    // `b"..."`, `b'x'` and `c"..."` continue as the literals they prefix.
                    i = end;
                }
            }
            _ => i += 1,
        }
    }
    out.into_iter().collect()
}

/// Which lines of a masked text belong to an item gated by `#[cfg(test)]`: the attribute's line
/// through the line of the item's end. A file under `#![cfg(test)]` is test code throughout.
fn test_only_lines(masked: &str) -> Vec<bool> {
    let lines = masked.lines().count();
    if masked.contains("#![cfg(test)]") {
        return vec![true; lines];
    }
    let line_of = |at: usize| masked.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count();
    let mut test = vec![false; lines];
    let attribute = "#[cfg(test)]";
    let mut from = 0;
    while let Some(at) = masked[from..].find(attribute) {
        let start = from + at;
        let end = item_end(masked.as_bytes(), start + attribute.len());
        for t in test.iter_mut().take(line_of(end) + 1).skip(line_of(start)) {
            *t = true;
        }
        from = end.max(start + attribute.len());
    }
    test
}

/// The index of the last byte of the item that starts at `from` in a masked text: its `;` (or the `,`
/// after a field or variant) outside any bracket, or the `}` that closes its body. Further attributes
/// (`#[derive(..)]`) on the way are part of it.
fn item_end(b: &[u8], from: usize) -> usize {
    let mut depth = 0i32;
    for (j, &x) in b.iter().enumerate().skip(from) {
        match x {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' => depth -= 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return j;
                }
            }
            b';' | b',' if depth == 0 => return j,
            _ => {}
        }
        if depth < 0 {
            // The closer of what encloses the item (a field without its comma): the item ended
            // before it.
            let before = b[from..j].iter().rposition(|x| !x.is_ascii_whitespace()).unwrap_or(0);
            return from + before;
        }
    }
    b.len().saturating_sub(1)
}

fn name(path: &Path) -> String {
    path.strip_prefix(root()).unwrap_or(path).display().to_string()
}

#[test]
fn library_crates_return_typed_errors() {
    let mut found = Vec::new();
    for dir in engine_and_runtime() {
        for p in sources(dir) {
            for (i, l) in code_lines(&p).iter().enumerate() {
                let code = l.split("//").next().unwrap_or("");
                if code.contains("Result<") && code.contains(", String>") {
                    found.push(format!("{}:{}: {}", name(&p), i + 1, l.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "Result<_, String> in a library crate (give the layer an error type):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_service_reads_time_from_its_one_clock() {
    // The engine gets time as an argument; the runtime from the process's `Clock`. Only
    // `net/state/src/clock.rs` may read the wall clock.
    let idioms = ["SystemTime::now", "clock::wall_ms", "clock::wall_us", "clock::now_ms", "clock::now_us"];
    let mut found = Vec::new();
    for dir in engine_and_runtime() {
        for p in sources(dir) {
            if p.ends_with("net/state/src/clock.rs") {
                continue;
            }
            for (i, l) in code_lines(&p).iter().enumerate() {
                let code = l.split("//").next().unwrap_or("");
                if idioms.iter().any(|x| code.contains(x)) {
                    found.push(format!("{}:{}: {}", name(&p), i + 1, l.trim()));
                }
            }
        }
    }
    assert!(found.is_empty(), "the wall clock read outside the process's Clock:\n{}", found.join("\n"));
}

/// Where the runtime reads the monotonic clock (`Instant::now`), each with why: the I/O edges
/// that time what they do or sleep until a rule's answer. Every rule itself (pacers, retry
/// schedules, expiries, stream admission) takes time as an argument and is tested in synthetic
/// time; a new reader is added here with its reason, or the rule it serves takes `now` instead.
const INSTANT_NOW_READERS: &[(&str, &str)] = &[
    ("net/cluster/src/snapshots.rs", "the publisher's cadence of full snapshots"),
    ("net/cluster/src/worker.rs", "a delivery worker's attempt timings and its line's looks"),
    ("net/delivery/src/lib.rs", "the sender's attempt timings and its full-scan cadence"),
    ("net/delivery/src/pool.rs", "an idle connection's age, when met"),
    ("net/delivery/src/lanes.rs", "an attempt's duration, for /metrics and the delivery log"),
    ("net/outbound/src/http.rs", "a new connection's idle stamp"),
    ("net/shard/src/lib.rs", "how long loading the simulated market's history took (logged)"),
    ("net/state/src/shutdown.rs", "a stop's grace period"),
    ("net/store/src/db.rs", "PostgreSQL reconnects at most once per RECONNECT_EVERY"),
    ("net/store/src/storage.rs", "a storage request's deadline"),
    ("net/venue/src/rest.rs", "the REST thread: the pacers' now and the listing refreshes"),
    ("net/src/api/front.rs", "a request's duration for /metrics"),
    ("net/src/api/front/alerts_api/test_send.rs", "a test send's latency, answered and logged"),
    ("net/src/api/front/gate.rs", "a key change's wait for every running key table"),
    ("net/src/api/front/stream_api.rs", "a stream request's duration for /metrics"),
];

#[test]
fn the_monotonic_clock_is_read_only_where_listed() {
    let mut read = BTreeSet::new();
    let mut found = Vec::new();
    for dir in engine_and_runtime() {
        for p in sources(dir) {
            for (i, l) in code_lines(&p).iter().enumerate() {
                let code = l.split("//").next().unwrap_or("");
                if !code.contains("Instant::now") {
                    continue;
                }
                read.insert(name(&p));
                if !INSTANT_NOW_READERS.iter().any(|(f, _)| name(&p) == *f) {
                    found.push(format!("{}:{}: {}", name(&p), i + 1, l.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "Instant::now read where INSTANT_NOW_READERS does not list it (pass `now` in, or list the file with why):\n{}",
        found.join("\n")
    );
    let stale: Vec<&str> = INSTANT_NOW_READERS.iter().map(|(f, _)| *f).filter(|f| !read.contains(*f)).collect();
    assert!(stale.is_empty(), "listed in INSTANT_NOW_READERS but no longer reading the clock: {stale:?}");
}

#[test]
fn per_venue_tables_are_sized_by_the_venue_count() {
    let idioms = ["step_by(4)", "index() * 4", "* 4 + venue", "; 4]>"];
    let mut found = Vec::new();
    for dir in engine_and_runtime().into_iter().chain(["simvenue/src", "tools/src"]) {
        for p in sources(dir) {
            for (i, l) in code_lines(&p).iter().enumerate() {
                if idioms.iter().any(|x| l.contains(x)) {
                    found.push(format!("{}:{}: {}", name(&p), i + 1, l.trim()));
                }
            }
        }
    }
    assert!(found.is_empty(), "a venue count written as 4 (use Venue::COUNT):\n{}", found.join("\n"));
}

/// `NAME` → (value, file) of every top-level constant.
fn top_level_constants() -> BTreeMap<String, Vec<(String, String)>> {
    let mut out: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    let others = ["simvenue/src", "tools/src", "bench/src", "tests/src", "testkit/src"];
    for dir in engine_and_runtime().into_iter().chain(others) {
        for p in sources(dir) {
            for l in code_lines(&p) {
                let rest = ["pub const ", "pub(crate) const ", "const "].iter().find_map(|k| l.strip_prefix(k));
                let Some(rest) = rest else { continue };
                let Some((lhs, value)) = rest.split_once('=') else { continue };
                let const_name = lhs.split(':').next().unwrap_or("").trim().to_owned();
                let value = value.trim().trim_end_matches(';').trim().to_owned();
                out.entry(const_name).or_default().push((value, name(&p)));
            }
        }
    }
    out
}

/// Within a crate, modules namespace their constants (each venue module has its own `PING`);
/// across crates one name must mean one value, or a reader takes one bound for another.
#[test]
fn a_constant_name_means_one_value_across_crates() {
    let mut found = Vec::new();
    for (const_name, uses) in top_level_constants() {
        if const_name.starts_with('_') {
            continue;
        }
        let crate_of = |f: &str| f.split('/').next().unwrap_or("").to_owned();
        let mut by_crate: BTreeMap<String, Vec<&str>> = BTreeMap::new();
        for (v, f) in &uses {
            by_crate.entry(crate_of(f)).or_default().push(v);
        }
        let mut values: Vec<&str> = uses.iter().map(|(v, _)| v.as_str()).collect();
        values.sort();
        values.dedup();
        if by_crate.len() > 1 && values.len() > 1 {
            let at: Vec<String> = uses.iter().map(|(v, f)| format!("{f} = {v}")).collect();
            found.push(format!("{const_name}: {}", at.join("; ")));
        }
    }
    assert!(found.is_empty(), "one constant name, different values in different crates:\n{}", found.join("\n"));
}

/// What follows `fn ` when `line` (trimmed) declares a function, whatever its visibility
/// (`pub`, `pub(crate)`, `pub(super)`, `pub(in …)`) and qualifiers (`const`, `async`, `unsafe`).
fn fn_declared(line: &str) -> Option<&str> {
    let mut rest = line;
    if let Some(r) = rest.strip_prefix("pub") {
        rest = match r.strip_prefix('(') {
            Some(r) => r.split_once(')')?.1,
            None => r,
        };
        rest = rest.strip_prefix(' ')?;
    }
    for q in ["const ", "async ", "unsafe "] {
        rest = rest.strip_prefix(q).unwrap_or(rest);
    }
    rest.strip_prefix("fn ")
}

/// Functions of the engine and the runtime longer than the bound: (file, line, name, lines).
fn long_functions() -> Vec<(String, usize, String, usize)> {
    let mut out = Vec::new();
    for dir in engine_and_runtime().into_iter().chain(["tools/src", "simvenue/src"]) {
        for p in sources(dir) {
            let lines = code_lines(&p);
            for (i, l) in lines.iter().enumerate() {
                let t = l.trim_start();
                let Some(decl) = fn_declared(t) else { continue };
                if l.trim_end().ends_with(';') {
                    continue;
                }
                let indent = &l[..l.len() - t.len()];
                let close = format!("{indent}}}");
                let Some(end) = lines[i..].iter().position(|x| *x == close) else { continue };
                let fn_name = decl.split(['(', '<']).next().unwrap_or("").to_owned();
                if end + 1 > FUNCTION_LINES_MAX {
                    let reason = lines[i.saturating_sub(5)..i].iter().any(|x| x.contains(LONG_REASON));
                    if !reason {
                        out.push((name(&p), i + 1, fn_name, end + 1));
                    }
                }
            }
        }
    }
    out
}

#[test]
fn a_function_is_found_whatever_its_visibility() {
    for line in
        ["fn a(", "pub fn a(", "pub(crate) fn a(", "pub(super) fn a(", "pub(in crate::x) async fn a(", "const fn a("]
    {
        assert_eq!(fn_declared(line), Some("a("), "{line}");
    }
    for line in ["fnord", "pub struct A", "// fn a(", "pub(crate) const A: u8 = 1;"] {
        assert_eq!(fn_declared(line), None, "{line}");
    }
}

#[test]
fn a_long_runtime_function_says_why() {
    let found: Vec<String> =
        long_functions().iter().map(|(f, l, n, len)| format!("{f}:{l}: fn {n} is {len} lines")).collect();
    assert!(
        found.is_empty(),
        "functions over {FUNCTION_LINES_MAX} lines without a `// {LONG_REASON} ...` reason above them:\n{}",
        found.join("\n")
    );
}

/// Every text file a reader of the repository meets: sources of every crate and the documents.
fn citing_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = ["engine", "net", "simvenue", "tools", "bench", "tests", "testkit", "fuzz"]
        .iter()
        .flat_map(|d| sources(d))
        .collect();
    for dir in ["", "perf", "docs"] {
        let Ok(entries) = std::fs::read_dir(root().join(dir)) else { continue };
        files.extend(entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "md")));
    }
    files
}

/// The section numbers (`3`, `3.3`) of a document's `##`/`###` headings that start with one.
fn sections(doc: &str) -> Vec<String> {
    let text = std::fs::read_to_string(root().join("docs").join(doc)).unwrap_or_else(|e| panic!("docs/{doc}: {e}"));
    text.lines()
        .filter_map(|l| l.strip_prefix("### ").or_else(|| l.strip_prefix("## ")))
        .filter_map(|h| h.split_whitespace().next())
        .map(|n| n.trim_end_matches('.').to_owned())
        .filter(|n| n.chars().next().is_some_and(|c| c.is_ascii_digit()))
        .collect()
}

#[test]
fn cited_documents_are_in_the_repository() {
    let mut found = Vec::new();
    let known: Vec<(&str, Vec<String>)> = ["venues.md", "decisions.md"].into_iter().map(|d| (d, sections(d))).collect();
    for p in citing_files() {
        let text = std::fs::read_to_string(&p).unwrap_or_default();
        for (i, l) in text.lines().enumerate() {
            // Written in pieces so this line does not cite them itself.
            let outside = [concat!("../", "shared"), concat!("shared/", "spec"), concat!("interface-", "spec.md")];
            if outside.iter().any(|o| l.contains(o)) {
                found.push(format!("{}:{}: cites a document outside the repository", name(&p), i + 1));
            }
            for (doc, numbers) in &known {
                for (at, _) in l.match_indices(doc) {
                    let rest = l[at + doc.len()..].trim_start_matches(['`', ' ', '\'', ')']);
                    let Some(n) = rest.strip_prefix('§') else { continue };
                    let n: String = n.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
                    let n = n.trim_end_matches('.');
                    if !n.is_empty() && !numbers.iter().any(|s| s == n) {
                        found.push(format!("{}:{}: docs/{doc} has no §{n}", name(&p), i + 1));
                    }
                }
            }
        }
    }
    assert!(found.is_empty(), "citations that lead nowhere:\n{}", found.join("\n"));
}

/// A floor's rule: the files under `dir` never refer to any path starting with one of `never`.
///
/// A prefix is whole path segments as [`imports`] spells paths (`crate::...` for the file's own
/// crate, `rampart_net::...` for another): `crate::api` forbids `crate::api` and `crate::api::x`,
/// not `crate::apis`; `rampart_net` does not forbid `rampart_network`.
struct Boundary {
    dir: &'static str,
    never: &'static [&'static str],
    why: &'static str,
}

const BOUNDARIES: &[Boundary] = &[
    Boundary {
        dir: "engine/src",
        never: &["rampart_net", "rampart_testkit", "rampart_simvenue"],
        why: "the engine is sans-I/O and depends on nothing of ours (rampart-testkit is for its tests only)",
    },
    Boundary {
        dir: "simvenue/src",
        never: &["rampart_net", "rampart_testkit"],
        why: "the simulator is a test tool beside the service; it depends on the engine only",
    },
    Boundary {
        dir: "net/state/src",
        never: &["tokio::net", "std::fs", "std::net", "glommio", "hyper"],
        why: "the ground floor is what threads share in memory: no socket, no file, no executor",
    },
    Boundary {
        dir: "net/store/src/store",
        never: &["crate::text", "rampart_state::json"],
        why: "persistence renders no text: it writes the bytes `text::Texts` makes, through `Render`",
    },
    Boundary {
        dir: "net/store/src/store.rs",
        never: &["crate::text", "rampart_state::json"],
        why: "persistence renders no text: it writes the bytes `text::Texts` makes, through `Render`",
    },
    Boundary {
        dir: "net/store/src/db.rs",
        never: &["crate::text", "crate::store", "crate::storage", "crate::writer", "rampart_state::json"],
        why: "the connection type is the store's floor: SQL in, rows out, no record and no text",
    },
    Boundary {
        dir: "net/store/src/storage.rs",
        never: &["crate::text", "crate::writer", "rampart_state::json"],
        why: "persistence renders no text; the storage thread knows nothing of the writer",
    },
    Boundary {
        dir: "net/store/src/writer.rs",
        never: &["crate::text", "rampart_state::json"],
        why: "the writer hands the store the `Render` it was given: it renders no text",
    },
    Boundary {
        dir: "net/store/src/text",
        never: &["crate::db", "crate::storage", "crate::writer"],
        why: "texts are made of records; they never read or write storage",
    },
    Boundary {
        dir: "net/venue/src",
        never: &["hyper::server", "rampart_state::json"],
        why: "venue knows nothing of serving HTTP or of the API's JSON: it speaks the venues' protocols",
    },
    Boundary {
        dir: "net/src/alerts",
        never: &["crate::api", "hyper", "http_body_util"],
        why: "alert rules live apart from HTTP: the front turns their refusals into answers",
    },
    Boundary {
        dir: "net/src/site_alerts",
        never: &["crate::api", "hyper", "http_body_util"],
        why: "the site's alert kinds live apart from HTTP: the site's routes and the CLI call them",
    },
    Boundary {
        dir: "net/src/request.rs",
        never: &["crate", "hyper"],
        why: "request parsing shared by the API and the site stands on nothing of theirs",
    },
    Boundary {
        dir: "net/src/stream",
        never: &["crate::api", "hyper", "http_body_util", "tokio_tungstenite"],
        why: "streams' ops and state live apart from HTTP and sockets: the front's stream_api moves their frames",
    },
    Boundary {
        dir: "net/src/stream.rs",
        never: &["crate::api", "hyper", "http_body_util", "tokio_tungstenite"],
        why: "streams' ops and state live apart from HTTP and sockets: the front's stream_api moves their frames",
    },
    Boundary {
        dir: "net/src/board.rs",
        never: &["crate::api", "hyper"],
        why: "the board thread publishes for the front; it never calls it",
    },
];

/// A runtime crate and the crates of ours it may depend on: only floors below it. Cargo refuses
/// a circle; this holds the order, so no crate reaches up even where no circle would close.
const CRATE_FLOORS: &[(&str, &[&str])] = &[
    ("engine", &[]),
    ("net/state", &["rampart-engine"]),
    ("net/outbound", &[]),
    ("net/venue", &["rampart-engine", "rampart-state", "rampart-outbound"]),
    ("net/store", &["rampart-engine", "rampart-state"]),
    ("net/delivery", &["rampart-state", "rampart-store", "rampart-outbound"]),
    ("net/shard", &["rampart-engine", "rampart-state", "rampart-venue"]),
    ("net/cluster", &["rampart-engine", "rampart-state", "rampart-store", "rampart-delivery", "rampart-outbound"]),
    (
        "net",
        &[
            "rampart-engine",
            "rampart-state",
            "rampart-outbound",
            "rampart-venue",
            "rampart-store",
            "rampart-delivery",
            "rampart-shard",
            "rampart-cluster",
        ],
    ),
];

/// The `rampart-*` names under a manifest's `[dependencies]` (not its dev-dependencies).
fn rampart_dependencies(manifest: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_deps = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        let name = line.split(['.', '=', ' ']).next().unwrap_or("");
        if in_deps && name.starts_with("rampart-") {
            out.push(name.to_owned());
        }
    }
    out
}

#[test]
fn each_runtime_crate_depends_only_on_the_floors_below() {
    let mut found = Vec::new();
    for (dir, allowed) in CRATE_FLOORS {
        let manifest = read(&root().join(dir).join("Cargo.toml"));
        for dep in rampart_dependencies(&manifest) {
            if !allowed.contains(&dep.as_str()) {
                found.push(format!("{dir}/Cargo.toml depends on {dep}, which is not below it"));
            }
        }
    }
    assert!(found.is_empty(), "a crate reaches up a floor:\n{}", found.join("\n"));
}

/// Every crate of the workspace, by folder.
const WORKSPACE_CRATES: [&str; 14] = [
    "engine",
    "net/state",
    "net/outbound",
    "net/venue",
    "net/store",
    "net/delivery",
    "net/shard",
    "net/cluster",
    "net",
    "simvenue",
    "tools",
    "bench",
    "tests",
    "testkit",
];

/// The names a manifest's `section` (`[dependencies]`, `[dev-dependencies]`) declares.
fn declared(manifest: &str, section: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = line == section;
            continue;
        }
        let name = line.split(['.', '=', ' ']).next().unwrap_or("");
        if inside && !name.is_empty() && !name.starts_with('#') {
            out.push(name.to_owned());
        }
    }
    out
}

/// Whether `text` uses the crate `name` (a path through it, a `use` of it or one of its macros).
fn uses_crate(text: &str, name: &str) -> bool {
    let c = name.replace('-', "_");
    text.match_indices(&c).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = &text[at + c.len()..];
        !before.is_some_and(|b| b.is_alphanumeric() || b == '_')
            && (after.starts_with("::") || after.starts_with('!') || after.starts_with(';') || after.starts_with(" as"))
    })
}

/// Issue #60: no crate declares a dependency it never uses (`cargo machete`'s rule, read from
/// the sources): a product crate's `[dependencies]` are used by its `src` (or `build.rs`), its
/// `[dev-dependencies]` by its tests or test modules; the test and benchmark crates' by any of
/// their sources.
#[test]
fn every_declared_dependency_is_used() {
    let mut unused = Vec::new();
    for dir in WORKSPACE_CRATES {
        let manifest = read(&root().join(dir).join("Cargo.toml"));
        let text = |folders: &[&str]| -> String {
            folders.iter().flat_map(|f| sources(&format!("{dir}/{f}"))).map(|p| read(&p)).collect()
        };
        let everything = text(&["src", "tests", "benches", "build.rs"]);
        let product =
            if ["tests", "bench", "testkit"].contains(&dir) { everything.clone() } else { text(&["src", "build.rs"]) };
        for (section, used_in) in [("[dependencies]", &product), ("[dev-dependencies]", &everything)] {
            for dep in declared(&manifest, section) {
                if !uses_crate(used_in, &dep) {
                    unused.push(format!("{dir}/Cargo.toml {section} {dep}"));
                }
            }
        }
    }
    assert!(unused.is_empty(), "dependencies declared and never used:\n{}", unused.join("\n"));
}

/// ARCHITECTURE.md stays a map (issue #60: at most 40 000 bytes), and its dependency table
/// (`| crate | used by | why |`) names every outside crate each workspace crate declares, with
/// that crate among its users.
#[test]
fn the_map_is_short_and_names_every_dependency() {
    let doc = read(&root().join("ARCHITECTURE.md"));
    assert!(doc.len() <= 40_000, "ARCHITECTURE.md is {} bytes: keep the map within 40 000", doc.len());
    let rows: Vec<(String, String)> = doc
        .lines()
        .skip_while(|l| !l.starts_with("| crate | used by | why |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').collect();
            (cells.get(1).unwrap_or(&"").to_string(), cells.get(2).unwrap_or(&"").to_string())
        })
        .collect();
    let words = |cell: &str| -> Vec<String> {
        cell.split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_'))
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let mut missing = Vec::new();
    for dir in WORKSPACE_CRATES {
        let manifest = read(&root().join(dir).join("Cargo.toml"));
        let user = dir.rsplit('/').next().unwrap_or(dir);
        let mut deps = declared(&manifest, "[dependencies]");
        if ["bench", "tests"].contains(&dir) {
            deps.extend(declared(&manifest, "[dev-dependencies]"));
        }
        for dep in deps.into_iter().filter(|d| d != "rampart" && !d.starts_with("rampart-")) {
            let listed = rows.iter().any(|(krates, users)| {
                words(krates).contains(&dep)
                    && (users.contains("every runtime crate") || words(users).iter().any(|u| u == user))
            });
            if !listed {
                missing.push(format!("{dep} (used by {dir})"));
            }
        }
    }
    assert!(missing.is_empty(), "ARCHITECTURE.md's dependency table leaves out:\n{}", missing.join("\n"));
}

#[test]
fn the_crate_floors_name_every_runtime_crate() {
    let listed: BTreeSet<&str> = CRATE_FLOORS.iter().map(|(d, _)| *d).collect();
    for dir in RUNTIME {
        let krate = dir.strip_suffix("/src").unwrap_or(dir);
        assert!(listed.contains(krate), "{krate} has no row in CRATE_FLOORS");
    }
}

/// ARCHITECTURE.md's table of the floors (`| floor | crate folder | may import |`) says what
/// [`CRATE_FLOORS`] says, and each crate it may import is on a lower floor.
#[test]
fn the_architecture_crate_table_matches_the_crate_floors() {
    let doc = read(&root().join("ARCHITECTURE.md"));
    let rows: Vec<(u32, String, BTreeSet<String>)> = doc
        .lines()
        .skip_while(|l| !l.starts_with("| floor | crate folder | may import |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(|c| c.trim().trim_matches('`')).collect();
            let floor = cells[1].parse().unwrap_or_else(|_| panic!("ARCHITECTURE.md: no floor number in {l}"));
            let may = cells[3].split(',').map(|d| d.trim().trim_matches('`').to_owned());
            (floor, cells[2].to_owned(), may.filter(|d| d.starts_with("rampart-")).collect())
        })
        .collect();
    let table: BTreeMap<&str, BTreeSet<String>> =
        rows.iter().map(|(_, dir, may)| (dir.as_str(), may.clone())).collect();
    let floors: BTreeMap<&str, BTreeSet<String>> =
        CRATE_FLOORS.iter().map(|(dir, may)| (*dir, may.iter().map(|d| d.to_string()).collect())).collect();
    assert!(
        rows.len() == table.len() && table == floors,
        "ARCHITECTURE.md's floors table (`| floor | crate folder | may import |`) must list exactly the crates of \
         CRATE_FLOORS, once each, with the same dependencies:\n  table:        {table:?}\n  CRATE_FLOORS: {floors:?}"
    );
    let floor_of =
        |krate: &str| rows.iter().find(|(_, dir, _)| dir.rsplit('/').next() == krate.strip_prefix("rampart-"));
    for (floor, dir, may) in &rows {
        for krate in may {
            assert!(
                floor_of(krate).is_some_and(|(f, _, _)| f < floor),
                "ARCHITECTURE.md: {dir} (floor {floor}) may import {krate}, which is not on a lower floor"
            );
        }
    }
}

#[test]
fn every_floor_keeps_its_boundary() {
    let mut found = Vec::new();
    for rule in BOUNDARIES {
        let files = sources(rule.dir);
        if files.is_empty() {
            found.push(format!("{}: no sources (did the floor move?)", rule.dir));
        }
        for p in files {
            for (line, path) in imports(&p) {
                if rule.never.iter().any(|prefix| starts_with_segments(&path, prefix)) {
                    found.push(format!("{}:{line}: refers to {path} (never: {})", name(&p), rule.why));
                }
            }
        }
    }
    assert!(found.is_empty(), "a floor refers to what it must not:\n{}", found.join("\n"));
}

/// Whether `path` is `prefix` or lies under it, compared segment by segment.
fn starts_with_segments(path: &str, prefix: &str) -> bool {
    let mut path = path.split("::");
    prefix.split("::").all(|p| path.next() == Some(p))
}

/// Every module path the non-test code of a Rust file refers to, with its line: each path of its
/// `use` declarations (groups expanded: `use a::{b, c::{d}}` gives `a::b` and `a::c::d`; an alias
/// gives the path it names) and each path written in its code that starts at `crate::`, `self::`,
/// `super::`, a `rampart_*` crate or a module the file declares. `self::` and `super::` are resolved
/// to `crate::` from the file's place in its crate ([`module_of`]); comments and literals are not read.
fn imports(path: &Path) -> Vec<(usize, String)> {
    imports_of(&read(path), &module_of(path))
}

/// The module a source file is, as segments from `crate`: `src/lib.rs`, `src/main.rs` and
/// `src/bin/x.rs` are `crate`; `src/a.rs` and `src/a/mod.rs` are `crate::a`.
fn module_of(path: &Path) -> Vec<String> {
    let parts: Vec<String> = path.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    let mut module = vec!["crate".to_owned()];
    let Some(src) = parts.iter().rposition(|c| c == "src") else { return module };
    let mut rest: Vec<String> = parts[src + 1..].iter().map(|c| c.trim_end_matches(".rs").to_owned()).collect();
    if rest.first().is_some_and(|c| c == "bin") {
        // `src/bin/x.rs` and `src/bin/x/main.rs` are the roots of binary crates.
        rest.drain(..rest.len().min(2));
    }
    if rest.last().is_some_and(|c| c == "mod") || (rest.len() == 1 && (rest[0] == "lib" || rest[0] == "main")) {
        rest.pop();
    }
    module.extend(rest);
    module
}

/// A token of masked code: a word (identifier, keyword or number), `::`, or one other character.
#[derive(Debug, PartialEq)]
enum Token {
    Word(String),
    PathSep,
    Punct(char),
}

/// The tokens of masked, non-test code, each with its line (1-based); `lines[i]` is line `i + 1`.
fn tokens(lines: &[String]) -> Vec<(usize, Token)> {
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let c: Vec<char> = l.chars().collect();
        let mut j = 0;
        while j < c.len() {
            if c[j].is_alphanumeric() || c[j] == '_' {
                let end = (j..c.len()).find(|&k| !(c[k].is_alphanumeric() || c[k] == '_')).unwrap_or(c.len());
                out.push((i + 1, Token::Word(c[j..end].iter().collect())));
                j = end;
            } else if c[j] == ':' && c.get(j + 1) == Some(&':') {
                out.push((i + 1, Token::PathSep));
                j += 2;
            } else {
                if !c[j].is_whitespace() {
                    out.push((i + 1, Token::Punct(c[j])));
                }
                j += 1;
            }
        }
    }
    out
}

/// The word a token is, if it is one.
fn word(t: Option<&(usize, Token)>) -> Option<&str> {
    match t {
        Some((_, Token::Word(w))) => Some(w),
        _ => None,
    }
}

/// Whether there is a token and it is `want`.
fn is(t: Option<&(usize, Token)>, want: &Token) -> bool {
    t.is_some_and(|(_, x)| x == want)
}

/// [`imports`] of a file's text, the file being `module` (segments from `crate`).
fn imports_of(text: &str, module: &[String]) -> Vec<(usize, String)> {
    let toks = tokens(&non_test(text).1);
    let declared = declared_modules(&toks, module);
    let mut out = Vec::new();
    let mut scope = Scope::new(module);
    let mut i = 0;
    while i < toks.len() {
        scope.step(&toks, i);
        let before = |k: usize| i.checked_sub(k).and_then(|j| toks.get(j));
        // `a::b` after `x::` or `Vec::<u8>::`, or the module of a `pub(in crate::a)`: not a reference.
        let skipped = (is(before(1), &Token::PathSep)
            && matches!(before(2), Some((_, Token::Word(_) | Token::Punct('>')))))
            || (word(before(1)) == Some("in") && is(before(2), &Token::Punct('(')));
        match word(toks.get(i)) {
            Some("use") => {
                i += 1;
                let mut trees = Vec::new();
                use_tree(&toks, &mut i, Vec::new(), &mut trees);
                let here = scope.module();
                out.extend(trees.into_iter().map(|(line, segs)| (line, resolve(&segs, &here, &declared))));
            }
            Some(w) if !skipped && is(toks.get(i + 1), &Token::PathSep) && word(toks.get(i + 2)).is_some() => {
                let here = scope.module();
                let mut child = here.clone();
                child.push(w.to_owned());
                let tracked = ["crate", "self", "super"].contains(&w)
                    || w.starts_with("rampart_")
                    || declared.contains(&child.join("::"));
                let line = toks[i].0;
                let mut segs = vec![w.to_owned()];
                i += 1;
                while is(toks.get(i), &Token::PathSep) {
                    let Some(next) = word(toks.get(i + 1)) else { break };
                    segs.push(next.to_owned());
                    i += 2;
                }
                if tracked {
                    out.push((line, resolve(&segs, &here, &declared)));
                }
            }
            _ => i += 1,
        }
    }
    out
}

/// One use tree from `toks[*i]` on, under `prefix`; pushes each leaf path with its line and leaves
/// `*i` after the tree. `use a::{self, b as c, d::*}` gives `a::self`, `a::b` and `a::d::*`.
fn use_tree(toks: &[(usize, Token)], i: &mut usize, mut prefix: Vec<String>, out: &mut Vec<(usize, Vec<String>)>) {
    while let Some((line, t)) = toks.get(*i) {
        match t {
            Token::PathSep => *i += 1,
            Token::Punct('{') => {
                *i += 1;
                while let Some((_, t)) = toks.get(*i) {
                    let before = *i;
                    match t {
                        Token::Punct('}') => {
                            *i += 1;
                            break;
                        }
                        Token::Punct(',') => *i += 1,
                        _ => use_tree(toks, i, prefix.clone(), out),
                    }
                    if *i == before {
                        *i += 1; // Not a use tree (a macro's `$x`): step over it.
                    }
                }
                return;
            }
            Token::Punct('*') => {
                prefix.push("*".to_owned());
                out.push((*line, prefix));
                *i += 1;
                return;
            }
            Token::Word(w) => {
                prefix.push(w.clone());
                *i += 1;
                if is(toks.get(*i), &Token::PathSep) {
                    continue;
                }
                if word(toks.get(*i)) == Some("as") {
                    *i += 2;
                }
                out.push((*line, prefix));
                return;
            }
            Token::Punct(_) => return,
        }
    }
}

/// `segs` as a path from `crate` when it starts at `crate`, `self`, `super` or a module declared
/// in the file; otherwise (another crate, `std`) as written. A `self` inside (`a::{self}`) is `a`.
fn resolve(segs: &[String], module: &[String], declared: &BTreeSet<String>) -> String {
    let first = segs.first().map(String::as_str).unwrap_or("");
    let tail = |from: usize| segs[from..].iter().filter(|s| *s != "self").cloned();
    let mut child = module.to_vec();
    child.push(first.to_owned());
    let full: Vec<String> = match first {
        "crate" => tail(0).collect(),
        "self" => module.iter().cloned().chain(tail(1)).collect(),
        "super" => {
            let ups = segs.iter().take_while(|s| *s == "super").count();
            if ups >= module.len() {
                return segs.join("::"); // Above the crate: left as written.
            }
            module[..module.len() - ups].iter().cloned().chain(tail(ups)).collect()
        }
        _ if declared.contains(&child.join("::")) => module.iter().cloned().chain(tail(0)).collect(),
        _ => tail(0).collect(),
    };
    full.join("::")
}

/// The module paths (`crate::a::b`) the file declares with `mod b;` or `mod b { .. }`.
fn declared_modules(toks: &[(usize, Token)], module: &[String]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut scope = Scope::new(module);
    for i in 0..toks.len() {
        scope.step(toks, i);
        if let (Some("mod"), Some(name)) = (word(toks.get(i)), word(toks.get(i + 1))) {
            let mut m = scope.module();
            m.push(name.to_owned());
            out.insert(m.join("::"));
        }
    }
    out
}

/// Where a walk over a file's tokens is: the file's module and the inline `mod x { .. }` blocks
/// it is inside of, by brace depth.
struct Scope {
    file: Vec<String>,
    depth: usize,
    inline: Vec<(String, usize)>,
}

impl Scope {
    fn new(file: &[String]) -> Self {
        Scope { file: file.to_vec(), depth: 0, inline: Vec::new() }
    }

    /// Takes `toks[i]` into account: an opening brace (a `mod x`'s opens `x`), a closing one.
    fn step(&mut self, toks: &[(usize, Token)], i: usize) {
        match toks.get(i) {
            Some((_, Token::Punct('{'))) => {
                self.depth += 1;
                if let (Some(name), Some("mod")) =
                    (word(i.checked_sub(1).and_then(|k| toks.get(k))), word(i.checked_sub(2).and_then(|k| toks.get(k))))
                {
                    self.inline.push((name.to_owned(), self.depth));
                }
            }
            Some((_, Token::Punct('}'))) => {
                if self.inline.last().is_some_and(|(_, d)| *d == self.depth) {
                    self.inline.pop();
                }
                self.depth = self.depth.saturating_sub(1);
            }
            _ => {}
        }
    }

    fn module(&self) -> Vec<String> {
        self.file.iter().cloned().chain(self.inline.iter().map(|(n, _)| n.clone())).collect()
    }
}

/// The paths [`imports_of`] finds in `text`, a file that is module `module` (`crate::a::b`).
fn paths_in(text: &str, module: &str) -> Vec<String> {
    let module: Vec<String> = module.split("::").map(str::to_owned).collect();
    imports_of(text, &module).into_iter().map(|(_, p)| p).collect()
}

/// Lines a product source file may have (tests and fixtures aside): past it, a file holds more
/// than one concept (issue #46).
const SOURCE_FILE_LINES_MAX: usize = 1_000;

/// The product's source folders: every crate's `src`, tests and fixtures aside.
const PRODUCT_SOURCES: [&str; 5] = ["engine/src", "net", "tools/src", "simvenue/src", "bench/src"];

#[test]
fn no_product_source_file_is_over_a_thousand_lines() {
    let long: Vec<String> = PRODUCT_SOURCES
        .iter()
        .flat_map(|d| sources(d))
        .filter(|p| !p.components().any(|c| c.as_os_str() == "tests" || c.as_os_str() == "fixtures"))
        .map(|p| (read(&p).lines().count(), p))
        .filter(|(n, _)| *n > SOURCE_FILE_LINES_MAX)
        .map(|(n, p)| format!("{}: {n} lines", name(&p)))
        .collect();
    assert!(long.is_empty(), "files over {SOURCE_FILE_LINES_MAX} lines; split them by concept:\n{}", long.join("\n"));
}

/// The front's resources: the field of `Front` that answers a family of routes, and the struct
/// (in its own file) that field is. `Front` routes; each resource holds only what it reads.
const FRONT_RESOURCES: [(&str, &str, &str); 7] = [
    ("market", "market_api.rs", "MarketApi"),
    ("board", "board_api.rs", "BoardApi"),
    ("alerts", "alerts_api.rs", "AlertsApi"),
    ("webhooks", "webhooks_api.rs", "WebhooksApi"),
    ("health", "health.rs", "HealthApi"),
    ("site", "site/routes.rs", "SiteApi"),
    ("streams", "stream_api.rs", "StreamApi"),
];

/// A route is followed to its handler by names alone: every arm of `Front::handle` hands its
/// route to a resource field (or refuses it), each resource is a struct of its own file, and no
/// handler file reaches into the front with `use super::*` or adds methods to `Front` (only the
/// router, `front.rs`, and the site's router in `site/routes.rs` do).
#[test]
fn each_route_is_answered_by_a_resource_that_holds_what_it_reads() {
    let front = root().join("net/src/api/front.rs");
    let lines = code_lines(&front);
    let start = lines.iter().position(|l| l.contains("async fn handle(")).expect("Front::handle");
    let mut bad = Vec::new();
    for (i, l) in lines.iter().enumerate().skip(start) {
        if l.starts_with("    }") {
            break;
        }
        let Some((head, answer)) = l.split_once("=>") else { continue };
        if !head.contains("Route::") {
            continue;
        }
        let handed = FRONT_RESOURCES.iter().any(|(field, _, _)| answer.contains(&format!("self.{field}.")));
        let later = lines[i + 1..]
            .iter()
            .take(3)
            .any(|n| FRONT_RESOURCES.iter().any(|(f, _, _)| n.contains(&format!("self.{f}."))));
        if !(handed || later || answer.contains("error(StatusCode::NOT_FOUND")) {
            bad.push(format!("front.rs:{}: {}", i + 1, l.trim()));
        }
    }
    let text = lines.join("\n");
    for (field, file, ty) in FRONT_RESOURCES {
        let module = file.trim_end_matches(".rs").replace('/', "::");
        if !text.contains(&format!("    {field}: ")) || !text.contains(&format!("{module}::{ty}")) {
            bad.push(format!("Front has no field `{field}` of type `{module}::{ty}`"));
        }
        let code = code_lines(&root().join("net/src/api/front").join(file)).join("\n");
        if !code.contains(&format!("pub struct {ty} {{")) {
            bad.push(format!("{file} does not declare `pub struct {ty}`"));
        }
    }
    for p in sources("net/src/api/front") {
        let code = code_lines(&p);
        let shown = name(&p);
        for (i, l) in code.iter().enumerate() {
            if l.trim() == "use super::*;" {
                bad.push(format!("{shown}:{}: `use super::*` (name what is used)", i + 1));
            }
            if l.starts_with("impl Front {") && !shown.ends_with("site/routes.rs") {
                bad.push(format!("{shown}:{}: methods on `Front` outside the router", i + 1));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn test_items_are_skipped_and_lines_keep_their_numbers() {
    let text = r##"fn a() {}
#[cfg(test)]
fn helper() -> &'static str {
    let _ = ('{', '"', "}}}", r#"{"}"#); // }
    /* } */ "{"
}
fn b() {}
#[cfg(test)]
mod simulation;
#[cfg(test)]
#[derive(Debug)]
struct Probe { a: u8 }
#[cfg(test)]
mod tests {
    fn t<'a>(x: &'a str) -> &'a str { x }
}
fn c() {}
"##;
    let (lines, _) = non_test(text);
    let kept: Vec<(usize, &str)> =
        lines.iter().enumerate().filter(|(_, l)| !l.is_empty()).map(|(i, l)| (i + 1, l.as_str())).collect();
    assert_eq!(kept, [(1, "fn a() {}"), (7, "fn b() {}"), (17, "fn c() {}")]);
}

#[test]
fn the_mask_blanks_comments_and_literals_only() {
    let text = "let s = \"crate::x // {\"; // crate::y\nlet c = '}'; /* a /* b */ c */ f::<'a>(b'{', r#\"\"}\"#);";
    // Literals keep their delimiters, comments go whole; the lengths are those of what is hidden.
    let blank = |n: usize| " ".repeat(n);
    let want = format!(
        "let s = \"{}\"; {}\nlet c = ' '; {} f::<'a>(b' ', r#\"{}\"#);",
        blank("crate::x // {".len()),
        blank("// crate::y".len()),
        blank("/* a /* b */ c */".len()),
        blank("\"}".len())
    );
    assert_eq!(mask(text), want);
}

#[test]
fn imports_expand_use_trees() {
    let text = "use a::{b, c::{d, e as f}};\npub use crate::x::Y;\npub(crate) use std::io::{self, Write};\nuse g::*;\n";
    assert_eq!(
        paths_in(text, "crate"),
        ["a::b", "a::c::d", "a::c::e", "crate::x::Y", "std::io", "std::io::Write", "g::*"]
    );
}

#[test]
fn imports_of_a_multi_line_use_keep_each_leaf_line() {
    let text = "use crate::feed::{\n    int,\n    Row as R,\n};\n";
    let module = vec!["crate".to_owned()];
    assert_eq!(imports_of(text, &module), [(2, "crate::feed::int".to_owned()), (3, "crate::feed::Row".to_owned())]);
}

#[test]
fn imports_find_paths_written_in_code() {
    let text = "fn f(x: crate::a::B) -> rampart_net::x::Y {\n    let v = crate::a::b::C::new();\n    \
                ::rampart_engine::fixed::Price(1);\n    Vec::<u8>::new();\n    std::mem::take(x)\n}\n\
                pub(in crate::a) fn g() {}\n";
    assert_eq!(
        paths_in(text, "crate"),
        ["crate::a::B", "rampart_net::x::Y", "crate::a::b::C::new", "rampart_engine::fixed::Price"]
    );
}

#[test]
fn imports_skip_comments_literals_and_test_items() {
    let text = r#"// use crate::hidden;
/// See crate::hidden::Doc.
const S: &str = "crate::hidden::Str";
/* rampart_net::hidden */
#[cfg(test)]
mod tests {
    use crate::forbidden;
    fn f() { rampart_testkit::x(); }
}
use crate::seen;
"#;
    let module = vec!["crate".to_owned()];
    assert_eq!(imports_of(text, &module), [(10, "crate::seen".to_owned())]);
}

#[test]
fn imports_resolve_self_super_and_declared_modules() {
    let text = "mod c;\nuse super::x;\nuse super::{self, y};\nuse self::c::D;\nuse c::E;\n\
                fn f() { super::super::api::K; c::g(); }\nmod inner {\n    use super::z;\n}\n";
    assert_eq!(
        paths_in(text, "crate::a::b"),
        [
            "crate::a::x",
            "crate::a",
            "crate::a::y",
            "crate::a::b::c::D",
            "crate::a::b::c::E",
            "crate::api::K",
            "crate::a::b::c::g",
            "crate::a::b::z"
        ]
    );
    // Above the crate root a `super` cannot be resolved: it stays as written.
    assert_eq!(paths_in("use super::q;", "crate"), ["super::q"]);
}

#[test]
fn a_file_knows_its_module() {
    let m = |p: &str| module_of(Path::new(p)).join("::");
    assert_eq!(m("net/src/lib.rs"), "crate");
    assert_eq!(m("tools/src/main.rs"), "crate");
    assert_eq!(m("tools/src/bin/sim.rs"), "crate");
    assert_eq!(m("net/src/a.rs"), "crate::a");
    assert_eq!(m("net/src/a/mod.rs"), "crate::a");
    assert_eq!(m("net/src/a/b.rs"), "crate::a::b");
    assert_eq!(m("net/src/a/lib.rs"), "crate::a::lib");
}

#[test]
fn boundary_prefixes_match_whole_segments() {
    assert!(starts_with_segments("crate::api", "crate::api"));
    assert!(starts_with_segments("crate::api::x::Y", "crate::api"));
    assert!(!starts_with_segments("crate::apis", "crate::api"));
    assert!(!starts_with_segments("crate", "crate::api"));
    assert!(starts_with_segments("rampart_net::x", "rampart_net"));
    assert!(!starts_with_segments("rampart_engine::x", "rampart_"));
    assert!(!starts_with_segments("rampart_network", "rampart_net"));
}

/// The site's scripts (every `.js` file under `net/site/` but the vendored library under
/// `net/site/vendor/`), held to the house rules of a small web app without a build step
/// (style.md 27, 20): each says what it is in its first line, fits in 400 lines, its functions in
/// 70; none builds markup from a string; every page module is routed and every import resolves.
mod site_scripts {
    use std::path::{Path, PathBuf};

    use super::{read, root};

    /// Lines a script of the site may hold.
    const SCRIPT_LINES_MAX: usize = 400;
    /// Lines a function of the site may span (style.md 20: TigerBeetle holds 70).
    const JS_FUNCTION_LINES_MAX: usize = 70;
    /// Words the opening comment of a script has at least.
    const OPENING_WORDS_MIN: usize = 4;
    /// The site's folder, and the vendored code under it that is not ours.
    const SITE: &str = "net/site";
    const VENDOR: &str = "net/site/vendor";
    /// The page modules (one per route) and the module that routes to them.
    const PAGES: &str = "net/site/js/pages";
    const ROUTER: &str = "net/site/js/router.js";
    /// What builds markup from a string. The site builds DOM nodes and sets `textContent` only,
    /// so server data can never become markup.
    const HTML_SINKS: [&str; 4] = ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write"];

    /// Every script of the site, sorted.
    fn scripts() -> Vec<PathBuf> {
        let mut out = Vec::new();
        let mut stack = vec![root().join(SITE)];
        while let Some(d) = stack.pop() {
            let entries = std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
            for p in entries.flatten().map(|e| e.path()) {
                if p.is_dir() && p != root().join(VENDOR) {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "js") {
                    out.push(p);
                }
            }
        }
        out.sort();
        assert!(out.len() > 1, "the site's scripts are found under {SITE}");
        out
    }

    /// `path` relative to the root, as a failure message names it.
    fn shown(path: &Path) -> String {
        path.strip_prefix(root()).unwrap_or(path).display().to_string()
    }

    /// The 1-based line of the character at `at`.
    fn line_at(chars: &[char], at: usize) -> usize {
        1 + chars[..at].iter().filter(|&&c| c == '\n').count()
    }

    /// `text` with every comment (`//`, `/* */`) turned into spaces and, if `strings`, the inside
    /// of every string and template literal too (its quotes kept); newlines kept, so an offset or
    /// a line number in the result is one in `text`. Regular-expression literals are read as
    /// code: a quote, `//` or an unbalanced brace in one would mislead it (the site has none).
    fn mask(text: &str, strings: bool) -> Vec<char> {
        #[derive(PartialEq)]
        enum In {
            Code,
            Line,
            Block,
            Quoted(char),
        }
        let chars: Vec<char> = text.chars().collect();
        let mut out = chars.clone();
        let mut state = In::Code;
        let mut i = 0;
        let blank = |out: &mut Vec<char>, i: usize| {
            if out[i] != '\n' {
                out[i] = ' ';
            }
        };
        while i < chars.len() {
            let (c, next) = (chars[i], chars.get(i + 1).copied());
            match state {
                In::Code if c == '/' && next == Some('/') => state = In::Line,
                In::Code if c == '/' && next == Some('*') => {
                    state = In::Block;
                    blank(&mut out, i);
                    blank(&mut out, i + 1);
                    i += 2;
                    continue;
                }
                In::Code if matches!(c, '\'' | '"' | '`') => {
                    state = In::Quoted(c);
                    i += 1;
                    continue;
                }
                In::Code => {}
                In::Line if c == '\n' => state = In::Code,
                In::Block if c == '*' && next == Some('/') => {
                    blank(&mut out, i);
                    blank(&mut out, i + 1);
                    state = In::Code;
                    i += 2;
                    continue;
                }
                In::Quoted(_) if c == '\\' => {
                    if strings {
                        blank(&mut out, i);
                        if i + 1 < chars.len() {
                            blank(&mut out, i + 1);
                        }
                    }
                    i += 2;
                    continue;
                }
                In::Quoted(q) if c == q || (c == '\n' && q != '`') => state = In::Code,
                In::Quoted(_) if !strings => {}
                In::Line | In::Block | In::Quoted(_) => {}
            }
            if matches!(state, In::Line | In::Block) || (strings && matches!(state, In::Quoted(_))) {
                blank(&mut out, i);
            }
            i += 1;
        }
        out
    }

    /// The index of the bracket that closes the one at `open` (`(` or `{`), in masked text.
    fn closing(code: &[char], open: usize) -> Option<usize> {
        let (o, c) = (code[open], if code[open] == '(' { ')' } else { '}' });
        let mut depth = 0usize;
        for (i, &ch) in code.iter().enumerate().skip(open) {
            if ch == o {
                depth += 1;
            } else if ch == c {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
        }
        None
    }

    fn is_ident(c: char) -> bool {
        c.is_alphanumeric() || c == '_' || c == '$'
    }

    /// Whether `word` stands at `at` in `code` as a whole word.
    fn word_at(code: &[char], at: usize, word: &str) -> bool {
        let w: Vec<char> = word.chars().collect();
        code.get(at..at + w.len()) == Some(&w[..])
            && (at == 0 || !is_ident(code[at - 1]))
            && code.get(at + w.len()).is_none_or(|&c| !is_ident(c))
    }

    fn skip_space(code: &[char], mut at: usize) -> usize {
        while code.get(at).is_some_and(|c| c.is_whitespace()) {
            at += 1;
        }
        at
    }

    /// The functions of a script: (line, name, lines spanned). It counts a `function` (declared or
    /// an expression; the name is `anonymous` without one) from the line of its keyword, and an
    /// arrow function with a block body from the line of its `=>`, through the line of the `}`
    /// that closes the body, counting `{` and `}` outside comments and literals ([`mask`]). A
    /// function's lines include those of the functions inside it. Class methods are not counted
    /// (the site's are one-line constructors), nor arrows with an expression body.
    fn functions(text: &str) -> Vec<(usize, String, usize)> {
        let code = mask(text, true);
        let mut out = Vec::new();
        for at in 0..code.len() {
            let (body, name) = if word_at(&code, at, "function") {
                let mut i = skip_space(&code, at + "function".len());
                if code.get(i) == Some(&'*') {
                    i = skip_space(&code, i + 1);
                }
                let name: String = code[i..].iter().take_while(|&&c| is_ident(c)).collect();
                let Some(open) = code[i..].iter().position(|&c| c == '(').map(|p| p + i) else { continue };
                let Some(close) = closing(&code, open) else { continue };
                (skip_space(&code, close + 1), if name.is_empty() { "anonymous".to_owned() } else { name })
            } else if code[at] == '=' && code.get(at + 1) == Some(&'>') {
                (skip_space(&code, at + 2), "arrow function".to_owned())
            } else {
                continue;
            };
            if code.get(body) != Some(&'{') {
                continue;
            }
            let Some(end) = closing(&code, body) else { continue };
            let first = line_at(&code, at);
            out.push((first, name, line_at(&code, end) - first + 1));
        }
        out
    }

    /// The module specifiers a script imports: (line, specifier) of each `import ... from '...'`,
    /// `export ... from '...'`, `import '...'` and `import('...')` with a literal.
    fn imports(text: &str) -> Vec<(usize, String)> {
        let code = mask(text, true);
        let kept = mask(text, false);
        let mut out = Vec::new();
        for at in 0..code.len() {
            let after = if word_at(&code, at, "from") {
                at + 4
            } else if word_at(&code, at, "import") {
                let i = skip_space(&code, at + 6);
                if code.get(i) == Some(&'(') {
                    i + 1
                } else {
                    i
                }
            } else {
                continue;
            };
            let quote = skip_space(&code, after);
            let Some(&q) = code.get(quote).filter(|c| matches!(c, '\'' | '"')) else { continue };
            let Some(len) = code[quote + 1..].iter().position(|&c| c == q) else { continue };
            let spec: String = kept[quote + 1..quote + 1 + len].iter().collect();
            out.push((line_at(&code, at), spec));
        }
        out
    }

    /// The file `spec` names, imported from `from`: `./` and `../` relative to the importing file.
    /// `None` for a specifier a browser cannot load without an import map (a bare name).
    fn resolve(from: &Path, spec: &str) -> Option<PathBuf> {
        if !spec.starts_with("./") && !spec.starts_with("../") {
            return None;
        }
        let mut path = from.parent()?.to_path_buf();
        for seg in spec.split('/') {
            match seg {
                "." => {}
                ".." => {
                    path.pop();
                }
                s => path.push(s),
            }
        }
        Some(path)
    }

    #[test]
    fn every_script_opens_with_a_comment_saying_what_it_is() {
        let mut bad = Vec::new();
        for path in scripts() {
            let text = read(&path);
            let first = text.lines().next().unwrap_or("").trim();
            let words = first
                .strip_prefix("//")
                .or_else(|| first.strip_prefix("/*"))
                .map(|rest| rest.trim_end().trim_end_matches("*/").split_whitespace().count());
            if words.is_none_or(|n| n < OPENING_WORDS_MIN) {
                bad.push(format!("{}:1: opens with {first:?}, not a comment saying what the file is", shown(&path)));
            }
        }
        assert!(bad.is_empty(), "every script opens with a comment line saying what it is:\n{}", bad.join("\n"));
    }

    #[test]
    fn every_script_fits_in_400_lines() {
        let mut bad = Vec::new();
        for path in scripts() {
            let n = read(&path).lines().count();
            if n > SCRIPT_LINES_MAX {
                bad.push(format!("{}:{n}: {n} lines; split it by concept (style.md 25)", shown(&path)));
            }
        }
        assert!(bad.is_empty(), "a script holds at most {SCRIPT_LINES_MAX} lines:\n{}", bad.join("\n"));
    }

    #[test]
    fn every_function_fits_on_a_screen() {
        let mut bad = Vec::new();
        for path in scripts() {
            for (line, name, n) in functions(&read(&path)) {
                if n > JS_FUNCTION_LINES_MAX {
                    bad.push(format!("{}:{line}: `{name}` spans {n} lines; split it into named helpers", shown(&path)));
                }
            }
        }
        assert!(
            bad.is_empty(),
            "a function of the site spans at most {JS_FUNCTION_LINES_MAX} lines:\n{}",
            bad.join("\n")
        );
    }

    #[test]
    fn no_script_builds_markup_from_a_string() {
        let mut bad = Vec::new();
        for path in scripts() {
            let code: String = mask(&read(&path), false).into_iter().collect();
            for (i, line) in code.lines().enumerate() {
                for sink in HTML_SINKS.iter().filter(|s| line.contains(*s)) {
                    bad.push(format!("{}:{}: `{sink}`; build nodes with h() and set textContent", shown(&path), i + 1));
                }
            }
        }
        assert!(bad.is_empty(), "no script parses a string as markup:\n{}", bad.join("\n"));
    }

    #[test]
    fn every_import_resolves_to_a_script_of_the_site() {
        let site = root().join(SITE);
        let mut bad = Vec::new();
        for path in scripts() {
            for (line, spec) in imports(&read(&path)) {
                let at = format!("{}:{line}: import '{spec}'", shown(&path));
                match resolve(&path, &spec) {
                    None => {
                        bad.push(format!("{at}: not a relative path (a browser needs an import map for a bare name)"))
                    }
                    Some(_) if !spec.ends_with(".js") => bad.push(format!("{at}: name the file, with its .js")),
                    Some(p) if !p.starts_with(&site) || !p.is_file() => {
                        bad.push(format!("{at}: no such file under {SITE}"))
                    }
                    Some(_) => {}
                }
            }
        }
        assert!(bad.is_empty(), "every import names a file of the site:\n{}", bad.join("\n"));
    }

    #[test]
    fn every_page_module_is_routed() {
        let router = root().join(ROUTER);
        let routed: Vec<PathBuf> = imports(&read(&router)).iter().filter_map(|(_, s)| resolve(&router, s)).collect();
        let pages: Vec<PathBuf> = scripts().into_iter().filter(|p| p.starts_with(root().join(PAGES))).collect();
        assert!(!pages.is_empty(), "the page modules are found under {PAGES}");
        let unrouted: Vec<String> = pages
            .iter()
            .filter(|p| !routed.contains(p))
            .map(|p| format!("{}:1: a page module that {ROUTER} does not import", shown(p)))
            .collect();
        assert!(unrouted.is_empty(), "every page module is routed:\n{}", unrouted.join("\n"));
    }

    #[test]
    fn the_scans_read_code_not_comments_or_strings() {
        let js = "// function commented() {\nconst s = '{ => {';\nfunction f(a, b) {\n  const g = (x) => {\n    return `}${x}`;\n  };\n  /* } */\n}\nconst e = (y) => y + 1;\nexport const k = function () {\n};\n";
        assert_eq!(
            functions(js),
            [(3, "f".to_owned(), 6), (4, "arrow function".to_owned(), 3), (10, "anonymous".to_owned(), 2)]
        );
        let imported = "import { a } from './a.js';\nimport './b.js';\nexport { c } from \"../c.js\";\n// import { d } from './d.js';\nconst t = 'from here';\nimport('./e.js');\n";
        let specs = imports(imported);
        let specs: Vec<(usize, &str)> = specs.iter().map(|(l, s)| (*l, s.as_str())).collect();
        assert_eq!(specs, [(1, "./a.js"), (2, "./b.js"), (3, "../c.js"), (6, "./e.js")]);
        let from = Path::new("/s/js/pages/pair.js");
        assert_eq!(resolve(from, "../chart.js"), Some(PathBuf::from("/s/js/chart.js")));
        assert_eq!(resolve(from, "./x.js"), Some(PathBuf::from("/s/js/pages/x.js")));
        assert_eq!(resolve(from, "lodash"), None);
        let sinks: String = mask("// innerHTML\nel.textContent = 'innerHTML';\n", false).into_iter().collect();
        assert!(!sinks.lines().next().unwrap_or("").contains("innerHTML") && sinks.contains("'innerHTML'"));
    }
}
