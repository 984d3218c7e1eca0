// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Whole packets: a checked view over a received datagram, and a high-level
//! representation that parses from and emits to bytes.

use super::{
    AckBlock, AckHeader, Control, DataExt, Error, Header, Nak, PacketType, Result, StreamHeader,
};
use crate::constants::MAX_ACK_BLOCKS;

/// A checked view of a received MetaRoCE datagram.
///
/// [`Packet::new_checked`] validates the common header and that the buffer holds
/// every header the packet type needs, so the accessors only fail on field
/// values the format forbids.
#[derive(Clone, Copy, Debug)]
pub struct Packet<'a> {
    buf: &'a [u8],
    header: Header,
    ty: PacketType,
    header_len: usize,
}

/// How many leading bytes of a datagram its headers can take, judged from its first
/// bytes `buf` (at least [`COMMON_HEADER_LEN`](crate::constants::COMMON_HEADER_LEN)
/// of them, else that many): what a receiver that holds datagrams in pieces gathers
/// into one buffer before parsing ([`Packet::new_checked`], or
/// [`UdHeader::parse`](super::UdHeader::parse) for datagrams). An ACK counts with
/// the most path blocks it may carry; the headers of a data packet are exact, so the
/// payload stays where it is.
pub fn headers_len(buf: &[u8]) -> usize {
    use crate::constants::COMMON_HEADER_LEN;
    if super::UdHeader::is_ud(buf) {
        return super::ud::MAX_UD_HEADER_LEN;
    }
    match Header::parse(buf).and_then(|h| h.packet_type()) {
        Ok(PacketType::Ack) => AckHeader::total_len(MAX_ACK_BLOCKS as u8),
        Ok(PacketType::Nak) => Nak::TOTAL_LEN,
        Ok(PacketType::Control) => Control::TOTAL_LEN,
        Ok(ty) => DataExt::header_len(ty),
        Err(_) => COMMON_HEADER_LEN,
    }
}

impl<'a> Packet<'a> {
    /// Validates `buf` as a MetaRoCE packet.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self> {
        let header = Header::parse(buf)?;
        let ty = header.packet_type()?;
        let header_len = match ty {
            PacketType::Ack => AckHeader::total_len(AckHeader::parse(buf)?.count),
            PacketType::Nak => Nak::TOTAL_LEN,
            PacketType::Control => Control::TOTAL_LEN,
            _ => DataExt::header_len(ty),
        };
        if buf.len() < header_len {
            return Err(Error::Truncated);
        }
        Ok(Packet {
            buf,
            header,
            ty,
            header_len,
        })
    }

    /// The common header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The packet type.
    pub fn packet_type(&self) -> PacketType {
        self.ty
    }

    /// Length of all headers.
    pub fn header_len(&self) -> usize {
        self.header_len
    }

    /// The stream header (data packets).
    pub fn stream(&self) -> Result<StreamHeader> {
        if !self.ty.is_data() {
            return Err(Error::UnknownType);
        }
        StreamHeader::parse(self.buf)
    }

    /// The type extension (data packets).
    pub fn data_ext(&self) -> Result<DataExt> {
        DataExt::parse(self.ty, self.buf)
    }

    /// The payload after all headers (empty for non-data packets).
    pub fn payload(&self) -> &'a [u8] {
        if self.ty.is_data() {
            self.buf.get(self.header_len..).unwrap_or(&[])
        } else {
            &[]
        }
    }

    /// The ACK fixed header (ACK packets).
    pub fn ack(&self) -> Result<AckHeader> {
        if self.ty != PacketType::Ack {
            return Err(Error::UnknownType);
        }
        AckHeader::parse(self.buf)
    }

    /// ACK block `i` (ACK packets).
    pub fn ack_block(&self, i: usize) -> Result<AckBlock> {
        AckBlock::parse(self.buf, i)
    }

    /// The NAK extension (NAK packets).
    pub fn nak(&self) -> Result<Nak> {
        Nak::parse(self.buf)
    }

    /// The control extension (control packets).
    pub fn control(&self) -> Result<Control> {
        Control::parse(self.buf)
    }
}

/// A decoded ACK: fixed part plus up to [`MAX_ACK_BLOCKS`] path blocks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AckRepr {
    /// Rate hint, Mbit/s.
    pub rate_hint: u32,
    /// ACK delay, microseconds.
    pub ack_delay: u16,
    /// Number of valid entries in `blocks`.
    pub count: u8,
    /// Path blocks; entries past `count` are ignored.
    pub blocks: [AckBlock; MAX_ACK_BLOCKS],
}

/// A decoded packet header of any type.
#[allow(
    clippy::large_enum_variant,
    reason = "a short-lived value; boxing needs alloc"
)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketRepr {
    /// A data packet; `header.ty` matches `ext`.
    Data {
        /// Common header.
        header: Header,
        /// Stream header.
        stream: StreamHeader,
        /// Type extension.
        ext: DataExt,
    },
    /// An ACK.
    Ack {
        /// Common header.
        header: Header,
        /// ACK body.
        ack: AckRepr,
    },
    /// A NAK.
    Nak {
        /// Common header.
        header: Header,
        /// NAK body.
        nak: Nak,
    },
    /// A control packet.
    Control {
        /// Common header.
        header: Header,
        /// Control body.
        control: Control,
    },
}

