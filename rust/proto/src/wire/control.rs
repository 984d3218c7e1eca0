// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Control packets: connection open and close.
//!
//! Control extension (after the common header, at byte 16):
//!
//! | Offset | Size | Field    | Meaning                     |
//! |-------:|-----:|----------|-----------------------------|
//! | 0      | 1    | code     | [`ControlCode`]             |
//! | 1      | 1    | path     | `PATH_FLOOR`: path id; else zero |
//! | 2      | 2    | reserved | zero                        |
//! | 4      | 4    | value    | close reason, or floor PSN  |
//!
//! A connection needs no handshake: the first data packet carries the `OPEN`
//! flag and the sender's connection id, so data flows in the first RTT.
//!
//= Documentation/metaroce/spec.rst#control

use super::{get_u32, get_u8, put_u32, put_u8, Error, Result};
use crate::constants::{COMMON_HEADER_LEN, CONTROL_HEADER_LEN};

/// Control operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ControlCode {
    /// Opens a connection without data (answered by an ACK).
    Open = 1,
    /// Closes the connection; `value` is the reason (0 = normal).
    Close = 2,
    /// The sender's path `path` no longer needs any PSN before `value` (its
    /// oldest unresolved PSN): the receiver may advance its cumulative PSN
    /// over the holes below it.
    PathFloor = 3,
}

/// The control extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Control {
    /// Operation.
    pub code: ControlCode,
    /// Path id (`PathFloor`; 0 otherwise).
    pub path: u8,
    /// Operation-specific value.
    pub value: u32,
}

impl Control {
    const OFF: usize = COMMON_HEADER_LEN;
    /// Total packet length (common header + extension).
    pub const TOTAL_LEN: usize = COMMON_HEADER_LEN + CONTROL_HEADER_LEN;

    /// Parses the extension (`buf` starts at the common header).
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let code = match get_u8(buf, Self::OFF)? {
            1 => ControlCode::Open,
            2 => ControlCode::Close,
            3 => ControlCode::PathFloor,
            _ => return Err(Error::Malformed),
        };
        let path = if code == ControlCode::PathFloor {
            get_u8(buf, Self::OFF + 1)?
        } else {
            0
        };
        Ok(Control {
            code,
            path,
            value: get_u32(buf, Self::OFF + 4)?,
        })
    }

    /// Writes the extension; returns the total packet length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        if buf.len() < Self::TOTAL_LEN {
            return Err(Error::Truncated);
        }
        put_u8(buf, Self::OFF, self.code as u8)?;
        let path = if self.code == ControlCode::PathFloor {
            self.path
        } else {
            0
        };
        put_u8(buf, Self::OFF + 1, path)?;
        for i in 2..4 {
            put_u8(buf, Self::OFF + i, 0)?;
        }
        put_u32(buf, Self::OFF + 4, self.value)?;
        Ok(Self::TOTAL_LEN)
    }
}
