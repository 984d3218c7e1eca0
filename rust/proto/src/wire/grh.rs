// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The GRH area of a UD receive: the 40 bytes a delivered datagram's receive gets
//! before its payload, laid out as verbs does for RoCE v2 ([MR-UD-4]).
//!
//! | Family | Bytes 0..20 | Bytes 20..40 |
//! |--------|-------------|--------------|
//! | IPv4   | zero        | the IPv4 header (no options, checksum filled in) |
//! | IPv6   | the IPv6 header (40 bytes) ||
//!
//! The headers are rebuilt from what the receiver knows of the datagram (its
//! addresses, ECN codepoint and UDP payload length), as rdma_rxe hands them up; a
//! consumer such as the connection manager reads the peer's address from them.
//!
//= Documentation/metaroce/spec.rst#unreliable-datagrams

use core::net::IpAddr;

/// Length of the GRH area.
pub const GRH_LEN: usize = 40;

const UDP_HEADER_LEN: usize = 8;
const IPV4_HEADER_LEN: usize = 20;
const PROTO_UDP: u8 = 17;
const TTL: u8 = 64;

/// The GRH area of a datagram from `src` to `dst` with ECN codepoint `ecn` (the
/// traffic class's low two bits) and `payload_len` bytes of UDP payload. Lengths
/// too large for their field saturate; addresses of different families give
/// zeros.
pub fn grh_area(src: IpAddr, dst: IpAddr, ecn: u8, payload_len: usize) -> [u8; GRH_LEN] {
    let mut g = [0u8; GRH_LEN];
    let tos = ecn & 0x3;
    let udp_len = payload_len.saturating_add(UDP_HEADER_LEN);
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let total = saturate_u16(udp_len.saturating_add(IPV4_HEADER_LEN));
            let mut ip = [0u8; IPV4_HEADER_LEN];
            ip[0] = 0x45;
            ip[1] = tos;
            ip[2..4].copy_from_slice(&total.to_be_bytes());
            ip[6] = 0x40; // don't fragment
            ip[8] = TTL;
            ip[9] = PROTO_UDP;
            ip[12..16].copy_from_slice(&s.octets());
            ip[16..20].copy_from_slice(&d.octets());
            let sum = ipv4_checksum(&ip);
            ip[10..12].copy_from_slice(&sum.to_be_bytes());
            g[GRH_LEN - IPV4_HEADER_LEN..].copy_from_slice(&ip);
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let word = (6u32 << 28) | (u32::from(tos) << 20);
            g[0..4].copy_from_slice(&word.to_be_bytes());
            g[4..6].copy_from_slice(&saturate_u16(udp_len).to_be_bytes());
            g[6] = PROTO_UDP;
            g[7] = TTL;
            g[8..24].copy_from_slice(&s.octets());
            g[24..40].copy_from_slice(&d.octets());
        }
        _ => {}
    }
    g
}

/// The IPv4 header checksum of `hdr` (RFC 791: the ones' complement of the ones'
/// complement sum of its 16-bit words); over a header whose checksum field is zero
/// it is the value to put there, over a complete header it is zero.
fn ipv4_checksum(hdr: &[u8]) -> u16 {
    let mut sum: u32 = hdr
        .chunks(2)
        .map(|c| {
            u32::from(u16::from_be_bytes([
                c.first().copied().unwrap_or(0),
                c.get(1).copied().unwrap_or(0),
            ]))
        })
        .fold(0u32, u32::wrapping_add);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn saturate_u16(n: usize) -> u16 {
    u16::try_from(n).unwrap_or(u16::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::{Ipv4Addr, Ipv6Addr};

    const A4: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 1);
    const B4: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 199);

    #[test]
    fn checksum_of_a_known_header() {
        // The worked example of RFC 1071's usual illustration (total length 0x73).
        let hdr = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(ipv4_checksum(&hdr), 0xb861);
        let mut full = hdr;
        full[10..12].copy_from_slice(&0xb861u16.to_be_bytes());
        assert_eq!(ipv4_checksum(&full), 0);
        // An odd length counts the last byte as a word's high half.
        assert_eq!(ipv4_checksum(&[0x12]), !0x1200);
        assert_eq!(ipv4_checksum(&[]), 0xffff);
    }

    // spec: MR-UD-4
    #[test]
    fn ipv4_area_is_zeros_then_the_header() {
        let g = grh_area(A4.into(), B4.into(), 3, 0x73 - 28);
        assert_eq!(g[..20], [0; 20]);
        let ip = &g[20..];
        assert_eq!(ip[0], 0x45);
        assert_eq!(ip[1], 3, "ECN in the TOS byte");
        assert_eq!(u16::from_be_bytes([ip[2], ip[3]]), 0x73, "IP total length");
        assert_eq!((ip[6], ip[8], ip[9]), (0x40, 64, 17));
        assert_eq!(ip[12..16], A4.octets());
        assert_eq!(ip[16..20], B4.octets());
        assert_eq!(ipv4_checksum(ip), 0, "the header checks");
        // With ECN 3 in the TOS byte, RFC 1071's example sum moves by 3.
        assert_eq!(u16::from_be_bytes([ip[10], ip[11]]), 0xb861 - 3);
    }

    // spec: MR-UD-4
    #[test]
    fn ipv6_area_is_the_header() {
        let (s, d) = (
            Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1),
            Ipv6Addr::LOCALHOST,
        );
        let g = grh_area(s.into(), d.into(), 2, 1000);
        assert_eq!(g[0..4], ((6u32 << 28) | (2 << 20)).to_be_bytes());
        assert_eq!(
            u16::from_be_bytes([g[4], g[5]]),
            1008,
            "payload length: UDP"
        );
        assert_eq!((g[6], g[7]), (17, 64));
        assert_eq!(g[8..24], s.octets());
        assert_eq!(g[24..40], d.octets());
    }

    #[test]
    fn lengths_saturate_and_mixed_families_give_zeros() {
        let g = grh_area(A4.into(), B4.into(), 0xff, usize::MAX);
        assert_eq!(g[21], 3, "only the ECN bits");
        assert_eq!(u16::from_be_bytes([g[22], g[23]]), u16::MAX);
        assert_eq!(ipv4_checksum(&g[20..]), 0);
        let g = grh_area(
            Ipv6Addr::LOCALHOST.into(),
            Ipv6Addr::LOCALHOST.into(),
            0,
            70_000,
        );
        assert_eq!(u16::from_be_bytes([g[4], g[5]]), u16::MAX);
        let g = grh_area(A4.into(), Ipv6Addr::LOCALHOST.into(), 1, 10);
        assert_eq!(g, [0; GRH_LEN]);
    }
}
