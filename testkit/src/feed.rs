//! The helpers the venue feed tests share (`engine/tests/*_feed.rs`): book levels from decimal
//! strings, fixture files and the check that every one is listed, the malformed-frame check, and
//! the cheap fuzz of truncated and mutated frames.

use rampart_engine::feed::{DecodeError, JsonError, JsonErrorKind};
use rampart_engine::{Level, Price, Qty};

use crate::rng::{seed_from_env, Rng};

/// A book level from decimal strings.
pub fn lv(price: &str, qty: &str) -> Level {
    Level {
        price: Price::parse(price.as_bytes()).expect("test price"),
        qty: Qty::parse(qty.as_bytes()).expect("test qty"),
    }
}

/// Asserts that every file in the fixture directory `dir` is one of `valid` or `malformed`, and
/// that every listed fixture exists.
pub fn assert_fixtures_listed(dir: &str, valid: &[&str], malformed: &[&str]) {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("fixture dir")
        .map(|e| e.expect("dir entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for n in &names {
        assert!(
            valid.contains(&n.as_str()) || malformed.contains(&n.as_str()),
            "fixture {n} is not listed in VALID or MALFORMED"
        );
    }
    assert_eq!(names.len(), valid.len() + malformed.len(), "a listed fixture is missing");
}

/// The bytes of fixture `name` in the directory `dir`.
pub fn read_fixture(dir: &str, name: &str) -> Vec<u8> {
    let path = format!("{dir}/{name}");
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

/// What a malformed frame must be refused with.
#[derive(Clone, Copy, Debug)]
pub enum Want {
    /// A JSON syntax error of this kind (offset not checked here).
    Json(JsonErrorKind),
    /// Exactly this error.
    Decode(DecodeError),
}

/// Asserts that `decode` refuses every fixture of `malformed` (in `dir`) with its error.
pub fn assert_malformed_refused(
    dir: &str,
    malformed: &[(&str, Want)],
    mut decode: impl FnMut(&[u8]) -> Result<(), DecodeError>,
) {
    for &(name, want) in malformed {
        match (want, decode(&read_fixture(dir, name))) {
            (Want::Json(kind), Err(DecodeError::Json(e))) => assert_eq!(e.kind, kind, "{name}: {e}"),
            (Want::Decode(w), Err(e)) => assert_eq!(e, w, "{name}"),
            (_, got) => panic!("{name}: want {want:?}, got {got:?}"),
        }
    }
}

/// Cheap fuzz, part 1: asserts that `decode` accepts every fixture of `valid` (in `dir`) whole
/// and refuses every strict prefix without panicking; for JSON fixtures (`.json`), as truncated
/// at the end of the input. Returns the number of prefixes checked.
pub fn assert_truncations_refused(
    dir: &str,
    valid: &[&str],
    mut decode: impl FnMut(&[u8]) -> Result<(), DecodeError>,
) -> usize {
    let mut checked = 0;
    for name in valid {
        let bytes = read_fixture(dir, name);
        assert_eq!(decode(&bytes), Ok(()), "{name} must decode whole");
        for n in 0..bytes.len() {
            let got = decode(&bytes[..n]);
            if name.ends_with(".json") {
                let want = Err(DecodeError::Json(JsonError { kind: JsonErrorKind::UnexpectedEnd, offset: n }));
                assert_eq!(got, want, "{name} cut at {n}");
            } else {
                assert!(got.is_err(), "{name} cut at {n}");
            }
            checked += 1;
        }
    }
    checked
}

/// Cheap fuzz, part 2: hands `check` 300 copies of each fixture of `valid` (in `dir`) with one to
/// three bytes replaced by random JSON-significant ones. A panic fails the test with the seed and
/// the frame. The seed is `RAMPART_FUZZ_SEED` when set, else `default_seed`. Returns how many
/// mutated frames `check` accepted (returned true for).
pub fn mutate_valid_frames(
    dir: &str,
    valid: &[&str],
    default_seed: u64,
    mut check: impl FnMut(&[u8]) -> bool,
) -> usize {
    let seed = seed_from_env(default_seed) | 1;
    let mut rng = Rng::new(seed);
    const BYTES: &[u8] = b"{}[]\",:-0123456789.e\\ \xff";
    let mut accepted = 0;
    for name in valid {
        let base = read_fixture(dir, name);
        for _ in 0..300 {
            let mut bytes = base.clone();
            for _ in 0..1 + rng.below(3) {
                if bytes.is_empty() {
                    break;
                }
                let i = rng.below(bytes.len());
                bytes[i] = BYTES[rng.below(BYTES.len())];
            }
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&bytes))) {
                Ok(ok) => accepted += usize::from(ok),
                Err(_) => panic!("panic on {name} mutated, seed {seed}: {}", String::from_utf8_lossy(&bytes)),
            }
        }
    }
    accepted
}
