// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! A tiny caller-seeded PRNG (xorshift64*): the core never calls an RNG.

/// Xorshift64* generator. Not cryptographic: it only spreads source ports and
/// initial sequence numbers.
#[derive(Clone, Debug, Default)]
pub(crate) struct Rng(u64);

impl Rng {
    /// Seeds the generator; a zero seed is replaced by a fixed odd constant.
    pub(crate) fn new(seed: u64) -> Self {
        Rng(if seed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            seed
        })
    }

    /// Next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        if self.0 == 0 {
            self.0 = 0x9E37_79B9_7F4A_7C15;
        }
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Next 32 random bits.
    pub(crate) fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_nonzero() {
        let mut a = Rng::new(1);
        let mut b = Rng::new(1);
        assert_eq!(a.next_u64(), b.next_u64());
        let mut z = Rng::default();
        assert_ne!(z.next_u64(), 0);
    }
}