impl PacketRepr {
    /// Parses every header of `buf` (the payload, if any, is not copied).
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let p = Packet::new_checked(buf)?;
        let header = *p.header();
        Ok(match p.packet_type() {
            PacketType::Ack => return Self::parse_ack(&p, header),
            PacketType::Nak => PacketRepr::Nak {
                header,
                nak: p.nak()?,
            },
            PacketType::Control => PacketRepr::Control {
                header,
                control: p.control()?,
            },
            _ => PacketRepr::Data {
                header,
                stream: p.stream()?,
                ext: p.data_ext()?,
            },
        })
    }

    /// The ACK arm of [`PacketRepr::parse`], out of line, with the blocks
    /// gathered before the result is built: an ACK is ~650 bytes, and copies
    /// of it in `parse`'s frame made that 2 KiB (kernel stacks are 16 KiB).
    #[inline(never)]
    fn parse_ack(p: &Packet<'_>, header: Header) -> Result<Self> {
        let a = p.ack()?;
        let mut blocks = [AckBlock::default(); MAX_ACK_BLOCKS];
        for (i, b) in (0..usize::from(a.count)).zip(blocks.iter_mut()) {
            *b = p.ack_block(i)?;
        }
        Ok(PacketRepr::Ack {
            header,
            ack: AckRepr {
                rate_hint: a.rate_hint,
                ack_delay: a.ack_delay,
                count: a.count,
                blocks,
            },
        })
    }

    /// Emits every header into `buf`; returns the header length. The type field
    /// is derived from the body.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        match self {
            PacketRepr::Data {
                header,
                stream,
                ext,
            } => {
                let len = DataExt::header_len(ext.packet_type());
                if buf.len() < len {
                    return Err(Error::Truncated);
                }
                Header {
                    ty: ext.packet_type() as u8,
                    ..*header
                }
                .emit(buf)?;
                stream.emit(buf)?;
                ext.emit(buf)
            }
            PacketRepr::Ack { header, ack } => {
                let count = ack.count.min(MAX_ACK_BLOCKS as u8);
                let len = AckHeader::total_len(count);
                if buf.len() < len {
                    return Err(Error::Truncated);
                }
                Header {
                    ty: PacketType::Ack as u8,
                    ..*header
                }
                .emit(buf)?;
                AckHeader {
                    rate_hint: ack.rate_hint,
                    ack_delay: ack.ack_delay,
                    count,
                }
                .emit(buf)?;
                for (i, b) in (0..usize::from(count)).zip(ack.blocks.iter()) {
                    b.emit(buf, i)?;
                }
                Ok(len)
            }
            PacketRepr::Nak { header, nak } => {
                if buf.len() < Nak::TOTAL_LEN {
                    return Err(Error::Truncated);
                }
                Header {
                    ty: PacketType::Nak as u8,
                    ..*header
                }
                .emit(buf)?;
                nak.emit(buf)
            }
            PacketRepr::Control { header, control } => {
                if buf.len() < Control::TOTAL_LEN {
                    return Err(Error::Truncated);
                }
                Header {
                    ty: PacketType::Control as u8,
                    ..*header
                }
                .emit(buf)?;
                control.emit(buf)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{ControlCode, Flags, NakCode};

    fn hdr() -> Header {
        Header {
            ty: 0,
            flags: Flags(Flags::LAST),
            path: 2,
            dst_conn: 5,
            src_conn: 6,
            psn: 7,
        }
    }

    // spec: MR-GEN-2, MR-WIRE-11
    #[test]
    fn data_roundtrip_with_payload() {
        let r = PacketRepr::Data {
            header: Header {
                ty: PacketType::Send as u8,
                ..hdr()
            },
            stream: StreamHeader {
                qpn: 1,
                msn: 2,
                ssn: 3,
                offset: 4,
            },
            ext: DataExt::Send {
                rsn: 9,
                total_len: 10,
                imm: None,
            },
        };
        let mut b = [0u8; 64];
        let n = r.emit(&mut b).unwrap();
        assert_eq!(n, 40);
        b[40] = 0xaa;
        let p = Packet::new_checked(&b[..41]).unwrap();
        assert_eq!(p.payload(), &[0xaa]);
        assert_eq!(PacketRepr::parse(&b[..41]), Ok(r));
        assert_eq!(Packet::new_checked(&b[..39]).err(), Some(Error::Truncated));
    }

    // spec: MR-WIRE-15, MR-WIRE-16, MR-WIRE-17
    #[test]
    fn ack_nak_control_roundtrip() {
        let mut ack = AckRepr {
            rate_hint: 100,
            ack_delay: 3,
            count: 2,
            ..Default::default()
        };
        ack.blocks[1] = AckBlock {
            path: 3,
            dup_count: 6,
            ce_count: 4,
            cum_psn: 5,
            sack: [0x5a; 32],
        };
        let reprs = [
            PacketRepr::Ack {
                header: Header {
                    ty: PacketType::Ack as u8,
                    ..hdr()
                },
                ack,
            },
            PacketRepr::Nak {
                header: Header {
                    ty: PacketType::Nak as u8,
                    ..hdr()
                },
                nak: Nak {
                    path: 1,
                    code: NakCode::Rnr,
                    rnr_timer: 3,
                    psn: 4,
                    qpn: 5,
                    msn: 6,
                    ssn: 7,
                },
            },
            PacketRepr::Control {
                header: Header {
                    ty: PacketType::Control as u8,
                    ..hdr()
                },
                control: Control {
                    code: ControlCode::PathFloor,
                    path: 3,
                    value: 1,
                },
            },
        ];
        for r in reprs {
            let mut b = [0u8; 200];
            let n = r.emit(&mut b).unwrap();
            assert_eq!(PacketRepr::parse(&b[..n]), Ok(r));
            assert!(PacketRepr::parse(&b[..n - 1]).is_err());
        }
    }
}
