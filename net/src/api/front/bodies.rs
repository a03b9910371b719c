//! Response bodies of published data, serialized once per version and reused: the front keeps,
//! per book, the last body it wrote and the version it was written from, and answers from it
//! while the version is unchanged.
//!
//! A version is whatever the body depends on: the published snapshot itself (held by the entry,
//! so its address cannot be reused while it is compared), and for levels also the trade
//! watermarks and the current price (zones are typed and ordered against it). The front is
//! single-threaded, so the cache is a `RefCell`.
//!
//! Bound: one entry per book (the registry's size, growing with it); an entry is replaced, never
//! added beside, so memory is one body per book served at least once.

use std::cell::RefCell;
use std::sync::Arc;

use bytes::Bytes;

use rampart_state::{DensitySnapshot, LevelSnapshot};

/// What a single pair's levels body depends on.
#[derive(Debug)]
pub(crate) struct LevelsVersion {
    /// The level set as last computed.
    pub snapshot: Arc<LevelSnapshot>,
    /// The trade watermarks that filter consumed zones out.
    pub high: i64,
    /// See `high`.
    pub low: i64,
    /// The price zones are typed and ordered against.
    pub price: i64,
}

impl PartialEq for LevelsVersion {
    fn eq(&self, o: &LevelsVersion) -> bool {
        Arc::ptr_eq(&self.snapshot, &o.snapshot) && (self.high, self.low, self.price) == (o.high, o.low, o.price)
    }
}

/// What a single pair's densities body depends on: the scan's snapshot alone.
#[derive(Debug)]
pub(crate) struct DensitiesVersion(pub Arc<DensitySnapshot>);

impl PartialEq for DensitiesVersion {
    fn eq(&self, o: &DensitiesVersion) -> bool {
        Arc::ptr_eq(&self.0, &o.0)
    }
}

/// The last body per book and the version it was written from.
#[derive(Debug)]
pub(crate) struct BodyCache<V> {
    entries: RefCell<Vec<Option<(V, Bytes)>>>,
}

impl<V: PartialEq> BodyCache<V> {
    /// An empty cache with room for `books` entries (it grows if the registry does).
    pub(crate) fn new(books: usize) -> BodyCache<V> {
        BodyCache { entries: RefCell::new((0..books).map(|_| None).collect()) }
    }

    /// The body of book `index` at `version`: the cached one if it was written from the same
    /// version, else `build()`'s, which replaces it.
    pub(crate) fn get_or_build(&self, index: usize, version: V, build: impl FnOnce(&V) -> String) -> Bytes {
        let mut entries = self.entries.borrow_mut();
        if entries.len() <= index {
            entries.resize_with(index + 1, || None);
        }
        if let Some((v, body)) = &entries[index] {
            if *v == version {
                return body.clone();
            }
        }
        let body = Bytes::from(build(&version));
        entries[index] = Some((version, body.clone()));
        body
    }
}

/// Whole answers kept per slot (a venue's bulk densities) while a key made of a publisher's
/// generation counter and the answer's time in milliseconds holds: one load of the counter
/// replaces the per-book version checks, and requests within the same millisecond share one
/// body, written once.
///
/// The caller loads the generation (acquire) before reading anything the body is built from,
/// so a change published during the build leaves a newer generation and the next request
/// rebuilds. Bound: one body per slot.
#[derive(Debug)]
pub(crate) struct GenerationCache {
    entries: RefCell<Vec<Option<(GenerationKey, Bytes)>>>,
}

/// A publisher's generation and the answer's time in milliseconds.
pub(crate) type GenerationKey = (u64, i64);

impl GenerationCache {
    /// An empty cache of `slots` entries.
    pub(crate) fn new(slots: usize) -> GenerationCache {
        GenerationCache { entries: RefCell::new(vec![None; slots]) }
    }

    /// The body of `slot` for `key` (generation, time): the kept one if built for the same key,
    /// else `build()`'s, which replaces it.
    pub(crate) fn get_or_build(&self, slot: usize, key: GenerationKey, build: impl FnOnce() -> Bytes) -> Bytes {
        if let Some(Some((k, body))) = self.entries.borrow().get(slot) {
            if *k == key {
                return body.clone();
            }
        }
        let body = build();
        if let Some(entry) = self.entries.borrow_mut().get_mut(slot) {
            *entry = Some((key, body.clone()));
        }
        body
    }
}

/// Answers read from the board (metrics, rankings, `/v1/market`), written once per board and
/// request target and reused until the board is rebuilt (once a second).
///
/// Bound: [`BOARD_BODIES_MAX`] targets per board; past it answers are written per request and
/// not kept. Spellings of one query are distinct targets (the raw path and query are the key).
#[derive(Debug, Default)]
pub(crate) struct BoardBodies {
    inner: RefCell<(Option<Arc<rampart_state::board::Board>>, BodiesByTarget)>,
}

/// Answers by request target.
type BodiesByTarget = std::collections::HashMap<String, Bytes>;

