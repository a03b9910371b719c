//! The four venues rampart follows, and their identifiers on the wire and in the API.

use core::fmt;

/// A trading venue.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum Venue {
    /// Binance spot; the default venue.
    Binance = 0,
    /// Bybit v5 spot.
    Bybit = 1,
    /// OKX v5 spot.
    Okx = 2,
    /// Bitget v2 spot.
    Bitget = 3,
}

impl Venue {
    /// Every venue, in the order the API lists them and picks a default.
    pub const ALL: [Venue; Venue::COUNT] = [Venue::Binance, Venue::Bybit, Venue::Okx, Venue::Bitget];
    /// Number of venues: the size of every per-venue table.
    pub const COUNT: usize = 4;
    /// The allowed identifiers as a 422 message lists them.
    pub const ALLOWED: &'static str = "binance, bybit, okx, bitget";

    /// The API identifier.
    pub fn as_str(self) -> &'static str {
        match self {
            Venue::Binance => "binance",
            Venue::Bybit => "bybit",
            Venue::Okx => "okx",
            Venue::Bitget => "bitget",
        }
    }

    /// Parses an API identifier (exact, lowercase).
    pub fn parse(s: &str) -> Option<Venue> {
        // Case-insensitive, like symbols (`decisions.md` §11); always answered in lowercase.
        Venue::ALL.into_iter().find(|v| v.as_str().eq_ignore_ascii_case(s))
    }

    /// Dense index 0..4.
    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Venue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_round_trips() {
        for v in Venue::ALL {
            assert_eq!(Venue::parse(v.as_str()), Some(v));
        }
        assert_eq!(Venue::parse("kraken"), None);
        assert_eq!(Venue::parse("Binance"), Some(Venue::Binance), "case-insensitive");
        assert_eq!(Venue::parse("OKX"), Some(Venue::Okx));
        assert_eq!(Venue::parse("okx "), None);
    }
}
