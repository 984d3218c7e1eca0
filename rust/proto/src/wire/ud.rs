// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Unreliable datagrams (verbs UD QPs): one message per packet, outside any
//! connection.
//!
//! | Offset | Size | Field    | Meaning                                                  |
//! |-------:|-----:|----------|----------------------------------------------------------|
//! | 0      | 16   | common   | [`Header`](super::Header) layout: type [`UD`] or [`UD_IMM`], `dst_conn`, `src_conn`, `path` and `psn` zero |
//! | 16     | 4    | dst_qpn  | destination QP number (24 bits)                           |
//! | 20     | 4    | src_qpn  | source QP number (24 bits)                                |
//! | 24     | 4    | qkey     | the Q_Key the sender presents                             |
//! | 28     | 4    | imm      | immediate data (type [`UD_IMM`] only)                     |
//!
//! The payload follows, the whole message. There is no acknowledgement,
//! retransmission or ordering: a datagram is delivered once or not at all.
//!
//= Documentation/metaroce/spec.rst#unreliable-datagrams

use super::{get_u32, get_u8, put_u32, put_u8, Error, Flags, Result};
use crate::constants::{COMMON_HEADER_LEN, VERSION_DRAFT0};

/// Packet type of a datagram without immediate data.
pub const UD: u8 = 0x20;
/// Packet type of a datagram with immediate data.
pub const UD_IMM: u8 = 0x21;
/// Header length without immediate data.
pub const UD_HEADER_LEN: usize = COMMON_HEADER_LEN + 12;
/// The longest UD header (with immediate data).
pub const MAX_UD_HEADER_LEN: usize = UD_HEADER_LEN + 4;
/// The largest QP number (24 bits).
const QPN_MAX: u32 = 0x00ff_ffff;

/// The header of a datagram.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct UdHeader {
    /// Destination QP.
    pub dst_qpn: u32,
    /// Source QP.
    pub src_qpn: u32,
    /// Q_Key presented by the sender.
    pub qkey: u32,
    /// Immediate data.
    pub imm: Option<u32>,
    /// Solicited event requested.
    pub solicited: bool,
}

impl UdHeader {
    /// Whether `buf` starts like a datagram (version and type); the cheap test a
    /// receiver makes before choosing between connections and datagrams.
    pub fn is_ud(buf: &[u8]) -> bool {
        matches!(buf, [VERSION_DRAFT0, UD | UD_IMM, ..])
    }

    /// The header's length on the wire.
    #[allow(clippy::len_without_is_empty, reason = "a header is never empty")]
    pub fn len(&self) -> usize {
        if self.imm.is_some() {
            MAX_UD_HEADER_LEN
        } else {
            UD_HEADER_LEN
        }
    }

    /// Parses and validates a datagram; returns the header and the payload.
    //= Documentation/metaroce/spec.rst#unreliable-datagrams
    pub fn parse(buf: &[u8]) -> Result<(Self, &[u8])> {
        if buf.len() < UD_HEADER_LEN {
            return Err(Error::Truncated);
        }
        if get_u8(buf, 0)? != VERSION_DRAFT0 {
            return Err(Error::Version);
        }
        let imm = match get_u8(buf, 1)? {
            UD => false,
            UD_IMM => true,
            _ => return Err(Error::UnknownType),
        };
        // [MR-UD-2] Connection fields are zero: a datagram belongs to no connection.
        if get_u32(buf, 4)? != 0 || get_u32(buf, 8)? != 0 {
            return Err(Error::Malformed);
        }
        let flags = Flags(get_u8(buf, 2)?);
        let dst_qpn = get_u32(buf, 16)?;
        let src_qpn = get_u32(buf, 20)?;
        if dst_qpn > QPN_MAX || src_qpn > QPN_MAX {
            return Err(Error::Malformed);
        }
        let mut h = UdHeader {
            dst_qpn,
            src_qpn,
            qkey: get_u32(buf, 24)?,
            imm: None,
            solicited: flags.has(Flags::SOLICITED),
        };
        if imm {
            h.imm = Some(get_u32(buf, UD_HEADER_LEN)?);
        }
        let payload = buf.get(h.len()..).ok_or(Error::Truncated)?;
        Ok((h, payload))
    }

