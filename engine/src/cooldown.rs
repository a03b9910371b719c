//! An alert's cooldown (`decisions.md` §15, §16): the least time between two of its firings on a
//! book, and what a new one does to the quiet time running. Every alert type keeps its own
//! `cooldown_ms` and `quiet_until_ms` (no firing before it); this is their shared arithmetic.

/// Gives an alert a cooldown of `new_s` seconds, counted from its last firing: the end of its
/// quiet time (`i64::MIN` before any firing) moves by the difference.
pub(crate) fn retune_cooldown(cooldown_ms: &mut i64, quiet_until_ms: &mut i64, new_s: u32) {
    let new_ms = i64::from(new_s) * 1_000;
    if *quiet_until_ms != i64::MIN {
        *quiet_until_ms = quiet_until_ms.saturating_sub(*cooldown_ms).saturating_add(new_ms);
    }
    *cooldown_ms = new_ms;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_cooldown_counts_from_the_last_firing() {
        let (mut cooldown, mut quiet) = (0, i64::MIN);
        retune_cooldown(&mut cooldown, &mut quiet, 60);
        assert_eq!((cooldown, quiet), (60_000, i64::MIN), "never fired: nothing to count from");
        let (mut cooldown, mut quiet) = (10_000, 10_000);
        retune_cooldown(&mut cooldown, &mut quiet, 60);
        assert_eq!(quiet, 60_000, "from the last firing at 0");
    }
}
