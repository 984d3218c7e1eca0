// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! A small seeded random number generator (SplitMix64).
//!
//! Each source of randomness (every link, every host) owns its own generator
//! derived from the run's seed and its identity, so adding a packet on one link
//! does not shift the random choices of another.

/// SplitMix64: fast, statistically fine for simulation, not cryptographic.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// An independent generator for sub-stream `id` of `seed`.
    pub fn derive(seed: u64, id: u64) -> Self {
        let mut r = Rng(seed ^ id.wrapping_mul(0xD6E8_FEB8_6659_FD93));
        r.next_u64();
        r
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform float in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p` (no draw when `p <= 0`, so a fault-free link
    /// consumes no randomness).
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.unit() < p
    }

    /// A uniform integer in `[0, n)`; 0 when `n == 0`.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_in_range() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
            let x = a.below(10);
            assert!(x < 10);
            b.below(10);
        }
        assert!(!Rng::new(1).chance(0.0));
        let hits = (0..10_000).filter(|_| a.chance(0.1)).count();
        assert!((800..1200).contains(&hits), "{hits}");
    }
}
