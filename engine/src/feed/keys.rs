//! Keys read by prediction: a decoder's key table (`key_table!`, [`KeySet`]), the hints that
//! guess each next key from the last message ([`KeyHints`]), and the walk over an object that
//! uses them ([`walk_keyed`]).

use super::cursor::Cursor;
use super::error::JsonError;
use super::fields::KeyIndex;

/// A decoder's keys, written once: `key_table! { K_ARG = b"arg", ... }` makes an index constant
/// per key (in the order written), `KEYS` (the names by index), `key_index` (the raw key bytes →
/// index `match`), `KEY_SET` (the [`KeySet`] for [`walk_keyed`]) and `name` (a key's name for
/// errors). Matching is on raw key bytes: an escaped key is an unknown key.
///
/// Rationale for the `match`: a jump on the length, then on the bytes, measured faster here than
/// a perfect hash confirmed by a comparison.
macro_rules! key_table {
    ($($konst:ident = $raw:literal),+ $(,)?) => {
        key_table!(@plain $($konst = $raw),+);

        /// [`KEYS`] with their compact-JSON patterns, for [`walk_keyed`](crate::feed::walk_keyed).
        static KEY_SET: KeySet<{ KEYS.len() }> = KeySet::new(&KEYS, key_index);
    };
    // The table without its `KEY_SET`, for decoders that scan objects whole (`feed::perp`).
    (@plain $($konst:ident = $raw:literal),+) => {
        key_table!(@index 0usize; $($konst)+);

        /// The names of the keys the decoder reads, by index.
        const KEYS: [&str; [$(stringify!($konst)),+].len()] = [$(
            match ::core::str::from_utf8($raw) {
                Ok(name) => name,
                Err(_) => panic!("a key is UTF-8"),
            }
        ),+];

        /// The index in [`KEYS`] of a raw key.
        #[inline]
        fn key_index(raw: &[u8]) -> Option<usize> {
            Some(match raw {
                $($raw => $konst,)+
                _ => return None,
            })
        }

        /// A key's name, for errors.
        fn name(key: usize) -> &'static str {
            KEYS.get(key).copied().unwrap_or("?")
        }
    };
    (@index $n:expr; ) => {};
    (@index $n:expr; $konst:ident $($rest:ident)*) => {
        const $konst: usize = $n;
        key_table!(@index $n + 1; $($rest)*);
    };
}

/// A decoder's key table: the names it reads, each key as it appears in compact JSON
/// (`"name":`) packed into a `u128` for a one-comparison match, and the `match` that maps any
/// other raw key to its index.
pub(crate) struct KeySet<const N: usize> {
    /// The names, by index.
    pub(crate) names: &'static [&'static str; N],
    patterns: [KeyPattern; N],
    /// The raw key → index `match`.
    pub(crate) index: KeyIndex,
}

/// `"name":` as little-endian bytes, the mask of its bytes, and its length (0 when longer than
/// 16 bytes: never predicted).
#[derive(Clone, Copy, Debug)]
struct KeyPattern {
    bytes: u128,
    mask: u128,
    len: usize,
}

