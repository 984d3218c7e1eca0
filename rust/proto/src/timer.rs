// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Time as data: the caller's clock enters as an [`Instant`] argument.
//!
//! The core never reads a clock. Durations are plain `u64` nanoseconds.

/// A point in time, in nanoseconds since an arbitrary epoch chosen by the caller.
///
/// The caller's clock MUST be monotonic; the core tolerates (ignores) time that
/// goes backwards by using saturating arithmetic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

impl Instant {
    /// The epoch.
    pub const ZERO: Instant = Instant(0);

    /// Creates an instant `ns` nanoseconds after the epoch.
    pub const fn from_nanos(ns: u64) -> Self {
        Instant(ns)
    }

    /// Nanoseconds since the epoch.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// This instant plus `ns` nanoseconds, saturating at the end of time.
    pub const fn add_nanos(self, ns: u64) -> Self {
        Instant(self.0.saturating_add(ns))
    }

    /// Nanoseconds from `earlier` to `self`, or 0 if `earlier` is later.
    pub const fn nanos_since(self, earlier: Instant) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

/// Earliest of two optional deadlines.
pub(crate) fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if x <= y { x } else { y }),
        (x, None) => x,
        (None, y) => y,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saturates() {
        let t = Instant::from_nanos(u64::MAX - 1);
        assert_eq!(t.add_nanos(10).as_nanos(), u64::MAX);
        assert_eq!(Instant::ZERO.nanos_since(t), 0);
        assert_eq!(t.nanos_since(Instant::ZERO), u64::MAX - 1);
    }

    #[test]
    fn earliest_picks_min() {
        let a = Some(Instant::from_nanos(5));
        let b = Some(Instant::from_nanos(3));
        assert_eq!(earliest(a, b), b);
        assert_eq!(earliest(a, None), a);
        assert_eq!(earliest(None, None), None);
    }
}
