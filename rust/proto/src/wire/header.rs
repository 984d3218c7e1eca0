// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The common header that starts every MetaRoCE packet.
//!
//! | Offset | Size | Field      | Meaning                                                   |
//! |-------:|-----:|------------|-----------------------------------------------------------|
//! | 0      | 1    | version    | [`VERSION_DRAFT0`] (0xD0)                                  |
//! | 1      | 1    | type       | [`PacketType`]                                            |
//! | 2      | 1    | flags      | [`Flags`]                                                 |
//! | 3      | 1    | path       | sender's path id (data packets; 0 otherwise)              |
//! | 4      | 4    | dst_conn   | receiver's connection id; 0 = unknown (needs `OPEN`)      |
//! | 8      | 4    | src_conn   | sender's connection id (never 0)                          |
//! | 12     | 4    | psn        | per-path packet sequence number (data packets; 0 otherwise) |
//!
//= Documentation/metaroce/spec.rst#common-header

use super::{get_u32, get_u8, put_u32, put_u8, Error, Result};
use crate::constants::{COMMON_HEADER_LEN, VERSION_DRAFT0};

/// The packet type field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PacketType {
    /// SEND segment.
    Send = 0x01,
    /// SEND with immediate data.
    SendImm = 0x02,
    /// RDMA WRITE segment.
    Write = 0x03,
    /// RDMA WRITE with immediate data.
    WriteImm = 0x04,
    /// RDMA READ request.
    ReadReq = 0x05,
    /// RDMA READ response segment.
    ReadResp = 0x06,
    /// Atomic compare-and-swap request.
    CmpSwap = 0x07,
    /// Atomic fetch-and-add request.
    FetchAdd = 0x08,
    /// Atomic response (original value).
    AtomicResp = 0x09,
    /// Acknowledgement: per-path cumulative PSN and SACK bitmap.
    Ack = 0x10,
    /// Negative acknowledgement of one packet.
    Nak = 0x11,
    /// Connection control.
    Control = 0x12,
}

impl PacketType {
    /// Decodes the type field.
    pub fn from_u8(v: u8) -> Result<Self> {
        Ok(match v {
            0x01 => Self::Send,
            0x02 => Self::SendImm,
            0x03 => Self::Write,
            0x04 => Self::WriteImm,
            0x05 => Self::ReadReq,
            0x06 => Self::ReadResp,
            0x07 => Self::CmpSwap,
            0x08 => Self::FetchAdd,
            0x09 => Self::AtomicResp,
            0x10 => Self::Ack,
            0x11 => Self::Nak,
            0x12 => Self::Control,
            _ => return Err(Error::UnknownType),
        })
    }

    /// Whether packets of this type carry a stream header, a PSN and are acknowledged.
    pub fn is_data(self) -> bool {
        (self as u8) < 0x10
    }

    /// Whether this type travels from responder to requester.
    pub fn is_response(self) -> bool {
        matches!(self, Self::ReadResp | Self::AtomicResp)
    }
}

/// The flags field (a bit set).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Flags(pub u8);

impl Flags {
    /// First segment of a message.
    pub const FIRST: u8 = 0x01;
    /// Last segment of a message.
    pub const LAST: u8 = 0x02;
    /// The sender does not yet know the receiver's connection id; the packet
    /// opens the connection (0-RTT).
    pub const OPEN: u8 = 0x04;
    /// The receiver should acknowledge without delay.
    pub const ACK_REQ: u8 = 0x08;
    /// Solicited event (SEND/WRITE_IMM with IBV_SEND_SOLICITED).
    pub const SOLICITED: u8 = 0x10;
    /// Bits defined by draft v0; others MUST be sent as zero and ignored.
    pub const KNOWN: u8 = 0x1f;

    /// Whether `bit` is set.
    pub const fn has(self, bit: u8) -> bool {
        self.0 & bit != 0
    }
}

/// The common header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Header {
    /// Packet type.
    pub ty: u8,
    /// Flags.
    pub flags: Flags,
    /// Sender's path id.
    pub path: u8,
    /// Receiver's connection id (0 = unknown).
    pub dst_conn: u32,
    /// Sender's connection id.
    pub src_conn: u32,
    /// Per-path packet sequence number.
    pub psn: u32,
}

impl Header {
    /// Length in bytes.
    pub const LEN: usize = COMMON_HEADER_LEN;

