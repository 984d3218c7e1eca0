// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! ACK packets: per-path cumulative PSN, 256-bit SACK, ECN echo, rate hint.
//!
//! ACK extension (after the common header, at byte 16):
//!
//! | Offset | Size | Field     | Meaning                                              |
//! |-------:|-----:|-----------|------------------------------------------------------|
//! | 0      | 4    | rate_hint | receiver's fair-share rate for this sender, Mbit/s; 0 = none |
//! | 4      | 2    | ack_delay | time the ACK was held back, microseconds             |
//! | 6      | 1    | count     | number of path blocks that follow (0..=16)           |
//! | 7      | 1    | reserved  | zero                                                 |
//!
//! Each path block (40 bytes, from byte 24):
//!
//! | Offset | Size | Field    | Meaning                                                     |
//! |-------:|-----:|----------|-------------------------------------------------------------|
//! | 0      | 1    | path     | sender's path id being acknowledged                         |
//! | 1      | 1    | reserved | zero                                                        |
//! | 2      | 2    | ce_count | CE-marked data packets received on the path, mod 2^16       |
//! | 4      | 4    | cum_psn  | every PSN before it was received (or abandoned by the sender) |
//! | 8      | 32   | sack     | bit `i` (bit `i % 8` of byte `i / 8`): PSN `cum_psn + i` received |
//!
//= Documentation/metaroce/spec.rst#ack

use super::{get_u16, get_u32, get_u8, put, put_u16, put_u32, put_u8, Error, Result};
use crate::constants::{
    ACK_BLOCK_LEN, ACK_HEADER_LEN, COMMON_HEADER_LEN, MAX_ACK_BLOCKS, SACK_BYTES,
};

/// The fixed part of the ACK extension.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AckHeader {
    /// Fair-share rate hint in Mbit/s (0 = none).
    pub rate_hint: u32,
    /// ACK delay in microseconds.
    pub ack_delay: u16,
    /// Number of path blocks.
    pub count: u8,
}

impl AckHeader {
    const OFF: usize = COMMON_HEADER_LEN;

    /// Parses the fixed part (`buf` starts at the common header) and checks the
    /// buffer holds all announced blocks.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let o = Self::OFF;
        let h = AckHeader {
            rate_hint: get_u32(buf, o)?,
            ack_delay: get_u16(buf, o + 4)?,
            count: get_u8(buf, o + 6)?,
        };
        if usize::from(h.count) > MAX_ACK_BLOCKS {
            return Err(Error::Malformed);
        }
        if buf.len() < Self::total_len(h.count) {
            return Err(Error::Truncated);
        }
        Ok(h)
    }

    /// Writes the fixed part (`buf` starts at the common header).
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let o = Self::OFF;
        put_u32(buf, o, self.rate_hint)?;
        put_u16(buf, o + 4, self.ack_delay)?;
        put_u8(buf, o + 6, self.count)?;
        put_u8(buf, o + 7, 0)
    }

    /// Length of an ACK packet with `count` blocks.
    pub const fn total_len(count: u8) -> usize {
        COMMON_HEADER_LEN + ACK_HEADER_LEN + count as usize * ACK_BLOCK_LEN
    }
}

/// One path block of an ACK.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AckBlock {
    /// Path id.
    pub path: u8,
    /// Duplicate data packets received on the path, mod 2^8.
    pub dup_count: u8,
    /// CE-marked packets received on the path, mod 2^16.
    pub ce_count: u16,
    /// Cumulative PSN.
    pub cum_psn: u32,
    /// SACK bitmap relative to `cum_psn`.
    pub sack: [u8; SACK_BYTES],
}

impl AckBlock {
    /// Byte offset of field `field` of block `i`.
    fn offset(i: usize, field: usize) -> Result<usize> {
        i.checked_mul(ACK_BLOCK_LEN)
            .and_then(|x| x.checked_add(COMMON_HEADER_LEN + ACK_HEADER_LEN + field))
            .ok_or(Error::Truncated)
    }

    /// Parses block `i` (`buf` starts at the common header).
    pub fn parse(buf: &[u8], i: usize) -> Result<Self> {
        let mut sack = [0u8; SACK_BYTES];
        let start = Self::offset(i, 8)?;
        let end = Self::offset(i, ACK_BLOCK_LEN)?;
        sack.copy_from_slice(buf.get(start..end).ok_or(Error::Truncated)?);
        Ok(AckBlock {
            path: get_u8(buf, Self::offset(i, 0)?)?,
            dup_count: get_u8(buf, Self::offset(i, 1)?)?,
            ce_count: get_u16(buf, Self::offset(i, 2)?)?,
            cum_psn: get_u32(buf, Self::offset(i, 4)?)?,
            sack,
        })
    }

    /// Writes block `i` (`buf` starts at the common header).
    pub fn emit(&self, buf: &mut [u8], i: usize) -> Result<()> {
        put_u8(buf, Self::offset(i, 0)?, self.path)?;
        put_u8(buf, Self::offset(i, 1)?, self.dup_count)?;
        put_u16(buf, Self::offset(i, 2)?, self.ce_count)?;
        put_u32(buf, Self::offset(i, 4)?, self.cum_psn)?;
        put(buf, Self::offset(i, 8)?, &self.sack)
    }

    /// Whether `psn` is acknowledged by this block (`None`: beyond the bitmap).
    pub fn acks(&self, psn: u32) -> Option<bool> {
        let d = crate::psn::seq_diff(psn, self.cum_psn);
        if d < 0 {
            return Some(true);
        }
        let i = d as u32 as usize;
        self.sack.get(i / 8).map(|b| b >> (i % 8) & 1 == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // spec: MR-WIRE-14
    #[test]
    fn block_acks() {
        let mut b = AckBlock {
            cum_psn: 100,
            ..Default::default()
        };
        b.sack[0] = 0b100;
        assert_eq!(b.acks(99), Some(true));
        assert_eq!(b.acks(100), Some(false));
        assert_eq!(b.acks(102), Some(true));
        assert_eq!(b.acks(355), Some(false));
        assert_eq!(b.acks(356), None);
    }

    // spec: MR-WIRE-15
    #[test]
    fn count_checked() {
        let mut buf = [0u8; 64];
        AckHeader {
            count: 17,
            ..Default::default()
        }
        .emit(&mut buf)
        .unwrap();
        assert_eq!(AckHeader::parse(&buf), Err(Error::Malformed));
        AckHeader {
            count: 2,
            ..Default::default()
        }
        .emit(&mut buf)
        .unwrap();
        assert_eq!(AckHeader::parse(&buf), Err(Error::Truncated));
        AckHeader {
            count: 1,
            ..Default::default()
        }
        .emit(&mut buf)
        .unwrap();
        assert!(AckHeader::parse(&buf).is_ok());
    }
}
