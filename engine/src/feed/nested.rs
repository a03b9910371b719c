//! Nested values read during the single pass: an object inside the message ([`Nested`],
//! [`read_nested`]), an array that must hold one object ([`Single`], [`read_single`]) and an
//! array of objects ([`read_objects`]), each read key by key with the decoder's [`KeySet`].

use super::cursor::{walk_array, Cursor, Span, NESTING_MAX};
use super::error::{DecodeError, Deferred, JsonError, JsonErrorKind};
use super::fields::Fields;
use super::keys::{walk_keyed, KeyHints, KeySet};

/// A nested object read during the single pass: whether it was read, its fields, and its first
/// duplicate key held back (see [`Deferred`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Nested<'a, const N: usize> {
    /// The pass met the object (its value was an object).
    pub(crate) read: bool,
    /// Where its known keys' values lie.
    fields: Fields<'a, N>,
    /// [`DecodeError::DuplicateField`] for the first key it repeats.
    dup: Deferred,
}

impl<'a, const N: usize> Nested<'a, N> {
    /// Not read yet.
    #[inline]
    pub(crate) fn new(bytes: &'a [u8], keys: &'static [&'static str; N]) -> Nested<'a, N> {
        Nested { read: false, fields: Fields::new(bytes, keys), dup: Ok(()) }
    }

    /// Notes that key `k`'s value lies at `span`, keeping the first duplicate.
    #[inline]
    pub(crate) fn record(&mut self, k: usize, span: Span) {
        if self.dup.is_ok() {
            self.dup = self.fields.record(k, span);
        }
    }

    /// The fields, or the duplicate-key error the object was read with.
    #[inline]
    pub(crate) fn fields(&self) -> Result<&Fields<'a, N>, DecodeError> {
        self.dup.map(|()| &self.fields)
    }
}

/// Reads the object at the cursor (after whitespace), a value inside `depth` open containers,
/// of kind `object` (see [`walk_keyed`]), into `nested` (fresh from [`Nested::new`]), noting
/// where its known keys' values lie: `value` consumes the value of each known key (with the
/// cursor at it, after whitespace); other values are validated and skipped.
#[inline]
pub(crate) fn read_nested<'a, const N: usize>(
    cur: &mut Cursor<'a>,
    depth: usize,
    nested: &mut Nested<'a, N>,
    keys: &KeySet<N>,
    hints: &mut KeyHints,
    object: usize,
    mut value: impl FnMut(&mut Cursor<'a>, usize) -> Result<(), JsonError>,
) -> Result<(), JsonError> {
    if depth >= NESTING_MAX {
        return Err(cur.error(JsonErrorKind::TooDeep));
    }
    nested.read = true;
    walk_keyed(cur, keys, hints, object, |cur, k, _| {
        match k {
            Some(k) => {
                cur.skip_ws();
                let start = cur.pos;
                value(cur, k)?;
                nested.record(k, Span { start, end: cur.pos });
            }
            None => {
                cur.skip_value_at(depth + 1)?;
            }
        }
        Ok::<(), JsonError>(())
    })?;
    Ok(())
}

/// What the pass read of an array that must hold exactly one object (a book push's `data`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Single<'a, const N: usize> {
    /// The pass met the array.
    pub(crate) read: bool,
    count: usize,
    /// The first element, read when it is an object.
    first: Nested<'a, N>,
}

impl<'a, const N: usize> Single<'a, N> {
    /// Not read yet.
    #[inline]
    pub(crate) fn new(bytes: &'a [u8], keys: &'static [&'static str; N]) -> Single<'a, N> {
        Single { read: false, count: 0, first: Nested::new(bytes, keys) }
    }

    /// The one object's fields, or the error [`Fields::single_in_array`] gives for the same
    /// array (none or more than one element: [`DecodeError::OutOfRange`] on `field`; the
    /// element is not an object: [`DecodeError::WrongType`]; a repeated key).
    pub(crate) fn fields(&self, field: &'static str) -> Result<&Fields<'a, N>, DecodeError> {
        if self.count == 0 {
            return Err(DecodeError::OutOfRange(field));
        }
        if !self.first.read {
            return Err(DecodeError::WrongType(field));
        }
        let fields = self.first.fields()?;
        if self.count > 1 {
            return Err(DecodeError::OutOfRange(field));
        }
        Ok(fields)
    }
}

/// Reads the array at the cursor (at its `[`), a value inside `depth` open containers, that
/// must hold one object, into `single` (fresh from [`Single::new`]): the first element, when an
/// object, is read with [`read_nested`] (with `value`); the others are validated and counted.
#[allow(clippy::too_many_arguments)]
pub(crate) fn read_single<'a, const N: usize>(
    cur: &mut Cursor<'a>,
    depth: usize,
    single: &mut Single<'a, N>,
    keys: &KeySet<N>,
    hints: &mut KeyHints,
    object: usize,
    mut value: impl FnMut(&mut Cursor<'a>, usize) -> Result<(), JsonError>,
) -> Result<(), JsonError> {
    single.read = true;
    walk_array(cur, |cur| {
        cur.skip_ws();
        if single.count == 0 && cur.peek() == Some(b'{') {
            read_nested(cur, depth + 1, &mut single.first, keys, hints, object, &mut value)?;
        } else {
            cur.skip_value_at(depth + 1)?;
        }
        single.count += 1;
        Ok::<(), JsonError>(())
    })?;
    Ok(())
}

/// Reads the array at the cursor (at its `[`), a value inside `depth` open containers, whose
/// elements must be objects (a trade push's `data`): each is read and handed to `each` in turn,
/// until the first error, which goes to `result` (see [`Deferred`]; `Ok` when there is none)
/// exactly as [`Fields::each_in_array`] gives it; the rest is only validated.
#[allow(clippy::too_many_arguments)]
pub(crate) fn read_objects<'a, const N: usize>(
    cur: &mut Cursor<'a>,
    depth: usize,
    keys: &KeySet<N>,
    hints: &mut KeyHints,
    object: usize,
    field: &'static str,
    result: &mut Deferred,
    mut each: impl FnMut(&Fields<'a, N>) -> Deferred,
) -> Result<(), JsonError> {
    *result = Ok(());
    walk_array(cur, |cur| {
        cur.skip_ws();
        if result.is_err() || cur.peek() != Some(b'{') {
            if result.is_ok() {
                *result = Err(DecodeError::WrongType(field));
            }
            cur.skip_value_at(depth + 1)?;
            return Ok(());
        }
        let mut element = Nested::new(cur.bytes, keys.names);
        read_nested(cur, depth + 1, &mut element, keys, hints, object, |cur, _| {
            cur.skip_value_at(depth + 2).map(drop)
        })?;
        *result = element.fields().and_then(&mut each);
        Ok::<(), JsonError>(())
    })
}
