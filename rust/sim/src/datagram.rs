// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! A UDP datagram in flight: addressing, ECN bits, payload and checksum state.

/// Host index in the simulated network (stands for an IP address).
pub type HostId = usize;

/// The IP ECN field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ecn {
    /// Not ECN-capable: a full queue drops it, nothing marks it.
    NotEct,
    /// ECN-capable transport: a congested queue marks it CE instead of dropping early.
    Ect,
    /// Congestion experienced.
    Ce,
}

/// One UDP datagram.
#[derive(Clone, Debug)]
pub struct Datagram {
    /// Sending host.
    pub src: HostId,
    /// Receiving host.
    pub dst: HostId,
    /// UDP source port (ECMP entropy).
    pub sport: u16,
    /// UDP destination port.
    pub dport: u16,
    /// IP ECN field.
    pub ecn: Ecn,
    /// UDP payload.
    pub data: Vec<u8>,
    /// Whether a link flipped bits in `data`. It stands for a failed UDP
    /// checksum: a bit flip always changes the checksum, so tracking the flag
    /// is equivalent to recomputing it and far cheaper.
    pub corrupted: bool,
}

/// Bytes of Ethernet, IPv4 and UDP framing added to every datagram on the wire
/// (preamble + header + FCS + inter-frame gap 38, IPv4 20, UDP 8).
pub const WIRE_OVERHEAD: usize = 66;

impl Datagram {
    /// An intact datagram.
    pub fn new(src: HostId, dst: HostId, sport: u16, dport: u16, ecn: Ecn, data: Vec<u8>) -> Self {
        Datagram {
            src,
            dst,
            sport,
            dport,
            ecn,
            data,
            corrupted: false,
        }
    }

    /// Bytes this datagram occupies on a link.
    pub fn wire_len(&self) -> usize {
        self.data.len() + WIRE_OVERHEAD
    }

    /// Whether the UDP checksum still verifies.
    pub fn checksum_ok(&self) -> bool {
        !self.corrupted
    }

    /// Flips bit `bit` (modulo the payload length in bits) and marks the checksum broken.
    pub fn flip_bit(&mut self, bit: u64) {
        let len = self.data.len() as u64;
        if len == 0 {
            return;
        }
        let bit = bit % (len * 8);
        if let Some(b) = self.data.get_mut((bit / 8) as usize) {
            *b ^= 1 << (bit % 8);
            self.corrupted = true;
        }
    }
}
