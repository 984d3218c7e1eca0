// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The datagram socket an endpoint sends and receives through, and the ECN
//! marks it carries ([MR-WIRE-4]): [`enable_ecn`] makes a socket send ECT(0)
//! and report each received datagram's ECN field, which
//! [`Transport::recv_from`] hands on as [`Received::ce`].

use std::io::{self, IoSliceMut};
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration;

use nix::cmsg_space;
use nix::errno::Errno;
use nix::poll::{ppoll, PollFd, PollFlags};
use nix::sys::socket::{
    recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags, SockaddrStorage,
};
use nix::sys::time::TimeSpec;

/// The ECN field's values (RFC 3168): ECT(0) on what we send, CE as marked.
const ECT0: u8 = 0b10;
const CE: u8 = 0b11;

/// One received datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Received {
    /// Its length in the receive buffer.
    pub len: usize,
    /// Where it came from.
    pub from: SocketAddr,
    /// A router marked it Congestion Experienced.
    pub ce: bool,
}

/// A datagram socket: a plain [`UdpSocket`] or a wrapper that impairs it.
pub trait Transport {
    /// Sends one datagram to `to`.
    fn send_to(&mut self, datagram: &[u8], to: SocketAddr) -> io::Result<()>;

    /// Sends one datagram to `to` from UDP source port `src_port` (a path's
    /// port); the default sends from the socket's own port.
    fn send_from(&mut self, src_port: u16, datagram: &[u8], to: SocketAddr) -> io::Result<()> {
        let _ = src_port;
        self.send_to(datagram, to)
    }

    /// Receives one datagram, waiting at most `timeout` (zero: not at all);
    /// `Ok(None)` when none came.
    fn recv_from(&mut self, buf: &mut [u8], timeout: Duration) -> io::Result<Option<Received>>;
}

/// Makes `sock` send ECT(0) and report the ECN field of what it receives.
pub fn enable_ecn(sock: &UdpSocket) -> io::Result<()> {
    if sock.local_addr()?.is_ipv4() {
        setsockopt(sock, sockopt::Ipv4Tos, &i32::from(ECT0))?;
        setsockopt(sock, sockopt::IpRecvTos, &true)?;
    } else {
        setsockopt(sock, sockopt::Ipv6TClass, &i32::from(ECT0))?;
        setsockopt(sock, sockopt::Ipv6RecvTClass, &true)?;
    }
    Ok(())
}

impl Transport for UdpSocket {
    fn send_to(&mut self, datagram: &[u8], to: SocketAddr) -> io::Result<()> {
        UdpSocket::send_to(self, datagram, to).map(|_| ())
    }

    fn recv_from(&mut self, buf: &mut [u8], timeout: Duration) -> io::Result<Option<Received>> {
        // The wait is ppoll's, a high-resolution timer: a socket's read
        // timeout is rounded up to a clock tick (4 ms at HZ=250), which made
        // a pacing gap of 0.1 ms one of 4 ms and let the RTO fire in the
        // middle of a paced window. The receive itself never blocks.
        if !timeout.is_zero() {
            let mut fds = [PollFd::new(self.as_fd(), PollFlags::POLLIN)];
            match ppoll(&mut fds, Some(TimeSpec::from_duration(timeout)), None) {
                Ok(0) | Err(Errno::EINTR) => return Ok(None),
                Ok(_) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let mut cmsg = cmsg_space!(i32);
        let mut iov = [IoSliceMut::new(buf)];
        let r = recvmsg::<SockaddrStorage>(
            self.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_DONTWAIT,
        );
        let msg = match r.map_err(io::Error::from) {
            Ok(msg) => msg,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Ok(None)
            }
            // A previous datagram's ICMP port-unreachable: the peer is not up yet.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut ecn = 0;
        for c in msg.cmsgs()? {
            match c {
                ControlMessageOwned::Ipv4Tos(tos) => ecn = tos & CE,
                ControlMessageOwned::Ipv6TClass(tc) => ecn = (tc as u8) & CE,
                _ => {}
            }
        }
        let from = msg.address.as_ref().and_then(socket_addr);
        let len = msg.bytes;
        match from {
            Some(from) => Ok(Some(Received {
                len,
                from,
                ce: ecn == CE,
            })),
            None => Ok(None),
        }
    }
}

/// `addr` as std's, if it is an IP address.
fn socket_addr(addr: &SockaddrStorage) -> Option<SocketAddr> {
    if let Some(a) = addr.as_sockaddr_in() {
        return Some(SocketAddr::V4(SocketAddrV4::from(*a)));
    }
    addr.as_sockaddr_in6()
        .map(|a| SocketAddr::V6(SocketAddrV6::from(*a)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the kernel reports is what the sender put in the ECN field.
    #[test]
    fn ce_marks_are_reported() {
        let mut rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        enable_ecn(&rx).unwrap();
        let to = rx.local_addr().unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut buf = [0u8; 64];
        for (tos, ce) in [(0, false), (i32::from(ECT0), false), (i32::from(CE), true)] {
            setsockopt(&tx, sockopt::Ipv4Tos, &tos).unwrap();
            tx.send_to(b"x", to).unwrap();
            let r = Transport::recv_from(&mut rx, &mut buf, Duration::from_secs(2))
                .unwrap()
                .unwrap();
            assert_eq!((r.len, r.from, r.ce), (1, tx.local_addr().unwrap(), ce));
        }
        assert_eq!(
            Transport::recv_from(&mut rx, &mut buf, Duration::ZERO).unwrap(),
            None
        );
    }

    /// An ECN-enabled socket's own datagrams leave as ECT(0), not CE.
    #[test]
    fn ecn_sockets_send_ect0() {
        let mut rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        enable_ecn(&rx).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        enable_ecn(&tx).unwrap();
        let tos: i32 = nix::sys::socket::getsockopt(&tx, sockopt::Ipv4Tos).unwrap();
        assert_eq!(tos as u8 & CE, ECT0);
        tx.send_to(b"y", rx.local_addr().unwrap()).unwrap();
        let mut buf = [0u8; 8];
        let r = Transport::recv_from(&mut rx, &mut buf, Duration::from_secs(2))
            .unwrap()
            .unwrap();
        assert!(!r.ce);
    }
}
