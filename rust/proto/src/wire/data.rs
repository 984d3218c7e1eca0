// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Data packets: the stream header and the per-type extension.
//!
//! Stream header (after the common header, at byte 16):
//!
//! | Offset | Size | Field  | Meaning                                                   |
//! |-------:|-----:|--------|-----------------------------------------------------------|
//! | 0      | 4    | qpn    | destination QP number                                     |
//! | 4      | 4    | msn    | message sequence number of the work request (per QP)      |
//! | 8      | 4    | ssn    | stream segment number (per QP and direction, contiguous)  |
//! | 12     | 4    | offset | byte offset of this payload in the message                |
//!
//! Extension (after the stream header, at byte 32), by type:
//!
//! | Type         | Fields (size in bytes)                                        | Len |
//! |--------------|---------------------------------------------------------------|----:|
//! | SEND         | rsn 4, total_len 4                                            | 8   |
//! | SEND_IMM     | rsn 4, total_len 4, imm 4                                     | 12  |
//! | WRITE        | rkey 4, va 8, total_len 4                                     | 16  |
//! | WRITE_IMM    | rkey 4, va 8, total_len 4, rsn 4, imm 4                       | 24  |
//! | READ_REQ     | rkey 4, va 8, len 4                                           | 16  |
//! | READ_RESP    | total_len 4, status 1, reserved 3                             | 8   |
//! | CMP_SWAP     | rkey 4, va 8, compare 8, swap 8                               | 28  |
//! | FETCH_ADD    | rkey 4, va 8, add 8, reserved 8                               | 28  |
//! | ATOMIC_RESP  | orig 8, status 1, reserved 3                                  | 12  |
//!
//! `va` is the message's base address: a WRITE payload lands at `va + offset`.
//! `rsn` (receive sequence number) selects the posted receive WQE a SEND (or the
//! immediate of a WRITE_IMM) consumes. For READ_RESP and ATOMIC_RESP the stream
//! header's `qpn` is the requester's QP, `msn` the request's MSN, and `ssn`
//! counts in the responder-to-requester stream.
//!
//= Documentation/metaroce/spec.rst#data-packets

use super::{get_u32, get_u64, get_u8, put_u32, put_u64, put_u8, Error, PacketType, Result};
use crate::constants::{COMMON_HEADER_LEN, STREAM_HEADER_LEN};

/// Status carried by READ_RESP and ATOMIC_RESP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Status {
    /// Success.
    #[default]
    Ok = 0,
    /// Remote access error (rkey, bounds or permissions).
    AccessError = 2,
    /// Invalid request.
    InvalidRequest = 3,
    /// Remote operational error.
    RemoteOpError = 4,
}

impl Status {
    /// Decodes a status byte.
    pub fn from_u8(v: u8) -> Result<Self> {
        Ok(match v {
            0 => Self::Ok,
            2 => Self::AccessError,
            3 => Self::InvalidRequest,
            4 => Self::RemoteOpError,
            _ => return Err(Error::Malformed),
        })
    }
}

/// The stream header of a data packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct StreamHeader {
    /// Destination QP number.
    pub qpn: u32,
    /// Message sequence number.
    pub msn: u32,
    /// Stream segment number.
    pub ssn: u32,
    /// Byte offset of the payload in the message.
    pub offset: u32,
}

impl StreamHeader {
    /// Length in bytes.
    pub const LEN: usize = STREAM_HEADER_LEN;
    const OFF: usize = COMMON_HEADER_LEN;

    /// Parses the stream header of a data packet (`buf` starts at the common header).
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let o = Self::OFF;
        Ok(StreamHeader {
            qpn: get_u32(buf, o)?,
            msn: get_u32(buf, o + 4)?,
            ssn: get_u32(buf, o + 8)?,
            offset: get_u32(buf, o + 12)?,
        })
    }

    /// Writes the stream header (`buf` starts at the common header).
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let o = Self::OFF;
        put_u32(buf, o, self.qpn)?;
        put_u32(buf, o + 4, self.msn)?;
        put_u32(buf, o + 8, self.ssn)?;
        put_u32(buf, o + 12, self.offset)
    }
}

