// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! A cumulative sequence number plus a fixed-size bitmap of what lies beyond it.
//!
//! One type serves three roles: the receiver's per-path SACK state (256 bits),
//! the receiver's per-QP reassembly window over stream segment numbers, and the
//! sender's per-QP record of acknowledged segments.
//!
//= Documentation/metaroce/spec.rst#sack

use crate::psn::seq_diff;

/// Outcome of recording a sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mark {
    /// Newly recorded.
    New,
    /// Already recorded (or below the cumulative point).
    Duplicate,
    /// Beyond the window; nothing recorded.
    Beyond,
}

/// Window of `64 * WORDS` sequence numbers starting at `base`.
///
/// Bit `i` stands for `base + i`. Every sequence number below `base` counts as
/// recorded. After each insertion the window advances over its recorded prefix,
/// so bit 0 is clear unless the window was slid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SeqWindow<const WORDS: usize> {
    base: u32,
    bits: [u64; WORDS],
}

impl<const WORDS: usize> Default for SeqWindow<WORDS> {
    fn default() -> Self {
        Self::new(0)
    }
}

impl<const WORDS: usize> SeqWindow<WORDS> {
    /// Number of sequence numbers the bitmap covers.
    pub(crate) const SPAN: u32 = (WORDS * 64) as u32;

    /// An empty window whose first unrecorded number is `base`.
    pub(crate) const fn new(base: u32) -> Self {
        SeqWindow {
            base,
            bits: [0; WORDS],
        }
    }

    /// Empties the window in place; its first unrecorded number becomes `base`.
    pub(crate) fn reset(&mut self, base: u32) {
        self.base = base;
        self.bits.iter_mut().for_each(|w| *w = 0);
    }

    /// The cumulative point: every number before it is recorded.
    pub(crate) fn base(&self) -> u32 {
        self.base
    }

    /// The raw bitmap (bit `i` stands for `base + i`).
    pub(crate) fn words(&self) -> &[u64; WORDS] {
        &self.bits
    }

    /// Whether `seq` is recorded; `None` when it lies beyond the window.
    pub(crate) fn get(&self, seq: u32) -> Option<bool> {
        let d = seq_diff(seq, self.base);
        if d < 0 {
            return Some(true);
        }
        let i = d as u32;
        if i >= Self::SPAN {
            return None;
        }
        Some(self.bit(i as usize))
    }

    fn bit(&self, i: usize) -> bool {
        self.bits
            .get(i / 64)
            .is_some_and(|w| w >> (i % 64) & 1 == 1)
    }

    /// Records `seq` if it lies inside the window.
    pub(crate) fn insert(&mut self, seq: u32) -> Mark {
        let d = seq_diff(seq, self.base);
        if d < 0 {
            return Mark::Duplicate;
        }
        let i = d as u32;
        if i >= Self::SPAN {
            return Mark::Beyond;
        }
        let i = i as usize;
        let Some(w) = self.bits.get_mut(i / 64) else {
            return Mark::Beyond;
        };
        let m = 1u64 << (i % 64);
        if *w & m != 0 {
            return Mark::Duplicate;
        }
        *w |= m;
        self.advance();
        Mark::New
    }

    /// Records `seq`, first sliding the window forward (forgetting the oldest
    /// holes) if `seq` lies beyond it. Numbers before `base` are duplicates.
    pub(crate) fn insert_sliding(&mut self, seq: u32) -> Mark {
        let d = seq_diff(seq, self.base);
        if d >= 0 && d as u32 >= Self::SPAN {
            let shift = (d as u32).wrapping_sub(Self::SPAN).wrapping_add(1);
            self.shift(shift);
        }
        self.insert(seq)
    }

    /// Moves the cumulative point forward to `seq` (forgetting the holes it
    /// passes, keeping what was recorded beyond it). Returns whether it moved.
    pub(crate) fn advance_to(&mut self, seq: u32) -> bool {
        let d = seq_diff(seq, self.base);
        if d <= 0 {
            return false;
        }
        self.shift(d as u32);
        true
    }

