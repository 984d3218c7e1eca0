// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! NAK packets: the responder rejected one data packet.
//!
//! NAK extension (after the common header, at byte 16):
//!
//! | Offset | Size | Field     | Meaning                                                  |
//! |-------:|-----:|-----------|----------------------------------------------------------|
//! | 0      | 1    | path      | path id of the rejected packet                           |
//! | 1      | 1    | code      | [`NakCode`]                                              |
//! | 2      | 1    | rnr_timer | RNR only: retry after this many 10 us units              |
//! | 3      | 1    | reserved  | zero                                                     |
//! | 4      | 4    | psn       | PSN of the rejected packet                               |
//! | 8      | 4    | qpn       | destination QPN of the rejected packet                   |
//! | 12     | 4    | msn       | its MSN                                                  |
//! | 16     | 4    | ssn       | its SSN                                                  |
//!
//! A rejected packet is not acknowledged. NAKs are not themselves acknowledged:
//! a lost NAK is recovered by the sender's retransmission, which is NAKed again.
//!
//= Documentation/metaroce/spec.rst#nak

use super::{get_u32, get_u8, put_u32, put_u8, Error, Result};
use crate::constants::{COMMON_HEADER_LEN, NAK_HEADER_LEN};

/// Why a packet was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum NakCode {
    /// Receiver not ready: no receive WQE posted for the SEND; retry after the timer.
    Rnr = 1,
    /// Remote access error: rkey, bounds or permissions.
    AccessError = 2,
    /// Invalid request (e.g. a SEND longer than the receive buffer, unknown QPN).
    InvalidRequest = 3,
    /// Remote operational error.
    RemoteOpError = 4,
}

impl NakCode {
    /// Decodes a code byte.
    pub fn from_u8(v: u8) -> Result<Self> {
        Ok(match v {
            1 => Self::Rnr,
            2 => Self::AccessError,
            3 => Self::InvalidRequest,
            4 => Self::RemoteOpError,
            _ => return Err(Error::Malformed),
        })
    }
}

/// The NAK extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Nak {
    /// Path id of the rejected packet.
    pub path: u8,
    /// Reason.
    pub code: NakCode,
    /// RNR retry delay in 10 us units.
    pub rnr_timer: u8,
    /// PSN of the rejected packet.
    pub psn: u32,
    /// Destination QPN of the rejected packet.
    pub qpn: u32,
    /// MSN of the rejected packet.
    pub msn: u32,
    /// SSN of the rejected packet.
    pub ssn: u32,
}

impl Nak {
    const OFF: usize = COMMON_HEADER_LEN;
    /// Total packet length (common header + extension).
    pub const TOTAL_LEN: usize = COMMON_HEADER_LEN + NAK_HEADER_LEN;

    /// Parses the extension (`buf` starts at the common header).
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let o = Self::OFF;
        if buf.len() < Self::TOTAL_LEN {
            return Err(Error::Truncated);
        }
        Ok(Nak {
            path: get_u8(buf, o)?,
            code: NakCode::from_u8(get_u8(buf, o + 1)?)?,
            rnr_timer: get_u8(buf, o + 2)?,
            psn: get_u32(buf, o + 4)?,
            qpn: get_u32(buf, o + 8)?,
            msn: get_u32(buf, o + 12)?,
            ssn: get_u32(buf, o + 16)?,
        })
    }

    /// Writes the extension; returns the total packet length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let o = Self::OFF;
        if buf.len() < Self::TOTAL_LEN {
            return Err(Error::Truncated);
        }
        put_u8(buf, o, self.path)?;
        put_u8(buf, o + 1, self.code as u8)?;
        put_u8(buf, o + 2, self.rnr_timer)?;
        put_u8(buf, o + 3, 0)?;
        put_u32(buf, o + 4, self.psn)?;
        put_u32(buf, o + 8, self.qpn)?;
        put_u32(buf, o + 12, self.msn)?;
        put_u32(buf, o + 16, self.ssn)?;
        Ok(Self::TOTAL_LEN)
    }
}
