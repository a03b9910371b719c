//! A worker thread's waiting line (sans-I/O): the firings whose delivery waits for room under
//! its bounds, oldest first, kept in one queue per [`Slot`] (account, host name, host and port).
//!
//! Rationale: whether a delivery may start depends on its slot alone, and while the thread
//! starts what fits, its bounds only fill, so once one firing of a slot does not fit, none behind
//! it of the same slot does until something ends; nor, when its account's bound refused it, any
//! firing of the account, nor, when its host name's did, any of the account at that host name.
//! The line was one queue scanned whole at every attempt's end (twice: its bounds freed, then its
//! attempt slot): in a storm of one account to one host a few hundred firings, each looked up
//! under every bound, for every delivery; that hashing was a third of the workers' CPU (`perf
//! record` of the storm, perf/README.md, issue #59). [`Line::start_fitting`] looks at each slot's
//! oldest firing, oldest first, and leaves a slot, an account or an account's host name at its
//! first refusal: the same firings start, in the same order, as a whole scan would start.
//!
//! Bounds: at most `WAITING_MAX` firings (the worker's); the queues, the scan's heap and its lists
//! keep their capacity between scans.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

use rampart_delivery::Slot;

/// Something waiting in a [`Line`]: its slot decides where it queues.
pub(crate) trait InLine {
    /// The bounds it is counted under.
    fn slot(&self) -> &Slot;
}

/// What a scan of the line does with the firing it looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Take it out of the line (to start it).
    Take,
    /// Leave it where it is, and (in [`Line::start_fitting`]) every firing of `Scope` behind it.
    Keep(Scope),
    /// Leave it and end the scan (nothing more can start).
    Stop,
}

/// What a refusal covers for the rest of a [`Line::start_fitting`] scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// The firing's slot (its host and port's bound refused).
    Slot,
    /// Its account's firings to its host name (the host name's bound refused).
    HostName,
    /// Its account's firings (the account's bound, or the thread's width for it, refused).
    Account,
}

/// A slot and its firings, each with its place in the line.
type Queue<T> = (Slot, VecDeque<(u64, T)>);

/// The waiting firings, oldest first, queued by slot. Each has a place: `push_back` places after
/// every other, `push_front` before every other, so the order is a deque's.
pub(crate) struct Line<T> {
    queues: Vec<Queue<T>>,
    /// Each slot's index in `queues`.
    index: HashMap<Slot, usize>,
    len: usize,
    /// The place the next `push_back` takes; the next `push_front` takes `front - 1`.
    back: u64,
    front: u64,
    /// A scan's (place, queue, index in it) of each slot's next firing to look at.
    heads: BinaryHeap<Reverse<(u64, usize, usize)>>,
    /// A scan's queues taken from, one entry per firing, in order.
    taken: Vec<usize>,
    /// A scan's refused accounts, and accounts at a host name (a queue of that host name).
    refused_accounts: Vec<i64>,
    refused_names: Vec<(i64, usize)>,
}

/// Where places start: half the range on either side, more than any line's pushes.
const MIDDLE: u64 = u64::MAX / 2;

impl<T: InLine> Default for Line<T> {
    fn default() -> Line<T> {
        Line {
            queues: Vec::new(),
            index: HashMap::new(),
            len: 0,
            back: MIDDLE,
            front: MIDDLE,
            heads: BinaryHeap::new(),
            taken: Vec::new(),
            refused_accounts: Vec::new(),
            refused_names: Vec::new(),
        }
    }
}

impl<T: InLine> Line<T> {
    /// Firings waiting.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Nothing waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Queues `item` behind every other.
    pub(crate) fn push_back(&mut self, item: T) {
        debug_assert!(self.back < u64::MAX, "places run out after 2^63 pushes");
        let place = self.back;
        self.back += 1;
        self.queue_of(item.slot()).push_back((place, item));
        self.len += 1;
    }

    /// Queues `item` ahead of every other (a cut attempt's firing, given back).
    pub(crate) fn push_front(&mut self, item: T) {
        debug_assert!(self.front > 0, "places run out after 2^63 pushes");
        self.front -= 1;
        let place = self.front;
        self.queue_of(item.slot()).push_front((place, item));
        self.len += 1;
    }

    /// `slot`'s queue, made when it has none (its key the one allocation).
    fn queue_of(&mut self, slot: &Slot) -> &mut VecDeque<(u64, T)> {
        let q = match self.index.get(slot) {
            Some(&q) => q,
            None => {
                self.index.insert(slot.clone(), self.queues.len());
                self.queues.push((slot.clone(), VecDeque::new()));
                self.queues.len() - 1
            }
        };
        &mut self.queues[q].1
    }