    /// Advances over the recorded prefix.
    fn advance(&mut self) {
        let mut n = 0u32;
        for w in self.bits.iter() {
            let ones = w.trailing_ones();
            n = n.wrapping_add(ones);
            if ones < 64 {
                break;
            }
        }
        if n > 0 {
            self.shift(n);
        }
    }

    /// Moves `base` forward by `n`, dropping the bits it passes.
    fn shift(&mut self, n: u32) {
        self.base = self.base.wrapping_add(n);
        if n >= Self::SPAN {
            self.bits = [0; WORDS];
            return;
        }
        let words = (n / 64) as usize;
        let bits = n % 64;
        for i in 0..WORDS {
            let lo = self.bits.get(i.wrapping_add(words)).copied().unwrap_or(0);
            let hi = self
                .bits
                .get(i.wrapping_add(words).wrapping_add(1))
                .copied()
                .unwrap_or(0);
            let v = if bits == 0 {
                lo
            } else {
                (lo >> bits) | (hi << (64 - bits))
            };
            if let Some(w) = self.bits.get_mut(i) {
                *w = v;
            }
        }
        self.advance();
    }
}

/// The per-path SACK window: 256 bits.
pub(crate) type SackWindow = SeqWindow<{ crate::constants::SACK_BITS / 64 }>;

/// The per-QP reassembly window.
pub(crate) type ReasmWindow = SeqWindow<{ crate::constants::REASM_WINDOW / 64 }>;

#[cfg(test)]
mod tests {
    use super::*;

    // spec: MR-SACK-5
    #[test]
    fn in_order_advances() {
        let mut w = SackWindow::new(10);
        assert_eq!(w.insert(10), Mark::New);
        assert_eq!(w.insert(11), Mark::New);
        assert_eq!(w.base(), 12);
        assert_eq!(w.insert(11), Mark::Duplicate);
        assert_eq!(w.get(5), Some(true));
    }

    // spec: MR-SACK-5
    #[test]
    fn gap_kept_until_filled() {
        let mut w = SackWindow::new(0);
        w.insert(0);
        w.insert(2);
        w.insert(3);
        assert_eq!(w.base(), 1);
        assert_eq!(w.get(1), Some(false));
        assert_eq!(w.get(2), Some(true));
        assert_eq!(w.words()[0], 0b110);
        w.insert(1);
        assert_eq!(w.base(), 4);
        assert_eq!(w.words()[0], 0);
    }

    // spec: MR-SACK-5
    #[test]
    fn beyond_and_sliding() {
        let mut w = SackWindow::new(0);
        assert_eq!(w.insert(256), Mark::Beyond);
        assert_eq!(w.get(256), None);
        w.insert(1);
        assert_eq!(w.insert_sliding(300), Mark::New);
        // Window slid so that 300 is its last bit; hole at 0 forgotten.
        assert_eq!(w.base(), 45);
        assert_eq!(w.get(300), Some(true));
        assert_eq!(w.get(299), Some(false));
    }

    // spec: MR-GEN-4, MR-SACK-5
    #[test]
    fn wraparound() {
        let mut w = SackWindow::new(u32::MAX - 1);
        w.insert(u32::MAX - 1);
        w.insert(u32::MAX);
        w.insert(1);
        assert_eq!(w.base(), 0);
        w.insert(0);
        assert_eq!(w.base(), 2);
    }

    // spec: MR-PLC-2
    #[test]
    fn multiword_shift() {
        let mut w = ReasmWindow::new(0);
        for s in 1..200 {
            w.insert(s);
        }
        assert_eq!(w.base(), 0);
        w.insert(0);
        assert_eq!(w.base(), 200);
        w.insert(1000);
        assert_eq!(w.get(1000), Some(true));
        assert_eq!(w.insert_sliding(5000), Mark::New);
        assert_eq!(w.base(), 5000 - 1023);
    }
}
