// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! A transport that sends each path's packets from the path's own UDP source
//! port, as [MR-WIRE-2] asks (ECMP spreads paths by port), and receives on
//! one socket.

use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use crate::transport::{enable_ecn, Received, Transport};

/// Source-port sockets kept open at most (a retired path's port is re-rolled,
/// so old ones are dropped when the set is full).
const MAX_PORT_SOCKETS: usize = 64;

/// One receiving socket and a send-only socket per path source port.
#[derive(Debug)]
pub struct PathPorts {
    main: UdpSocket,
    ports: HashMap<u16, UdpSocket>,
    /// Sends that left from the main socket because the path's port was taken.
    pub port_fallbacks: u64,
}

impl PathPorts {
    /// Receives (and falls back to sending) on `main`; binds source ports on
    /// `main`'s address. Every socket sends ECT(0), and `main` reports CE marks
    /// ([MR-WIRE-4]).
    pub fn new(main: UdpSocket) -> Self {
        // Without ECN (a system that refuses the options) the endpoint still works.
        let _ = enable_ecn(&main);
        PathPorts {
            main,
            ports: HashMap::new(),
            port_fallbacks: 0,
        }
    }

    fn socket_for(&mut self, src_port: u16) -> Option<&UdpSocket> {
        if !self.ports.contains_key(&src_port) {
            let ip = self.main.local_addr().ok()?.ip();
            let s = UdpSocket::bind(SocketAddr::new(ip, src_port)).ok()?;
            let _ = enable_ecn(&s);
            if self.ports.len() >= MAX_PORT_SOCKETS {
                self.ports.clear();
            }
            self.ports.insert(src_port, s);
        }
        self.ports.get(&src_port)
    }
}

impl Transport for PathPorts {
    fn send_to(&mut self, datagram: &[u8], to: SocketAddr) -> io::Result<()> {
        Transport::send_to(&mut self.main, datagram, to)
    }

    fn send_from(&mut self, src_port: u16, datagram: &[u8], to: SocketAddr) -> io::Result<()> {
        match self.socket_for(src_port) {
            Some(s) => s.send_to(datagram, to).map(|_| ()),
            None => {
                self.port_fallbacks += 1;
                Transport::send_to(&mut self.main, datagram, to)
            }
        }
    }

    fn recv_from(&mut self, buf: &mut [u8], timeout: Duration) -> io::Result<Option<Received>> {
        Transport::recv_from(&mut self.main, buf, timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_from_the_path_port() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut t = PathPorts::new(UdpSocket::bind("127.0.0.1:0").unwrap());
        let probe = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = probe.local_addr().unwrap().port();
        drop(probe);
        t.send_from(port, b"x", rx.local_addr().unwrap()).unwrap();
        let mut b = [0u8; 4];
        let (_, from) = rx.recv_from(&mut b).unwrap();
        assert_eq!(from.port(), port);
    }
}
