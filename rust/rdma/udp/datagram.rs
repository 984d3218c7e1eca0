// SPDX-License-Identifier: GPL-2.0

//! What a [`DatagramHandler`] receives ([`Received`], [`OwnedDatagram`]) and where a
//! datagram goes ([`Destination`], with its [`Ecn`] codepoint).

use crate::{
    bindings,
    netdev::{NetDevice, NetDeviceId},
    skb::SkBuff,
};
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use kernel::{
    prelude::*,
    sync::atomic::{Atomic, Relaxed},
};

/// An ECN codepoint (RFC 3168): the two low bits of the IPv4 TOS byte or of the IPv6
/// traffic class.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum Ecn {
    /// Not ECN-capable transport.
    NotEct = 0,
    /// ECN-capable transport, codepoint 1.
    Ect1 = 1,
    /// ECN-capable transport, codepoint 0: what MetaRoCE sends.
    Ect0 = 2,
    /// Congestion experienced.
    Ce = 3,
}

impl Ecn {
    /// Returns the codepoint in the two low bits of `tos`.
    pub fn from_tos(tos: u8) -> Self {
        match tos & 3 {
            0 => Self::NotEct,
            1 => Self::Ect1,
            2 => Self::Ect0,
            _ => Self::Ce,
        }
    }
}

/// Where and how to send a datagram.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Destination {
    /// Source address; unspecified (`0.0.0.0` or `::`) lets the route choose.
    pub src: IpAddr,
    /// Destination address, of the same family as `src`.
    pub dst: IpAddr,
    /// UDP source port: the path of a connection.
    pub src_port: u16,
    /// UDP destination port.
    pub dst_port: u16,
    /// ECN codepoint of the IP header (MetaRoCE sends [`Ecn::Ect0`]).
    pub ecn: Ecn,
}

/// Addresses, ports and ECN codepoint of a received datagram, from its IP and UDP
/// headers.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct DatagramInfo {
    /// Source address and UDP port.
    pub src: SocketAddr,
    /// Destination address and UDP port.
    pub dst: SocketAddr,
    /// ECN codepoint of the IP header.
    pub ecn: Ecn,
}

impl DatagramInfo {
    /// Parses the IP header `ip` (from the network header up to the UDP header) and the
    /// UDP header at the start of `udp`. Returns `None` for anything malformed.
    pub(super) fn parse(ip: &[u8], udp: &[u8]) -> Option<Self> {
        let sport = u16::from_be_bytes([*udp.first()?, *udp.get(1)?]);
        let dport = u16::from_be_bytes([*udp.get(2)?, *udp.get(3)?]);
        let (src, dst, ecn): (IpAddr, IpAddr, u8) = match ip.first()? >> 4 {
            4 if ip.len() >= 20 => {
                let s: [u8; 4] = ip[12..16].try_into().ok()?;
                let d: [u8; 4] = ip[16..20].try_into().ok()?;
                (Ipv4Addr::from(s).into(), Ipv4Addr::from(d).into(), ip[1])
            }
            6 if ip.len() >= 40 => {
                let s: [u8; 16] = ip[8..24].try_into().ok()?;
                let d: [u8; 16] = ip[24..40].try_into().ok()?;
                (
                    Ipv6Addr::from(s).into(),
                    Ipv6Addr::from(d).into(),
                    ip[1] >> 4,
                )
            }
            _ => return None,
        };
        Some(Self {
            src: SocketAddr::new(src, sport),
            dst: SocketAddr::new(dst, dport),
            ecn: Ecn::from_tos(ecn),
        })
    }
}

/// Receives the datagrams of the tunnel sockets.
pub trait DatagramHandler: Send + Sync + 'static {
    /// Called for every well-formed datagram that arrives on the tunnel's port in any
    /// namespace where the tunnel is open.
    ///
    /// Runs in softirq context under the RCU read lock: it must not sleep (no mutexes,
    /// no `GFP_KERNEL`), and should do little more than find the receiver and queue the
    /// datagram for it ([`Received::into_owned`] keeps the buffer without copying).
    /// Dropping `rx` frees the buffer.
    fn on_datagram(&self, rx: Received<'_>);
}

/// A datagram being received, owned by the handler for the duration of
/// [`DatagramHandler::on_datagram`].
pub struct Received<'a> {
    /// The datagram; its data is the UDP payload.
    pub(super) skb: SkBuff,
    /// One datagram of a UDP GSO buffer, shared with the others: its bytes
    /// `[start, start + len)` of the buffer's data ([`Segment`]).
    pub(super) seg: Option<Segment>,
    /// More datagrams of the same GSO buffer follow this one.
    pub(super) more: bool,
    pub(super) info: DatagramInfo,
    pub(super) netdev: &'a NetDevice,
    /// The tunnel's count of datagrams no one claimed.
    pub(super) unclaimed: &'a Atomic<u64>,
}

