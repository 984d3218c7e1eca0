// SPDX-License-Identifier: GPL-2.0

//! UDP tunnel sockets: one kernel UDP socket per network namespace and address family,
//! bound to one port, delivering every datagram to a handler.
//!
//! C header: [`include/net/udp_tunnel.h`](srctree/include/net/udp_tunnel.h).
//!
//! A driver creates one [`UdpTunnels`] registry for its port and calls
//! [`UdpTunnels::open`] for each device: the first device in a namespace creates the
//! namespace's sockets (IPv4 and, when the namespace has IPv6, IPv6), later devices
//! share them, and dropping the last [`TunnelRef`] closes them. When a namespace is
//! dismantled while devices still hold references, its sockets are closed anyway (a
//! kernel socket does not keep its namespace alive); the remaining references then
//! fail to send with `ENETDOWN`.
//!
//! Received datagrams go to [`DatagramHandler::on_datagram`] as a [`Received`], in
//! softirq context. Transmission: [`UdpTunnel::send`].

//! The parts: [`datagram`] (what a handler receives, and where a datagram goes),
//! [`tunnel`] (one namespace's sockets: receive callback and transmission) and
//! [`tunnels`] (the per-namespace registry of a driver's port).

mod datagram;
mod tunnel;
mod tunnels;

pub use crate::route::RouteCache;
pub use datagram::{DatagramHandler, DatagramInfo, Destination, Ecn, OwnedDatagram, Received};
pub use tunnel::{TunnelStats, UdpTunnel};
pub use tunnels::{TunnelRef, UdpTunnels};
