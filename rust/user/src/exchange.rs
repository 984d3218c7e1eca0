// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The out-of-band exchange of `ibv_rc_pingpong` (rdma-core's
//! libibverbs/examples/pingpong.c), so an unmodified pingpong on a metaroce
//! device can be this endpoint's peer.
//!
//! Over TCP (port 18515 by default) the client writes
//! `"%04x:%06x:%06x:%s\0"`: LID, QPN, PSN and the GID as 32 hex digits in
//! memory order; the server answers with its own, and the client writes
//! `"done\0"`. A RoCE GID of an IPv4 address is `::ffff:a.b.c.d`.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, TcpListener, TcpStream};

/// The pingpong message size, NUL included.
const MESSAGE_LEN: usize = 52;

/// What one side tells the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Destination {
    /// QP number.
    pub qpn: u32,
    /// Initial send PSN.
    pub psn: u32,
    /// The side's IP address (from its GID).
    pub ip: IpAddr,
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

impl Destination {
    fn encode(&self) -> [u8; MESSAGE_LEN] {
        let gid = match self.ip {
            IpAddr::V4(v4) => v4.to_ipv6_mapped(),
            IpAddr::V6(v6) => v6,
        };
        let hex: String = gid.octets().iter().map(|b| format!("{b:02x}")).collect();
        let text = format!(
            "{:04x}:{:06x}:{:06x}:{hex}",
            0,
            self.qpn,
            self.psn & 0xff_ffff
        );
        let mut out = [0u8; MESSAGE_LEN];
        let n = text.len().min(MESSAGE_LEN - 1);
        out[..n].copy_from_slice(&text.as_bytes()[..n]);
        out
    }

    fn decode(msg: &[u8]) -> io::Result<Self> {
        let text = msg.split(|&b| b == 0).next().unwrap_or_default();
        let text = std::str::from_utf8(text).map_err(|_| invalid("message is not text"))?;
        let mut fields = text.split(':');
        let mut field = |what| fields.next().ok_or_else(|| invalid(what));
        let (_lid, qpn, psn, gid) = (field("lid")?, field("qpn")?, field("psn")?, field("gid")?);
        let hex = |s: &str| u32::from_str_radix(s, 16).map_err(|_| invalid("bad number"));
        if gid.len() != 32 {
            return Err(invalid("bad gid"));
        }
        let mut octets = [0u8; 16];
        for (i, o) in octets.iter_mut().enumerate() {
            *o = u8::from_str_radix(gid.get(2 * i..2 * i + 2).unwrap_or("x"), 16)
                .map_err(|_| invalid("bad gid"))?;
        }
        let v6 = Ipv6Addr::from(octets);
        let ip = v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4);
        Ok(Destination {
            qpn: hex(qpn)? & 0xff_ffff,
            psn: hex(psn)? & 0xff_ffff,
            ip,
        })
    }
}

/// Accepts one pingpong client on `listener`: reads its destination, answers
/// with `local` (its `ip` unspecified: the address the client reached) and
/// returns the client's, after its `done`.
pub fn accept(listener: &TcpListener, mut local: Destination) -> io::Result<Destination> {
    let (mut s, _) = listener.accept()?;
    let mut msg = [0u8; MESSAGE_LEN];
    s.read_exact(&mut msg)?;
    let peer = Destination::decode(&msg)?;
    if local.ip.is_unspecified() {
        local.ip = s.local_addr()?.ip();
    }
    s.write_all(&local.encode())?;
    let mut done = [0u8; 5];
    // An older pingpong closes without `done`: that is no error.
    let _ = s.read(&mut done);
    Ok(peer)
}

/// Connects to a pingpong server at `server` (port included), sends `local`
/// and returns the server's destination.
pub fn connect(server: std::net::SocketAddr, mut local: Destination) -> io::Result<Destination> {
    let mut s = TcpStream::connect(server)?;
    if local.ip.is_unspecified() {
        local.ip = s.local_addr()?.ip();
    }
    s.write_all(&local.encode())?;
    let mut msg = [0u8; MESSAGE_LEN];
    s.read_exact(&mut msg)?;
    let peer = Destination::decode(&msg)?;
    s.write_all(b"done\0")?;
    Ok(peer)
}

/// An unspecified IPv4 address, for [`Destination::ip`] to be filled in.
pub const ANY_IP: IpAddr = IpAddr::V4(Ipv4Addr::UNSPECIFIED);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_matches_pingpong_format() {
        let d = Destination {
            qpn: 0x11,
            psn: 0xabcdef,
            ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
        };
        let m = d.encode();
        assert_eq!(
            &m[..51],
            b"0000:000011:abcdef:00000000000000000000ffff0a000002"
        );
        assert_eq!(m[51], 0);
        assert_eq!(Destination::decode(&m).unwrap(), d);
        assert!(Destination::decode(b"0000:zz").is_err());
        assert!(Destination::decode(&[0xff; 52]).is_err());
    }

    #[test]
    fn accept_and_connect_exchange() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let server = Destination {
            qpn: 2,
            psn: 20,
            ip: ANY_IP,
        };
        let t = std::thread::spawn(move || accept(&l, server).unwrap());
        let client = Destination {
            qpn: 1,
            psn: 10,
            ip: ANY_IP,
        };
        let got = connect(addr, client).unwrap();
        assert_eq!((got.qpn, got.psn, got.ip), (2, 20, addr.ip()));
        let seen = t.join().unwrap();
        assert_eq!((seen.qpn, seen.psn), (1, 10));
    }
}
