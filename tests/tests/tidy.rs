//! House rules that erode quietly, checked over the workspace's sources (rust-analyzer's `tidy`
//! tests are the model): library crates return typed errors, per-venue tables are sized by
//! `Venue::COUNT`, a constant name means one value across crates, the service reads time from its
//! one clock, and a long function in the runtime says why it is long.
//!
//! Only the non-test part of each file is read: scanning stops at its `#[cfg(test)]` line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Lines a runtime function may span without a written reason.
const FUNCTION_LINES_MAX: usize = 100;
/// The marker of a written reason, in a comment within the five lines above a long function.
const LONG_REASON: &str = "Long:";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root").to_owned()
}

/// Every `.rs` file under `dir` (relative to the root), sorted.
fn sources(dir: &str) -> Vec<PathBuf> {
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

/// The file's lines before its test module.
fn code_lines(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().take_while(|l| l.trim() != "#[cfg(test)]").map(str::to_owned).collect()
}

fn name(path: &Path) -> String {
    path.strip_prefix(root()).unwrap_or(path).display().to_string()
}

#[test]
fn library_crates_return_typed_errors() {
    let mut found = Vec::new();
    for dir in ["engine/src", "net/src"] {
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
    // `net/src/clock.rs` may read the wall clock.
    let idioms = ["SystemTime::now", "clock::wall_ms", "clock::wall_us", "clock::now_ms", "clock::now_us"];
    let mut found = Vec::new();
    for dir in ["engine/src", "net/src"] {
        for p in sources(dir) {
            if p.ends_with("net/src/clock.rs") {
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

#[test]
fn per_venue_tables_are_sized_by_the_venue_count() {
    let idioms = ["step_by(4)", "index() * 4", "* 4 + venue", "; 4]>"];
    let mut found = Vec::new();
    for dir in ["engine/src", "net/src", "simvenue/src", "tools/src"] {
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
    for dir in ["engine/src", "net/src", "simvenue/src", "tools/src", "bench/src", "tests/src", "testkit/src"] {
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

/// Functions of the runtime longer than the bound: (file, line, name, lines).
fn long_functions() -> Vec<(String, usize, String, usize)> {
    let mut out = Vec::new();
    for dir in ["net/src", "tools/src", "simvenue/src"] {
        for p in sources(dir) {
            let lines = code_lines(&p);
            for (i, l) in lines.iter().enumerate() {
                let t = l.trim_start();
                let decl = ["pub fn ", "pub(crate) fn ", "fn ", "pub async fn ", "pub(crate) async fn ", "async fn "]
                    .iter()
                    .find_map(|k| t.strip_prefix(k));
                let Some(decl) = decl else { continue };
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
