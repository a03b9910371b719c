//! A binary min-heap of (key, slot) that writes each slot's place into a table, so that a slot
//! can be taken out of the middle in O(log n). It never grows on its own: a push needs the room
//! reserved (debug-asserted). [`crate::perp_alert_book`] keeps its alerts' heaps in it.
//!
//! Bounds: push, pop and taking out an entry cost O(log n) and allocate nothing; only
//! [`IxHeap::reserve_total`] allocates. Keys are `i64` and slots `u32`, [`NOWHERE`] excluded.

/// No place: a slot in no heap of that table.
pub(crate) const NOWHERE: u32 = u32::MAX;

#[derive(Clone, Debug, Default)]
pub(crate) struct IxHeap {
    items: Vec<(i64, u32)>,
}

impl IxHeap {
    /// Makes room for `total` entries in all.
    pub(crate) fn reserve_total(&mut self, total: usize) {
        self.items.reserve(total.saturating_sub(self.items.len()));
    }

    pub(crate) fn peek(&self) -> Option<(i64, u32)> {
        self.items.first().copied()
    }

    pub(crate) fn push(&mut self, key: i64, slot: u32, pos: &mut [u32]) {
        debug_assert!(self.items.len() < self.items.capacity(), "room reserved at insert");
        self.items.push((key, slot));
        let i = self.items.len() - 1;
        pos[slot as usize] = i as u32;
        self.sift_up(i, pos);
    }

    pub(crate) fn pop(&mut self, pos: &mut [u32]) -> Option<(i64, u32)> {
        (!self.items.is_empty()).then(|| self.remove_at(0, pos))
    }

    /// Takes out the entry at `i`.
    pub(crate) fn remove_at(&mut self, i: usize, pos: &mut [u32]) -> (i64, u32) {
        let out = self.items.swap_remove(i);
        pos[out.1 as usize] = NOWHERE;
        if i < self.items.len() {
            pos[self.items[i].1 as usize] = i as u32;
            let i = self.sift_up(i, pos);
            self.sift_down(i, pos);
        }
        out
    }

    fn sift_up(&mut self, mut i: usize, pos: &mut [u32]) -> usize {
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.items[parent].0 <= self.items[i].0 {
                break;
            }
            self.swap(i, parent, pos);
            i = parent;
        }
        i
    }

    fn sift_down(&mut self, mut i: usize, pos: &mut [u32]) {
        let n = self.items.len();
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut least = i;
            if l < n && self.items[l].0 < self.items[least].0 {
                least = l;
            }
            if r < n && self.items[r].0 < self.items[least].0 {
                least = r;
            }
            if least == i {
                return;
            }
            self.swap(i, least, pos);
            i = least;
        }
    }

    fn swap(&mut self, a: usize, b: usize, pos: &mut [u32]) {
        self.items.swap(a, b);
        pos[self.items[a].1 as usize] = a as u32;
        pos[self.items[b].1 as usize] = b as u32;
    }

    /// True when the heap order holds and `pos` says where every entry is.
    #[cfg(test)]
    pub(crate) fn is_sound(&self, pos: &[u32]) -> bool {
        let ordered = (1..self.items.len()).all(|i| self.items[(i - 1) / 2].0 <= self.items[i].0);
        ordered && self.items.iter().enumerate().all(|(i, e)| pos[e.1 as usize] == i as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heap_takes_entries_out_of_the_middle_and_keeps_its_order() {
        let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let n = 200;
        let mut pos = vec![NOWHERE; n];
        let mut h = IxHeap::default();
        h.reserve_total(n);
        for s in 0..n as u32 {
            h.push((next() % 50) as i64 - 25, s, &mut pos);
        }
        assert!(h.is_sound(&pos));
        let mut inside: Vec<u32> = (0..n as u32).collect();
        while let Some(k) = (!inside.is_empty()).then(|| (next() % inside.len() as u64) as usize) {
            let s = inside.swap_remove(k);
            let (_, got) = h.remove_at(pos[s as usize] as usize, &mut pos);
            assert_eq!(got, s);
            assert_eq!(pos[s as usize], NOWHERE);
            assert!(h.is_sound(&pos), "after taking out {s}");
        }
        assert_eq!(h.pop(&mut pos), None);
    }
}
