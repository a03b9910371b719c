//! The retry schedule of a delivery (`decisions.md` §6): when the attempt after a failed one is
//! due, measured from the first failure, and when a delivery has failed for good. Pure: the
//! times are arguments. The store records what it answers (`Store::record_attempts`).

/// When the attempt after `attempts_done` failed attempts is due, measured from the first
/// failure: attempt 2 at +10 s, attempt 3 at +60 s, then none (the delivery has failed).
pub fn next_attempt_ms(attempts_done: i64, first_failure_ms: i64) -> Option<i64> {
    match attempts_done {
        1 => Some(first_failure_ms + 10_000),
        2 => Some(first_failure_ms + 60_000),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_attempts_at_zero_ten_and_sixty_seconds_from_the_first_failure() {
        assert_eq!(next_attempt_ms(1, 5_000), Some(15_000));
        assert_eq!(next_attempt_ms(2, 5_000), Some(65_000), "from the first failure, not the second");
        assert_eq!(next_attempt_ms(3, 5_000), None, "the third failure is the last");
        assert_eq!(next_attempt_ms(0, 5_000), None);
    }
}