/// The type-specific extension of a data packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DataExt {
    /// SEND or SEND_IMM (`imm` present iff SEND_IMM).
    Send {
        /// Receive sequence number.
        rsn: u32,
        /// Message length.
        total_len: u32,
        /// Immediate data.
        imm: Option<u32>,
    },
    /// WRITE or WRITE_IMM (`rsn`/`imm` present iff WRITE_IMM).
    Write {
        /// Remote key.
        rkey: u32,
        /// Message base virtual address.
        va: u64,
        /// Message length.
        total_len: u32,
        /// Receive sequence number and immediate data (WRITE_IMM).
        imm: Option<(u32, u32)>,
    },
    /// READ request.
    ReadReq {
        /// Remote key.
        rkey: u32,
        /// Remote virtual address.
        va: u64,
        /// Bytes to read.
        len: u32,
    },
    /// READ response segment.
    ReadResp {
        /// Total length of the READ.
        total_len: u32,
        /// Execution status.
        status: Status,
    },
    /// Atomic request (CMP_SWAP if `swap` is `Some`, else FETCH_ADD).
    Atomic {
        /// Remote key.
        rkey: u32,
        /// Remote virtual address (8-byte aligned).
        va: u64,
        /// Compare value (CMP_SWAP) or addend (FETCH_ADD).
        compare_add: u64,
        /// Swap value (CMP_SWAP only).
        swap: Option<u64>,
    },
    /// Atomic response.
    AtomicResp {
        /// Original value at the target.
        orig: u64,
        /// Execution status.
        status: Status,
    },
}

impl DataExt {
    /// The packet type this extension belongs to.
    pub fn packet_type(&self) -> PacketType {
        match self {
            DataExt::Send { imm: None, .. } => PacketType::Send,
            DataExt::Send { imm: Some(_), .. } => PacketType::SendImm,
            DataExt::Write { imm: None, .. } => PacketType::Write,
            DataExt::Write { imm: Some(_), .. } => PacketType::WriteImm,
            DataExt::ReadReq { .. } => PacketType::ReadReq,
            DataExt::ReadResp { .. } => PacketType::ReadResp,
            DataExt::Atomic { swap: Some(_), .. } => PacketType::CmpSwap,
            DataExt::Atomic { swap: None, .. } => PacketType::FetchAdd,
            DataExt::AtomicResp { .. } => PacketType::AtomicResp,
        }
    }

    /// Extension length in bytes for a data packet type.
    pub fn len_of(ty: PacketType) -> usize {
        match ty {
            PacketType::Send => 8,
            PacketType::SendImm => 12,
            PacketType::Write => 16,
            PacketType::WriteImm => 24,
            PacketType::ReadReq => 16,
            PacketType::ReadResp => 8,
            PacketType::CmpSwap | PacketType::FetchAdd => 28,
            PacketType::AtomicResp => 12,
            PacketType::Ack | PacketType::Nak | PacketType::Control => 0,
        }
    }

    /// Total header length (common + stream + extension) of a data packet type.
    pub fn header_len(ty: PacketType) -> usize {
        COMMON_HEADER_LEN + STREAM_HEADER_LEN + Self::len_of(ty)
    }

    /// Parses the extension of a data packet of type `ty` (`buf` starts at the common header).
    pub fn parse(ty: PacketType, buf: &[u8]) -> Result<Self> {
        let o = COMMON_HEADER_LEN + STREAM_HEADER_LEN;
        if buf.len() < Self::header_len(ty) {
            return Err(Error::Truncated);
        }
        Ok(match ty {
            PacketType::Send | PacketType::SendImm => DataExt::Send {
                rsn: get_u32(buf, o)?,
                total_len: get_u32(buf, o + 4)?,
                imm: if ty == PacketType::SendImm {
                    Some(get_u32(buf, o + 8)?)
                } else {
                    None
                },
            },
            PacketType::Write | PacketType::WriteImm => DataExt::Write {
                rkey: get_u32(buf, o)?,
                va: get_u64(buf, o + 4)?,
                total_len: get_u32(buf, o + 12)?,
                imm: if ty == PacketType::WriteImm {
                    Some((get_u32(buf, o + 16)?, get_u32(buf, o + 20)?))
                } else {
                    None
                },
            },
            PacketType::ReadReq => DataExt::ReadReq {
                rkey: get_u32(buf, o)?,
                va: get_u64(buf, o + 4)?,
                len: get_u32(buf, o + 12)?,
            },
            PacketType::ReadResp => DataExt::ReadResp {
                total_len: get_u32(buf, o)?,
                status: Status::from_u8(get_u8(buf, o + 4)?)?,
            },
            PacketType::CmpSwap | PacketType::FetchAdd => DataExt::Atomic {
                rkey: get_u32(buf, o)?,
                va: get_u64(buf, o + 4)?,
                compare_add: get_u64(buf, o + 12)?,
                swap: if ty == PacketType::CmpSwap {
                    Some(get_u64(buf, o + 20)?)
                } else {
                    None
                },
            },
            PacketType::AtomicResp => DataExt::AtomicResp {
                orig: get_u64(buf, o)?,
                status: Status::from_u8(get_u8(buf, o + 8)?)?,
            },
            PacketType::Ack | PacketType::Nak | PacketType::Control => {
                return Err(Error::UnknownType)
            }
        })
    }

