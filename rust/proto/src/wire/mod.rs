// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Wire codec for MetaRoCE draft v0: checked parsing and emission over byte slices.
//!
//! Every packet is a UDP datagram to [`UDP_PORT`](crate::constants::UDP_PORT):
//!
//! ```text
//! +----------------+-----------------------+------------------+-----------+
//! | common header  | stream header         | type extension   | payload   |
//! | 16 bytes       | 16 bytes (data types) | 0..28 bytes      | data only |
//! +----------------+-----------------------+------------------+-----------+
//! ```
//!
//! ACK, NAK and control packets carry their own extension after the common
//! header and no stream header. All fields are big-endian. Parsing never
//! panics: use [`Packet::new_checked`] (or [`PacketRepr::parse`]) on untrusted
//! input; emission fails with [`Error::Truncated`] when the buffer is short.
//!
//= Documentation/metaroce/spec.rst#wire-format

mod ack;
mod control;
mod data;
mod grh;
mod header;
mod nak;
mod packet;
mod ud;

pub use ack::{AckBlock, AckHeader};
pub use control::{Control, ControlCode};
pub use data::{DataExt, Status, StreamHeader};
pub use grh::{grh_area, GRH_LEN};
pub use header::{Flags, Header, PacketType};
pub use nak::{Nak, NakCode};
pub use packet::{headers_len, AckRepr, Packet, PacketRepr};
pub use ud::{UdHeader, MAX_UD_HEADER_LEN, UD, UD_HEADER_LEN, UD_IMM};

/// A codec error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The buffer is shorter than the header requires.
    Truncated,
    /// The version field is not a supported version.
    Version,
    /// The packet type is unknown.
    UnknownType,
    /// A field holds a value the format forbids.
    Malformed,
}

/// Result of a codec operation.
pub type Result<T> = core::result::Result<T, Error>;

fn take<const N: usize>(buf: &[u8], off: usize) -> Result<[u8; N]> {
    let end = off.checked_add(N).ok_or(Error::Truncated)?;
    let s = buf.get(off..end).ok_or(Error::Truncated)?;
    let mut a = [0u8; N];
    a.copy_from_slice(s);
    Ok(a)
}

pub(crate) fn get_u8(buf: &[u8], off: usize) -> Result<u8> {
    buf.get(off).copied().ok_or(Error::Truncated)
}

pub(crate) fn get_u16(buf: &[u8], off: usize) -> Result<u16> {
    Ok(u16::from_be_bytes(take(buf, off)?))
}

pub(crate) fn get_u32(buf: &[u8], off: usize) -> Result<u32> {
    Ok(u32::from_be_bytes(take(buf, off)?))
}

pub(crate) fn get_u64(buf: &[u8], off: usize) -> Result<u64> {
    Ok(u64::from_be_bytes(take(buf, off)?))
}

pub(crate) fn put(buf: &mut [u8], off: usize, bytes: &[u8]) -> Result<()> {
    let end = off.checked_add(bytes.len()).ok_or(Error::Truncated)?;
    buf.get_mut(off..end)
        .ok_or(Error::Truncated)?
        .copy_from_slice(bytes);
    Ok(())
}

pub(crate) fn put_u8(buf: &mut [u8], off: usize, v: u8) -> Result<()> {
    put(buf, off, &[v])
}

pub(crate) fn put_u16(buf: &mut [u8], off: usize, v: u16) -> Result<()> {
    put(buf, off, &v.to_be_bytes())
}

pub(crate) fn put_u32(buf: &mut [u8], off: usize, v: u32) -> Result<()> {
    put(buf, off, &v.to_be_bytes())
}

pub(crate) fn put_u64(buf: &mut [u8], off: usize, v: u64) -> Result<()> {
    put(buf, off, &v.to_be_bytes())
}
