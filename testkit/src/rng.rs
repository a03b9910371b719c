//! The seeded generator of the fuzz and model tests: xorshift64*, small, fast and the same on every
//! machine, so a printed seed replays a failure. `RAMPART_FUZZ_SEED` overrides a test's default
//! seed (`RAMPART_FUZZ_SEED=<seed> cargo test -p rampart-engine --test binance_feed`).

/// The environment variable that overrides a test's default seed, to replay a failure.
pub const SEED_VAR: &str = "RAMPART_FUZZ_SEED";

/// The seed a test runs with: [`SEED_VAR`] when it is set to a number, else `default`.
pub fn seed_from_env(default: u64) -> u64 {
    std::env::var(SEED_VAR).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// Deterministic xorshift64* (Vigna): not for anything but tests.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`; zero, which xorshift would never leave, becomes one.
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    /// A generator seeded from [`seed_from_env`], printing the seed so a failure can be replayed.
    pub fn from_env(default: u64) -> Rng {
        let seed = seed_from_env(default);
        eprintln!("fuzz seed: {seed}");
        Rng::new(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (slightly biased, which tests do not mind); `n` must not be zero.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// True with a probability of `percent` in a hundred.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next_u64() % 100 < percent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_replays_its_sequence() {
        let (mut a, mut b) = (Rng::new(42), Rng::new(42));
        let xs: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        assert!(xs.iter().all(|&x| x == b.next_u64()));
        assert_ne!(xs[0], Rng::new(43).next_u64());
    }

    #[test]
    fn a_zero_seed_still_moves() {
        let mut r = Rng::new(0);
        assert_ne!(r.next_u64(), r.next_u64());
    }

    #[test]
    fn below_and_chance_stay_in_range() {
        let mut r = Rng::new(7);
        assert!((0..1_000).all(|_| r.below(5) < 5));
        assert!(!(0..1_000).any(|_| r.chance(0)));
        assert!((0..1_000).all(|_| r.chance(100)));
    }
}
