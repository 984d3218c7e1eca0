// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Serial-number arithmetic for 32-bit sequence numbers (PSN, SSN, MSN).
//!
//! Sequence numbers wrap; `a` is before `b` when the wrapping distance from
//! `a` to `b` is below 2^31 (RFC 1982 style).
//!
//= Documentation/metaroce/spec.rst#sequence-numbers

/// Signed distance from `b` to `a` (`a - b`), correct across wraparound when
/// the true distance is below 2^31.
pub(crate) const fn seq_diff(a: u32, b: u32) -> i32 {
    a.wrapping_sub(b) as i32
}

/// `a` comes strictly before `b`.
pub(crate) const fn seq_lt(a: u32, b: u32) -> bool {
    seq_diff(a, b) < 0
}

/// A per-path packet sequence number. Never reused: a retransmission is a new
/// packet with a new PSN.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Psn(pub u32);

impl Psn {
    /// The PSN `n` after this one.
    pub const fn add(self, n: u32) -> Psn {
        Psn(self.0.wrapping_add(n))
    }

    /// Signed distance `self - other`.
    pub const fn diff(self, other: Psn) -> i32 {
        seq_diff(self.0, other.0)
    }

    /// This PSN comes strictly before `other`.
    pub const fn before(self, other: Psn) -> bool {
        seq_lt(self.0, other.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // spec: MR-GEN-4
    #[test]
    fn wraparound() {
        let a = Psn(u32::MAX - 1);
        let b = a.add(3);
        assert_eq!(b, Psn(1));
        assert_eq!(b.diff(a), 3);
        assert_eq!(a.diff(b), -3);
        assert!(a.before(b));
        assert!(!b.before(a));
        assert!(!a.before(a));
    }

    // spec: MR-GEN-4
    #[test]
    fn half_range() {
        assert!(seq_lt(0, 0x7fff_ffff));
        assert!(!seq_lt(0, 0x8000_0001));
    }
}