    /// Forgets queue `q`, empty (the last queue takes its index).
    fn drop_queue(&mut self, q: usize) {
        debug_assert!(self.queues[q].1.is_empty(), "only an empty queue is dropped");
        let (slot, _) = self.queues.swap_remove(q);
        self.index.remove(&slot);
        if let Some((moved, _)) = self.queues.get(q) {
            self.index.insert(moved.clone(), q);
        }
    }

    /// Every waiting firing, in no order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.queues.iter().flat_map(|(_, q)| q.iter().map(|(_, item)| item))
    }

    /// Every waiting firing, in no order, to change.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.queues.iter_mut().flat_map(|(_, q)| q.iter_mut().map(|(_, item)| item))
    }

    /// Whether a refusal of this scan covers queue `q`'s slot.
    fn refused(&self, q: usize) -> bool {
        let slot = &self.queues[q].0;
        self.refused_accounts.contains(&slot.account)
            || self.refused_names.iter().any(|&(a, at)| a == slot.account && self.queues[at].0.address == slot.address)
    }

    /// Takes out, oldest first, the firings `step` takes, where `step` depends only on a
    /// firing's slot and on what it has taken so far, and what it refuses stays refused until
    /// the scan ends (bounds that only fill), for the `Scope` it names: each slot's oldest
    /// firing is looked at, oldest first, and a slot, an account or an account's host name is
    /// left at its first refusal; `Stop` ends the scan. The same firings, in the same order, as
    /// `step` over the whole line oldest first.
    pub(crate) fn start_fitting(&mut self, mut step: impl FnMut(&T) -> Step) -> Vec<T> {
        self.heads.clear();
        self.taken.clear();
        self.refused_accounts.clear();
        self.refused_names.clear();
        for (q, (_, queue)) in self.queues.iter().enumerate() {
            if let Some((place, _)) = queue.front() {
                self.heads.push(Reverse((*place, q, 0)));
            }
        }
        while let Some(Reverse((_, q, at))) = self.heads.pop() {
            if self.refused(q) {
                continue;
            }
            match step(&self.queues[q].1[at].1) {
                Step::Take => {
                    self.taken.push(q);
                    if let Some((place, _)) = self.queues[q].1.get(at + 1) {
                        self.heads.push(Reverse((*place, q, at + 1)));
                    }
                }
                Step::Keep(Scope::Slot) => {}
                Step::Keep(Scope::HostName) => self.refused_names.push((self.queues[q].0.account, q)),
                Step::Keep(Scope::Account) => self.refused_accounts.push(self.queues[q].0.account),
                Step::Stop => break,
            }
        }
        // A queue's firings are taken from its head, in order; emptied queues are dropped after
        // (dropping moves another queue's index), highest index first.
        let mut out = Vec::with_capacity(self.taken.len());
        for i in 0..self.taken.len() {
            let q = self.taken[i];
            let (_, item) = self.queues[q].1.pop_front().expect("a firing just taken is there");
            out.push(item);
        }
        self.taken.sort_unstable();
        self.taken.dedup();
        while let Some(q) = self.taken.pop() {
            if self.queues[q].1.is_empty() {
                self.drop_queue(q);
            }
        }
        self.len -= out.len();
        debug_assert!(self.counted(), "the count is the queues' sum");
        out
    }

    /// Whether `len` is the queues' sum and no queue is kept empty (assertions).
    fn counted(&self) -> bool {
        let held: usize = self.queues.iter().map(|(_, q)| q.len()).sum();
        held == self.len
            && self.queues.iter().all(|(_, q)| !q.is_empty())
            && self.index.len() == self.queues.len()
            && self.index.iter().all(|(slot, &q)| self.queues.get(q).is_some_and(|(at, _)| at == slot))
    }

    /// Looks at every firing, oldest first, and takes out those `step` takes (`Stop`: the rest
    /// are kept unseen; every `Keep` covers its firing alone). For a rule whose refusals do not
    /// last through the scan (fair shares, where a cut frees room), at the cost of ordering the
    /// whole line.
    pub(crate) fn take_in_order(&mut self, mut step: impl FnMut(&T) -> Step) -> Vec<T> {
        let mut all: Vec<(u64, usize, usize)> = self
            .queues
            .iter()
            .enumerate()
            .flat_map(|(q, (_, queue))| queue.iter().enumerate().map(move |(i, (place, _))| (*place, q, i)))
            .collect();
        all.sort_unstable();
        let mut chosen: Vec<(usize, u64)> = Vec::new();
        for (place, q, i) in all {
            match step(&self.queues[q].1[i].1) {
                Step::Take => chosen.push((q, place)),
                Step::Keep(_) => {}
                Step::Stop => break,
            }
        }
        chosen.sort_unstable();
        let mut out: Vec<(u64, T)> = Vec::with_capacity(chosen.len());
        let mut emptied = Vec::new();
        for group in chosen.chunk_by(|a, b| a.0 == b.0) {
            let q = group[0].0;
            let places: Vec<u64> = group.iter().map(|&(_, place)| place).collect();
            let queue = &mut self.queues[q].1;
            let kept: VecDeque<(u64, T)> = queue
                .drain(..)
                .filter_map(|(place, item)| match places.binary_search(&place) {
                    Ok(_) => {
                        out.push((place, item));
                        None
                    }
                    Err(_) => Some((place, item)),
                })
                .collect();
            *queue = kept;
            if queue.is_empty() {
                emptied.push(q);
            }
        }
        // Highest index first: dropping moves the last queue into the dropped one's index.
        while let Some(q) = emptied.pop() {
            self.drop_queue(q);
        }
        out.sort_unstable_by_key(|(place, _)| *place);
        self.len -= out.len();
        debug_assert!(self.counted(), "the count is the queues' sum");
        out.into_iter().map(|(_, item)| item).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rampart_testkit::rng::Rng;

    /// A firing: its number (the order it was queued in) and its slot.
    #[derive(Clone, Debug, PartialEq)]
    struct Item(u32, Slot);

    impl InLine for Item {
        fn slot(&self) -> &Slot {
            &self.1
        }
    }

    fn slot(account: i64, host: usize, port: usize) -> Slot {
        Slot { account, address: format!("h{host}"), authority: format!("h{host}:{port}") }
    }

    /// Bounds that only fill as firings start: in all, per account, per host and per host and
    /// port (the worker's shape, at random sizes).
    struct Bounds {
        max: [usize; 4],
        held: HashMap<String, usize>,
    }

    impl Bounds {
        fn step(&mut self, s: &Slot) -> Step {
            let keys = ["all".to_owned(), format!("a{}", s.account), s.address.clone(), s.authority.clone()];
            if self.held.get("all").copied().unwrap_or(0) >= self.max[0] {
                return Step::Stop;
            }
            // What a full bound covers: the account's firings, its firings to the host name, the slot.
            let scopes = [Scope::Account, Scope::HostName, Scope::Slot];
            let full = (1..4).find(|&i| self.held.get(&keys[i]).copied().unwrap_or(0) >= self.max[i]);
            if let Some(i) = full {
                return Step::Keep(scopes[i - 1]);
            }
            keys.into_iter().for_each(|k| *self.held.entry(k).or_default() += 1);
            Step::Take
        }
    }

    /// A line and the deque it stands for, filled alike at random (some firings given back to the
    /// front).
    fn filled(rng: &mut Rng, n: usize) -> (Line<Item>, VecDeque<Item>) {
        let (mut line, mut deque) = (Line::default(), VecDeque::new());
        for i in 0..n {
            let item = Item(i as u32, slot(rng.below(3) as i64, rng.below(3), rng.below(4)));
            if rng.chance(10) {
                line.push_front(item.clone());
                deque.push_front(item);
            } else {
                line.push_back(item.clone());
                deque.push_back(item);
            }
        }
        (line, deque)
    }

    /// What a whole scan oldest first takes, and leaves in order.
    fn whole_scan(deque: &mut VecDeque<Item>, mut step: impl FnMut(&Item) -> Step) -> Vec<Item> {
        let (mut out, mut kept, mut stopped) = (Vec::new(), VecDeque::new(), false);
        for item in deque.drain(..) {
            match if stopped { Step::Keep(Scope::Slot) } else { step(&item) } {
                Step::Take => out.push(item),
                Step::Keep(_) => kept.push_back(item),
                Step::Stop => {
                    stopped = true;
                    kept.push_back(item);
                }
            }
        }
        *deque = kept;
        out
    }

    /// The line's order, oldest first, taken out whole.
    fn drained(line: &mut Line<Item>) -> Vec<Item> {
        line.take_in_order(|_| Step::Take)
    }

    /// Seeded: starting the slots' heads takes what a whole scan takes, in its order, and leaves
    /// the rest in order; rounds with firings queued between them.
    #[test]
    fn starting_by_slot_takes_what_a_whole_scan_takes() {
        let seeds = rampart_testkit::rng::seed_from_env(1);
        for seed in seeds..seeds + 300 {
            let mut rng = Rng::new(seed);
            let (mut line, mut deque) = {
                let n = rng.below(200);
                filled(&mut rng, n)
            };
            for round in 0..4 {
                let max = [1 + rng.below(60), 1 + rng.below(30), 1 + rng.below(20), 1 + rng.below(8)];
                let (mut a, mut b) = (Bounds { max, held: HashMap::new() }, Bounds { max, held: HashMap::new() });
                let started = line.start_fitting(|i| a.step(&i.1));
                assert_eq!(started, whole_scan(&mut deque, |i| b.step(&i.1)), "seed {seed} round {round}");
                assert_eq!(line.len(), deque.len(), "seed {seed} round {round}");
                let (_, more) = {
                    let n = rng.below(30);
                    filled(&mut rng, n)
                };
                for item in more {
                    line.push_back(item.clone());
                    deque.push_back(item);
                }
            }
            assert_eq!(drained(&mut line), Vec::from(deque), "seed {seed}: what stays keeps its order");
            assert!(line.is_empty());
        }
    }

    /// Seeded: taking in order looks at every firing oldest first, whatever the rule (one that
    /// takes at random), and stops where told.
    #[test]
    fn taking_in_order_follows_the_line() {
        let seeds = rampart_testkit::rng::seed_from_env(1);
        for seed in seeds..seeds + 300 {
            let mut rng = Rng::new(seed);
            let (mut line, mut deque) = {
                let n = rng.below(120);
                filled(&mut rng, n)
            };
            let steps: Vec<Step> = (0..deque.len())
                .map(|_| match rng.below(20) {
                    0 => Step::Stop,
                    1..=9 => Step::Take,
                    _ => Step::Keep(Scope::Slot),
                })
                .collect();
            let (mut seen_a, mut seen_b) = (0, 0);
            let took = line.take_in_order(|_| {
                seen_a += 1;
                steps[seen_a - 1]
            });
            let want = whole_scan(&mut deque, |_| {
                seen_b += 1;
                steps[seen_b - 1]
            });
            assert_eq!(took, want, "seed {seed}");
            assert_eq!(seen_a, seen_b, "seed {seed}: the same firings looked at");
            assert_eq!(drained(&mut line), Vec::from(deque), "seed {seed}");
        }
    }

    /// A slot refused once is not looked at again in the scan: one look per slot, not per firing.
    #[test]
    fn a_refused_slot_is_looked_at_once() {
        let mut line = Line::default();
        for i in 0..500 {
            line.push_back(Item(i, slot(1, 0, (i % 4) as usize)));
        }
        let mut looked = 0;
        let took = line.start_fitting(|i| {
            looked += 1;
            if i.1.authority == "h0:0" {
                Step::Take
            } else {
                Step::Keep(Scope::Slot)
            }
        });
        assert_eq!(took.len(), 125, "every firing of the slot that fits");
        assert_eq!(looked, 125 + 3, "and one look at each slot that does not");
        assert_eq!(line.len(), 375);
        assert_eq!(line.iter().count(), 375);
        line.iter_mut().for_each(|i| i.0 += 1);
        assert!(line.iter().all(|i| i.0 % 4 != 1), "changed in place");
    }

    /// A refusal of an account, or of an account at a host name, is not looked at again for any
    /// of its slots; other accounts' and host names' are.
    #[test]
    fn a_refusal_covers_its_scope() {
        let mut line = Line::default();
        for i in 0..400 {
            let (account, host, port) = ((i % 2) as i64, (i / 2 % 2) as usize, (i / 4 % 10) as usize);
            line.push_back(Item(i, slot(account, host, port)));
        }
        let mut looked = Vec::new();
        let took = line.start_fitting(|i| {
            looked.push(i.1.clone());
            match (i.1.account, i.1.address.as_str()) {
                (0, _) => Step::Keep(Scope::Account),
                (1, "h0") => Step::Keep(Scope::HostName),
                _ => Step::Take,
            }
        });
        assert_eq!(looked.iter().filter(|s| s.account == 0).count(), 1, "account 0: one look");
        assert_eq!(
            looked.iter().filter(|s| s.account == 1 && s.address == "h0").count(),
            1,
            "account 1 at h0: one look"
        );
        assert_eq!(took.len(), 100, "account 1's firings to h1, every one");
        assert!(took.iter().all(|i| i.1.account == 1 && i.1.address == "h1"));
        assert!(took.windows(2).all(|w| w[0].0 < w[1].0), "oldest first");
        assert_eq!(line.len(), 300);
    }
}