    /// Writes the header into the start of `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        if buf.len() < self.len() {
            return Err(Error::Truncated);
        }
        if self.dst_qpn > QPN_MAX || self.src_qpn > QPN_MAX {
            return Err(Error::Malformed);
        }
        put_u8(buf, 0, VERSION_DRAFT0)?;
        put_u8(buf, 1, if self.imm.is_some() { UD_IMM } else { UD })?;
        put_u8(buf, 2, if self.solicited { Flags::SOLICITED } else { 0 })?;
        put_u8(buf, 3, 0)?;
        for off in [4, 8, 12] {
            put_u32(buf, off, 0)?;
        }
        put_u32(buf, 16, self.dst_qpn)?;
        put_u32(buf, 20, self.src_qpn)?;
        put_u32(buf, 24, self.qkey)?;
        if let Some(imm) = self.imm {
            put_u32(buf, UD_HEADER_LEN, imm)?;
        }
        Ok(self.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Header;

    // spec: MR-UD-1, MR-UD-2
    #[test]
    fn roundtrip_layout_and_payload() {
        let h = UdHeader {
            dst_qpn: 0x12,
            src_qpn: 0xab_cdef,
            qkey: 0x1111_2222,
            imm: Some(7),
            solicited: true,
        };
        let mut b = [0u8; 40];
        assert_eq!(h.emit(&mut b), Ok(32));
        assert_eq!(&b[..4], &[VERSION_DRAFT0, UD_IMM, Flags::SOLICITED, 0]);
        assert_eq!(
            &b[16..32],
            &[0, 0, 0, 0x12, 0, 0xab, 0xcd, 0xef, 0x11, 0x11, 0x22, 0x22, 0, 0, 0, 7]
        );
        b[32..].copy_from_slice(b"payload!");
        assert!(UdHeader::is_ud(&b));
        assert_eq!(UdHeader::parse(&b), Ok((h, &b"payload!"[..])));
        let plain = UdHeader {
            imm: None,
            solicited: false,
            ..h
        };
        assert_eq!(plain.emit(&mut b), Ok(28));
        assert_eq!(UdHeader::parse(&b[..28]), Ok((plain, &[][..])));
        // A connection never takes a datagram for one of its packets.
        assert!(Header::parse(&b).is_err());
    }

    // spec: MR-UD-2
    #[test]
    fn rejects_bad_input() {
        let h = UdHeader {
            dst_qpn: 1,
            src_qpn: 2,
            qkey: 3,
            imm: Some(4),
            solicited: false,
        };
        let mut b = [0u8; 32];
        h.emit(&mut b).unwrap();
        assert_eq!(UdHeader::parse(&b[..31]), Err(Error::Truncated));
        assert_eq!(UdHeader::parse(&b[..27]), Err(Error::Truncated));
        let mut bad = b;
        bad[0] = 0;
        assert_eq!(UdHeader::parse(&bad), Err(Error::Version));
        let mut bad = b;
        bad[1] = 0x01;
        assert_eq!(UdHeader::parse(&bad), Err(Error::UnknownType));
        assert!(!UdHeader::is_ud(&bad));
        let mut bad = b;
        bad[11] = 1;
        assert_eq!(UdHeader::parse(&bad), Err(Error::Malformed));
        let mut bad = b;
        bad[16] = 1;
        assert_eq!(UdHeader::parse(&bad), Err(Error::Malformed));
        assert_eq!(
            UdHeader {
                dst_qpn: 1 << 24,
                ..h
            }
            .emit(&mut b),
            Err(Error::Malformed)
        );
        assert_eq!(h.emit(&mut [0u8; 31]), Err(Error::Truncated));
    }
}