impl<const N: usize> KeySet<N> {
    /// The key set of `names`, whose indices `index` gives.
    pub(crate) const fn new(names: &'static [&'static str; N], index: KeyIndex) -> KeySet<N> {
        // A key's hint slot is its index.
        assert!(N <= KEY_HINT_FIRST);
        let mut patterns = [KeyPattern { bytes: 0, mask: 0, len: 0 }; N];
        let mut k = 0;
        while k < N {
            let name = names[k].as_bytes();
            let len = name.len() + 3;
            if len <= 16 {
                let mut bytes: u128 = b'"' as u128;
                let mut i = 0;
                while i < name.len() {
                    bytes |= (name[i] as u128) << (8 * (i + 1));
                    i += 1;
                }
                bytes |= (b'"' as u128) << (8 * (name.len() + 1)) | (b':' as u128) << (8 * (name.len() + 2));
                let mask = if len == 16 { u128::MAX } else { (1u128 << (8 * len)) - 1 };
                patterns[k] = KeyPattern { bytes, mask, len };
            }
            k += 1;
        }
        KeySet { names, patterns, index }
    }

    /// The index of the key at the cursor (at its opening quote), with the cursor after the
    /// colon that follows it; `None` for a key not in the set. Tries the key `hints` predicts
    /// after `slot` first, and notes the key read for `slot`.
    #[inline(always)]
    fn read_key(&self, cur: &mut Cursor<'_>, hints: &mut KeyHints, slot: usize) -> Result<Option<usize>, JsonError> {
        let guess = hints.next.get(slot).copied().unwrap_or(0);
        if let Some(p) = self.patterns.get(usize::from(guess).wrapping_sub(1)) {
            if let Some(chunk) = cur.bytes.get(cur.pos..cur.pos.wrapping_add(16)) {
                let word = u128::from_le_bytes(chunk.try_into().unwrap_or([0; 16]));
                if p.len > 0 && word & p.mask == p.bytes {
                    cur.pos += p.len;
                    return Ok(Some(usize::from(guess) - 1));
                }
            }
        }
        self.read_key_unpredicted(cur, hints, slot)
    }

    /// [`KeySet::read_key`] when the key at the cursor is not the one predicted.
    #[inline(never)]
    fn read_key_unpredicted(
        &self,
        cur: &mut Cursor<'_>,
        hints: &mut KeyHints,
        slot: usize,
    ) -> Result<Option<usize>, JsonError> {
        let key = cur.key()?;
        let k = (self.index)(key.of(cur.bytes));
        if let (Some(k), Some(hint)) = (k, hints.next.get_mut(slot)) {
            // Fits: key tables hold fewer than 255 keys.
            *hint = k as u8 + 1;
        }
        Ok(k)
    }
}

/// Slots of [`KeyHints`]: one per key of a table (what followed it), then one per kind of
/// object a decoder reads (its first key).
pub(crate) const KEY_HINT_SLOTS: usize = 64;

/// The first slot for the first key of an object: `KEY_HINT_FIRST + ` the decoder's tag of the
/// object.
pub(crate) const KEY_HINT_FIRST: usize = 48;

/// What a decoder remembers between messages to read keys fast: for each key of its table, the
/// key that followed it last time, and for each kind of object, its first key (index + 1; 0 for
/// none).
///
/// Rationale: a venue sends the keys of each kind of message in the same order, so the key that
/// followed last time is nearly always the next one, and comparing the bytes at the cursor with
/// it (`"name":`, one masked 16-byte comparison) replaces scanning the key and finding it in the
/// table. A wrong guess only costs that comparison; what is decoded never depends on the hints.
#[derive(Clone, Debug)]
pub(crate) struct KeyHints {
    next: [u8; KEY_HINT_SLOTS],
}

impl Default for KeyHints {
    fn default() -> KeyHints {
        KeyHints { next: [0; KEY_HINT_SLOTS] }
    }
}

/// Walks the members of the object at the cursor (after whitespace), an object of kind `object`
/// (the decoder's tag, below `KEY_HINT_SLOTS - KEY_HINT_FIRST`): `member` gets the index of each
/// key in `keys` (`None` for another key) with the cursor before its value, and the hints (for
/// objects inside the value), and must consume the value. Accepts and refuses exactly what
/// [`walk_object`](super::cursor::walk_object) does.
#[inline]
pub(crate) fn walk_keyed<'a, E: From<JsonError>, const N: usize>(
    cur: &mut Cursor<'a>,
    keys: &KeySet<N>,
    hints: &mut KeyHints,
    object: usize,
    mut member: impl FnMut(&mut Cursor<'a>, Option<usize>, &mut KeyHints) -> Result<(), E>,
) -> Result<(), E> {
    cur.expect(b'{')?;
    let mut slot = KEY_HINT_FIRST + object;
    let mut first = true;
    loop {
        cur.skip_ws();
        match cur.peek() {
            Some(b'}') => {
                cur.bump();
                return Ok(());
            }
            Some(b',') if !first => {
                cur.bump();
                cur.skip_ws();
            }
            _ if first => {}
            _ => return Err(cur.unexpected().into()),
        }
        first = false;
        if cur.peek() != Some(b'"') {
            // The error `Cursor::key` gives.
            return Err(cur.unexpected().into());
        }
        let k = keys.read_key(cur, hints, slot)?;
        if let Some(k) = k {
            slot = k;
        }
        member(cur, k, hints)?;
    }
}
