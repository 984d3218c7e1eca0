// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The datagram socket an endpoint sends and receives through.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

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
    fn recv_from(
        &mut self,
        buf: &mut [u8],
        timeout: Duration,
    ) -> io::Result<Option<(usize, SocketAddr)>>;
}

impl Transport for UdpSocket {
    fn send_to(&mut self, datagram: &[u8], to: SocketAddr) -> io::Result<()> {
        UdpSocket::send_to(self, datagram, to).map(|_| ())
    }

    fn recv_from(
        &mut self,
        buf: &mut [u8],
        timeout: Duration,
    ) -> io::Result<Option<(usize, SocketAddr)>> {
        // A zero read timeout means "block forever" to the socket, and the
        // kernel rounds a short one up to a clock tick (milliseconds): a poll
        // is a non-blocking receive instead.
        let poll = timeout.is_zero();
        if poll {
            self.set_nonblocking(true)?;
        } else {
            self.set_read_timeout(Some(timeout))?;
        }
        let r = UdpSocket::recv_from(self, buf);
        if poll {
            self.set_nonblocking(false)?;
        }
        match r {
            Ok(r) => Ok(Some(r)),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Ok(None)
            }
            // A previous datagram's ICMP port-unreachable: the peer is not up yet.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Ok(None),
            Err(e) => Err(e),
        }
    }
}