    /// Writes the extension (`buf` starts at the common header); returns the total header length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let o = COMMON_HEADER_LEN + STREAM_HEADER_LEN;
        let len = Self::header_len(self.packet_type());
        if buf.len() < len {
            return Err(Error::Truncated);
        }
        match *self {
            DataExt::Send {
                rsn,
                total_len,
                imm,
            } => {
                put_u32(buf, o, rsn)?;
                put_u32(buf, o + 4, total_len)?;
                if let Some(imm) = imm {
                    put_u32(buf, o + 8, imm)?;
                }
            }
            DataExt::Write {
                rkey,
                va,
                total_len,
                imm,
            } => {
                put_u32(buf, o, rkey)?;
                put_u64(buf, o + 4, va)?;
                put_u32(buf, o + 12, total_len)?;
                if let Some((rsn, imm)) = imm {
                    put_u32(buf, o + 16, rsn)?;
                    put_u32(buf, o + 20, imm)?;
                }
            }
            DataExt::ReadReq { rkey, va, len } => {
                put_u32(buf, o, rkey)?;
                put_u64(buf, o + 4, va)?;
                put_u32(buf, o + 12, len)?;
            }
            DataExt::ReadResp { total_len, status } => {
                put_u32(buf, o, total_len)?;
                put_u8(buf, o + 4, status as u8)?;
                put_u8(buf, o + 5, 0)?;
                put_u8(buf, o + 6, 0)?;
                put_u8(buf, o + 7, 0)?;
            }
            DataExt::Atomic {
                rkey,
                va,
                compare_add,
                swap,
            } => {
                put_u32(buf, o, rkey)?;
                put_u64(buf, o + 4, va)?;
                put_u64(buf, o + 12, compare_add)?;
                put_u64(buf, o + 20, swap.unwrap_or(0))?;
            }
            DataExt::AtomicResp { orig, status } => {
                put_u64(buf, o, orig)?;
                put_u8(buf, o + 8, status as u8)?;
                put_u8(buf, o + 9, 0)?;
                put_u8(buf, o + 10, 0)?;
                put_u8(buf, o + 11, 0)?;
            }
        }
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // spec: MR-GEN-2
    #[test]
    fn write_imm_layout() {
        let e = DataExt::Write {
            rkey: 0x11,
            va: 0x0102_0304_0506_0708,
            total_len: 9,
            imm: Some((3, 4)),
        };
        let mut b = [0u8; 56];
        assert_eq!(e.emit(&mut b), Ok(56));
        assert_eq!(&b[32..36], &[0, 0, 0, 0x11]);
        assert_eq!(&b[36..44], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(DataExt::parse(PacketType::WriteImm, &b), Ok(e));
        assert_eq!(
            DataExt::parse(PacketType::WriteImm, &b[..55]),
            Err(Error::Truncated)
        );
    }

    // spec: MR-WIRE-13
    #[test]
    fn bad_status_rejected() {
        let mut b = [0u8; 40];
        b[36] = 9;
        assert_eq!(
            DataExt::parse(PacketType::ReadResp, &b),
            Err(Error::Malformed)
        );
    }

    #[test]
    fn max_len() {
        assert_eq!(
            DataExt::header_len(PacketType::CmpSwap),
            crate::constants::MAX_DATA_HEADER_LEN
        );
    }
}