impl<'a> Received<'a> {
    /// Returns the netdev the datagram came in on; for local traffic (in on the
    /// loopback device), the netdev that owns its destination address.
    pub fn netdev(&self) -> &'a NetDevice {
        self.netdev
    }

    /// Returns the addresses, ports and ECN codepoint.
    pub fn info(&self) -> &DatagramInfo {
        &self.info
    }

    /// Whether more datagrams of the same UDP GSO buffer follow this one, right
    /// after it returns (a receiver may wait for the last before it acts).
    pub fn more_follow(&self) -> bool {
        self.more
    }

    /// Returns the UDP payload's first bytes that lie in one piece: all of it unless
    /// [`paged_len`](Self::paged_len) is nonzero.
    pub fn payload(&self) -> &[u8] {
        head(&self.skb, self.seg)
    }

    /// Returns the number of payload bytes after [`payload`](Self::payload).
    pub fn paged_len(&self) -> usize {
        rest_len(&self.skb, self.seg)
    }

    /// Makes the first `len` bytes of the payload (all of it, if shorter) one piece;
    /// see [`SkBuff::make_linear`]. A datagram of a GSO buffer cannot be rearranged:
    /// `EMSGSIZE` unless its first `len` bytes are in one piece already.
    pub fn make_linear(&mut self, len: usize) -> Result {
        match self.seg {
            None => self.skb.make_linear(len),
            Some(s) if head(&self.skb, self.seg).len() >= len.min(s.len) => Ok(()),
            Some(_) => Err(EMSGSIZE),
        }
    }

    /// Keeps the datagram beyond the callback, e.g. to queue it for a work item.
    pub fn into_owned(self) -> OwnedDatagram {
        if self.seg.is_none() {
            // Its route may be a reference the receive path does not hold beyond the
            // RCU section (`skb_dst_set_noref`); it is not needed any more, so drop it
            // before the buffer outlives the section. (A shared GSO buffer's was
            // dropped before it was shared.)
            // SAFETY: The skb is ours and not shared.
            unsafe { bindings::metaroce_skb_dst_drop(self.skb.as_raw()) };
        }
        OwnedDatagram {
            netdev: self.netdev.id(),
            info: self.info,
            skb: self.skb,
            seg: self.seg,
        }
    }

    /// Frees the datagram as a drop, visible to drop monitors.
    pub fn discard(self) {
        self.skb.discard();
    }

    /// Drops a datagram for which there is no receiver (e.g. no device on its netdev),
    /// counting it in [`TunnelStats::rx_unclaimed`] of its namespace.
    pub fn discard_unclaimed(self) {
        self.unclaimed.fetch_add(1, Relaxed);
        self.skb.discard();
    }
}

/// A received datagram kept beyond the receive callback.
pub struct OwnedDatagram {
    skb: SkBuff,
    seg: Option<Segment>,
    info: DatagramInfo,
    netdev: NetDeviceId,
}

/// One datagram of a UDP GSO buffer: bytes `[start, start + len)` of the buffer's data.
#[derive(Clone, Copy, Debug)]
pub(super) struct Segment {
    pub(super) start: usize,
    pub(super) len: usize,
}

/// The first bytes of the datagram in `skb` (`seg`, or all of it) that lie in one
/// piece.
fn head(skb: &SkBuff, seg: Option<Segment>) -> &[u8] {
    let Some(s) = seg else {
        return skb.data();
    };
    let (Ok(start), Ok(max)) = (u32::try_from(s.start), u32::try_from(s.len)) else {
        return &[];
    };
    let mut len = 0u32;
    // SAFETY: The skb is live (we hold a reference); the helper only reads it.
    let p = unsafe { bindings::metaroce_skb_contig(skb.as_raw(), start, max, &mut len) };
    if p.is_null() || len == 0 {
        return &[];
    }
    // SAFETY: `[p, p + len)` are initialised bytes of the buffer's linear part or of one
    // of its page fragments, mapped, which stay as they are while the buffer lives:
    // nobody writes a shared buffer's data, and the reference `skb` holds keeps it.
    unsafe { core::slice::from_raw_parts(p, len as usize) }
}

/// The number of bytes of the datagram in `skb` after [`head`].
fn rest_len(skb: &SkBuff, seg: Option<Segment>) -> usize {
    match seg {
        None => skb.paged_len(),
        Some(s) => s.len - head(skb, seg).len(),
    }
}

impl OwnedDatagram {
    /// Returns the identity of the netdev it came in on.
    pub fn netdev_id(&self) -> NetDeviceId {
        self.netdev
    }

    /// Returns the addresses, ports and ECN codepoint.
    pub fn info(&self) -> &DatagramInfo {
        &self.info
    }

    /// Returns the UDP payload's first bytes that lie in one piece: all of it unless
    /// [`paged_len`](Self::paged_len) is nonzero.
    pub fn payload(&self) -> &[u8] {
        head(&self.skb, self.seg)
    }

    /// Returns the number of payload bytes after [`payload`](Self::payload).
    pub fn paged_len(&self) -> usize {
        rest_len(&self.skb, self.seg)
    }

    /// Returns the buffer and the offset in its data of the payload's bytes after
    /// [`payload`](Self::payload) (to copy them out): the buffer may hold other
    /// datagrams of a GSO burst too.
    pub fn rest(&self) -> (&SkBuff, usize) {
        let start = self.seg.map_or(0, |s| s.start);
        (&self.skb, start + self.payload().len())
    }

    /// Returns the buffer, whose data is the UDP payload, unless it holds other
    /// datagrams of a GSO burst too.
    pub fn into_skb(self) -> Option<SkBuff> {
        self.seg.is_none().then_some(self.skb)
    }
}
