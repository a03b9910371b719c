//! Which market node owns a pair: `--partition I/N` splits the pairs by a stable hash of
//! `BASEQUOTE` into `N` parts, so every venue of a pair lands on the same node (as on the same
//! shard within it) and two nodes configured `0/N` … `N-1/N` never own the same book.

use std::fmt;

/// Partitions a cluster has at most (they name subjects and advisory locks).
pub const PARTITIONS_MAX: u16 = 64;

/// One node's part of the pairs: `index` of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Partition {
    /// This node's part, `0..count`.
    pub index: u16,
    /// Parts in all.
    pub count: u16,
}

impl Default for Partition {
    /// The whole market: one part (the single process).
    fn default() -> Partition {
        Partition { index: 0, count: 1 }
    }
}

/// `--partition` was not `I/N` with `0 ≤ I < N ≤ PARTITIONS_MAX`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadPartition(pub String);

impl fmt::Display for BadPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "partition {:?} is not I/N with 0 <= I < N <= {PARTITIONS_MAX} (e.g. 0/2)", self.0)
    }
}

impl std::error::Error for BadPartition {}

impl std::str::FromStr for Partition {
    type Err = BadPartition;

    fn from_str(s: &str) -> Result<Partition, BadPartition> {
        let bad = || BadPartition(s.to_string());
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let index: u16 = i.trim().parse().map_err(|_| bad())?;
        let count: u16 = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || count > PARTITIONS_MAX || index >= count {
            return Err(bad());
        }
        Ok(Partition { index, count })
    }
}

impl fmt::Display for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// The symbol of an alert on every pair of its venue (`decisions.md` §15).
pub const UNIVERSE: &str = "*";

impl Partition {
    /// True when this part owns the pair `symbol` (`BASEQUOTE`).
    pub fn owns(&self, symbol: &str) -> bool {
        of_symbol(symbol, self.count) == self.index
    }

    /// True when this part evaluates the alert on `symbol`: its pair's, or every part for a
    /// [`UNIVERSE`] alert (each on the pairs it owns).
    pub fn owns_alert(&self, symbol: &str) -> bool {
        symbol == UNIVERSE || self.owns(symbol)
    }
}

/// The part of `count` that owns `symbol`: the high half of the FNV-1a hash whose low half
/// picks the shard ([`super::shard_of_symbol`]), so a node's pairs still spread over all
/// of its shards.
pub fn of_symbol(symbol: &str, count: u16) -> u16 {
    let h = super::symbol_hash(symbol);
    ((h >> 32) % u64::from(count.max(1))) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_parse_and_refuse_what_is_not_i_of_n() {
        assert_eq!("1/3".parse::<Partition>(), Ok(Partition { index: 1, count: 3 }));
        assert_eq!("0/1".parse::<Partition>(), Ok(Partition::default()));
        for bad in ["", "1", "3/3", "0/0", "-1/2", "a/2", "1/b", "0/65", "1/2/3"] {
            assert_eq!(bad.parse::<Partition>(), Err(BadPartition(bad.to_string())), "{bad}");
        }
        assert_eq!(Partition { index: 1, count: 2 }.to_string(), "1/2");
    }

    #[test]
    fn every_pair_has_exactly_one_owner_and_each_owner_spreads_over_its_shards() {
        let symbols: Vec<String> = (0..2_000).map(|i| format!("C{i}USDT")).collect();
        for count in [1u16, 2, 3, 4] {
            let mut per_node = vec![0usize; count as usize];
            let mut per_shard = vec![vec![0usize; 2]; count as usize];
            for s in &symbols {
                let owners: Vec<u16> = (0..count).filter(|&i| Partition { index: i, count }.owns(s)).collect();
                assert_eq!(owners.len(), 1, "{s} over {count}");
                per_node[owners[0] as usize] += 1;
                per_shard[owners[0] as usize][crate::shard_of_symbol(s, 2)] += 1;
            }
            let fair = symbols.len() / count as usize;
            for (node, n) in per_node.iter().enumerate() {
                assert!(*n > fair * 8 / 10 && *n < fair * 12 / 10, "node {node} of {count}: {n} pairs");
                for shard in &per_shard[node] {
                    assert!(*shard > n * 4 / 10, "node {node} of {count}: shards {:?}", per_shard[node]);
                }
            }
        }
    }
}
