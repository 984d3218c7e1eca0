// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! A token bucket for work that a packet can cause before it is authenticated
//! (spec [MR-SEC-8]): the caller keeps one, asks [`TokenBucket::take`] before the
//! work and drops (and counts) the packet when it says no.

use crate::timer::Instant;

/// `rate` tokens per second, at most `burst` saved up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenBucket {
    rate: u32,
    burst: u32,
    /// Tokens, in units of 1/`rate` seconds times 10^9 (nanosecond-tokens), so that
    /// refilling never rounds a token away.
    credit_ns: u64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket at `now`. A `rate` of 0 lets nothing through after the burst.
    pub const fn new(rate: u32, burst: u32, now: Instant) -> Self {
        Self {
            rate,
            burst,
            credit_ns: burst as u64 * 1_000_000_000,
            last: now,
        }
    }

    /// Takes one token at `now`; `false` when there is none. Time that goes
    /// backwards adds nothing.
    pub fn take(&mut self, now: Instant) -> bool {
        let cap = u64::from(self.burst).saturating_mul(1_000_000_000);
        let earned = now
            .nanos_since(self.last)
            .saturating_mul(u64::from(self.rate));
        self.credit_ns = self.credit_ns.saturating_add(earned).min(cap);
        if now > self.last {
            self.last = now;
        }
        match self.credit_ns.checked_sub(1_000_000_000) {
            Some(left) => {
                self.credit_ns = left;
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    // spec: MR-SEC-8
    #[test]
    fn burst_then_rate() {
        let mut b = TokenBucket::new(1000, 64, at(0));
        assert_eq!((0..100).filter(|_| b.take(at(0))).count(), 64);
        // 1000 per second: one per millisecond, none saved beyond the burst.
        assert!(b.take(at(1)));
        assert!(!b.take(at(1)));
        assert_eq!((0..1000).filter(|_| b.take(at(1000))).count(), 64);
        // 10 seconds of 10 packets per millisecond: 10 ms refill 10.
        let mut passed = 0;
        for ms in 2000..12000 {
            passed += (0..10).filter(|_| b.take(at(ms))).count();
        }
        assert!((10_000..=10_064).contains(&passed), "{passed}");
    }

    #[test]
    fn clock_backwards_and_extremes() {
        let mut b = TokenBucket::new(u32::MAX, u32::MAX, Instant::from_nanos(u64::MAX));
        assert!(b.take(Instant::ZERO));
        let mut z = TokenBucket::new(0, 1, at(5));
        assert!(z.take(at(5)));
        assert!(!z.take(Instant::from_nanos(u64::MAX)));
    }
}