/// Request targets whose answers are kept per board.
pub(crate) const BOARD_BODIES_MAX: usize = 1_024;

impl BoardBodies {
    /// The body for `target` on `board`, written by `build` unless kept; an error is never kept.
    pub(crate) fn get_or_build<E>(
        &self,
        board: &Arc<rampart_state::board::Board>,
        target: &str,
        build: impl FnOnce() -> Result<String, E>,
    ) -> Result<Bytes, E> {
        {
            let mut inner = self.inner.borrow_mut();
            if !inner.0.as_ref().is_some_and(|b| Arc::ptr_eq(b, board)) {
                *inner = (Some(board.clone()), std::collections::HashMap::new());
            } else if let Some(body) = inner.1.get(target) {
                return Ok(body.clone());
            }
        }
        let body = Bytes::from(build()?);
        let mut inner = self.inner.borrow_mut();
        if inner.1.len() < BOARD_BODIES_MAX {
            inner.1.insert(target.to_owned(), body.clone());
        }
        Ok(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn levels(snapshot: &Arc<LevelSnapshot>, price: i64) -> LevelsVersion {
        LevelsVersion { snapshot: snapshot.clone(), high: i64::MIN, low: i64::MAX, price }
    }

    #[test]
    fn a_body_is_built_once_per_version() {
        let cache = BodyCache::new(2);
        let built = std::cell::Cell::new(0);
        let build = |v: &LevelsVersion| {
            built.set(built.get() + 1);
            format!("body at {}", v.price)
        };
        let a = Arc::new(LevelSnapshot::default());
        assert_eq!(cache.get_or_build(0, levels(&a, 10), build), "body at 10");
        assert_eq!(cache.get_or_build(0, levels(&a, 10), build), "body at 10");
        assert_eq!(built.get(), 1, "same snapshot, watermarks and price: reused");
        assert_eq!(cache.get_or_build(0, levels(&a, 11), build), "body at 11", "a new price is a new version");
        let b = Arc::new(LevelSnapshot::default());
        cache.get_or_build(0, levels(&b, 11), build);
        assert_eq!(built.get(), 3, "an equal but new snapshot is a new version");
        cache.get_or_build(5, levels(&b, 11), build);
        assert_eq!(built.get(), 4, "books have their own entries; the cache grows with the registry");
    }

    #[test]
    fn a_generation_answer_is_rebuilt_only_when_the_generation_moves() {
        let cache = GenerationCache::new(2);
        let built = std::cell::Cell::new(0);
        let build = |text: &'static str| {
            built.set(built.get() + 1);
            Bytes::from(text)
        };
        assert_eq!(cache.get_or_build(0, (7, 1), || build("a")), "a");
        assert_eq!(cache.get_or_build(0, (7, 1), || build("b")), "a", "same generation and millisecond: kept");
        assert_eq!(cache.get_or_build(1, (7, 1), || build("c")), "c", "slots are apart");
        assert_eq!(cache.get_or_build(0, (8, 1), || build("d")), "d", "the generation moved");
        assert_eq!(cache.get_or_build(0, (8, 2), || build("e")), "e", "the millisecond moved");
        assert_eq!(cache.get_or_build(9, (8, 2), || build("f")), "f", "past the slots: built, not kept");
        assert_eq!(cache.get_or_build(9, (8, 2), || build("g")), "g");
        assert_eq!(built.get(), 6);
    }

    #[test]
    fn a_board_answer_is_written_once_per_board_and_errors_are_not_kept() {
        let cache = BoardBodies::default();
        let built = std::cell::Cell::new(0);
        let build = |text: &'static str| {
            built.set(built.get() + 1);
            Ok::<_, ()>(text.to_owned())
        };
        let first = Arc::new(rampart_state::board::Board::empty());
        assert_eq!(cache.get_or_build(&first, "rankings/all?", || build("a")), Ok(Bytes::from("a")));
        assert_eq!(cache.get_or_build(&first, "rankings/all?", || build("b")), Ok(Bytes::from("a")));
        assert_eq!(built.get(), 1, "same board, same target: kept");
        assert_eq!(cache.get_or_build(&first, "rankings/usdt?", || build("c")), Ok(Bytes::from("c")));
        let second = Arc::new(rampart_state::board::Board::empty());
        assert_eq!(cache.get_or_build(&second, "rankings/all?", || build("d")), Ok(Bytes::from("d")), "a new board");
        assert_eq!(cache.get_or_build(&second, "bad", || Err::<String, _>(7)), Err(7));
        assert_eq!(cache.get_or_build(&second, "bad", || build("e")), Ok(Bytes::from("e")), "the error was not kept");
        for i in 0..BOARD_BODIES_MAX + 5 {
            let _ = cache.get_or_build(&second, &format!("t{i}"), || build("x"));
        }
        assert!(cache.inner.borrow().1.len() <= BOARD_BODIES_MAX, "bounded");
    }
}
