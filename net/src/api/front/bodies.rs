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

use crate::shard::{DensitySnapshot, LevelSnapshot};

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
}