    /// Creates a header of type `ty`.
    pub fn new(ty: PacketType) -> Self {
        Header {
            ty: ty as u8,
            ..Default::default()
        }
    }

    /// Decoded packet type.
    pub fn packet_type(&self) -> Result<PacketType> {
        PacketType::from_u8(self.ty)
    }

    /// Whether the packet's sender is waiting on what it triggers: an acknowledgement
    /// it asked for (`ACK_REQ`), or, for a packet that acknowledges or answers (ACK,
    /// NAK, control, READ or atomic response), the completions it brings. Other data
    /// packets are the body of a stream: a receiver may batch them. An unknown type
    /// is not awaited.
    pub fn is_awaited(&self) -> bool {
        self.flags.has(Flags::ACK_REQ)
            || self
                .packet_type()
                .is_ok_and(|t| !t.is_data() || t.is_response())
    }

    /// Parses and validates the common header at the start of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        if buf.len() < Self::LEN {
            return Err(Error::Truncated);
        }
        if get_u8(buf, 0)? != VERSION_DRAFT0 {
            return Err(Error::Version);
        }
        let ty = get_u8(buf, 1)?;
        PacketType::from_u8(ty)?;
        let h = Header {
            ty,
            flags: Flags(get_u8(buf, 2)? & Flags::KNOWN),
            path: get_u8(buf, 3)?,
            dst_conn: get_u32(buf, 4)?,
            src_conn: get_u32(buf, 8)?,
            psn: get_u32(buf, 12)?,
        };
        if h.src_conn == 0 {
            return Err(Error::Malformed);
        }
        Ok(h)
    }

    /// Writes the header into the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        if buf.len() < Self::LEN {
            return Err(Error::Truncated);
        }
        put_u8(buf, 0, VERSION_DRAFT0)?;
        put_u8(buf, 1, self.ty)?;
        put_u8(buf, 2, self.flags.0 & Flags::KNOWN)?;
        put_u8(buf, 3, self.path)?;
        put_u32(buf, 4, self.dst_conn)?;
        put_u32(buf, 8, self.src_conn)?;
        put_u32(buf, 12, self.psn)?;
        Ok(Self::LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // spec: MR-GEN-2, MR-WIRE-8
    #[test]
    fn roundtrip_and_layout() {
        let h = Header {
            ty: PacketType::Write as u8,
            flags: Flags(Flags::FIRST | Flags::OPEN),
            path: 7,
            dst_conn: 0x0102_0304,
            src_conn: 0x0a0b_0c0d,
            psn: 0xdead_beef,
        };
        let mut b = [0u8; 16];
        assert_eq!(h.emit(&mut b), Ok(16));
        assert_eq!(
            b,
            [0xD0, 3, 5, 7, 1, 2, 3, 4, 0xa, 0xb, 0xc, 0xd, 0xde, 0xad, 0xbe, 0xef]
        );
        assert_eq!(Header::parse(&b), Ok(h));
    }

    // spec: MR-WIRE-8, MR-WIRE-9
    #[test]
    fn rejects_bad_input() {
        let mut b = [0u8; 16];
        assert_eq!(Header::parse(&b[..15]), Err(Error::Truncated));
        assert_eq!(Header::parse(&b), Err(Error::Version));
        b[0] = VERSION_DRAFT0;
        b[1] = 0x42;
        assert_eq!(Header::parse(&b), Err(Error::UnknownType));
        b[1] = 0x10;
        assert_eq!(Header::parse(&b), Err(Error::Malformed));
        b[11] = 1;
        assert!(Header::parse(&b).is_ok());
        assert_eq!(
            Header::new(PacketType::Ack).emit(&mut [0u8; 3]),
            Err(Error::Truncated)
        );
    }

    #[test]
    fn awaited_packets() {
        use PacketType::*;
        for ty in [Ack, Nak, Control, ReadResp, AtomicResp] {
            assert!(Header::new(ty).is_awaited(), "{ty:?}");
        }
        for ty in [Send, SendImm, Write, WriteImm, ReadReq, CmpSwap, FetchAdd] {
            let mut h = Header::new(ty);
            assert!(!h.is_awaited(), "{ty:?}");
            h.flags = Flags(Flags::LAST | Flags::ACK_REQ);
            assert!(h.is_awaited(), "{ty:?}");
        }
        assert!(!Header {
            ty: 0x42,
            ..Default::default()
        }
        .is_awaited());
    }
}
