// SPDX-License-Identifier: GPL-2.0

//! A connection's packets on their way out: each datagram built from the core's
//! headers and the payload in local memory (copied, or the memory region's pages
//! attached), gathered per path into UDP GSO bursts, and sent on the path's cached
//! route; and the probes of a quiet peer.

use super::ConnCtx;
use crate::bound::Bound;
use crate::counters::NetCounters;
use crate::driver::MetaRoceDriver;
use crate::memory::{attach_payload, gather_payload};
use crate::trace;
use crate::transport::Conn;
use kernel::prelude::*;
use metaroce_proto::{
    constants::{MAX_PATHS, UDP_PORT},
    wire::{Control, ControlCode, Flags, Header, PacketRepr, PacketType},
    Instant as CoreInstant, Payload, Transmit,
};
use rdma::{
    device::Device,
    netdev::NetDevice,
    skb::{GsoBurst, SkBuff},
    udp::{DatagramHandler, Destination, Ecn, RouteCache, UdpTunnel},
};

/// Datagrams of one path built in one transmit run, to leave as one buffer.
struct Burst {
    gso: GsoBurst,
    to: Destination,
    path: u8,
    packets: usize,
    /// How many of them have a paged payload.
    zero_copy: usize,
}

impl Burst {
    fn new(skb: SkBuff, to: Destination, path: u8, zero_copy: usize) -> Self {
        Self {
            gso: GsoBurst::new(skb),
            to,
            path,
            packets: 1,
            zero_copy,
        }
    }

    /// Sends the burst on its path's cached route: one datagram, or one UDP GSO buffer
    /// the stack cuts into its datagrams.
    fn send<H: DatagramHandler>(
        self,
        tunnel: &UdpTunnel<H>,
        counters: &NetCounters,
        netdev: &NetDevice,
        routes: &mut [RouteCache],
    ) {
        let len = self.gso.len();
        let skb = self.gso.into_skb();
        let sent = match routes.get_mut(usize::from(self.path)) {
            Some(r) => tunnel.send_cached(netdev, &self.to, skb, r),
            None => tunnel.send(netdev, &self.to, skb),
        };
        counters.count_tx_burst(sent, self.packets, len, self.zero_copy);
    }
}

/// Payloads from this many bytes on are sent as fragments of the memory region's
/// pages rather than copied: one copy per byte end to end (the receiver's) instead
/// of two. Below it a copy costs less than the page references and the
/// receiver's piecewise copy.
const ZERO_COPY_MIN: usize = 1024;

impl ConnCtx {
    /// Sends a CONTROL `OPEN` to the peer's connection id (spec [MR-CONN-8]: a live
    /// peer answers with an ACK) on path 0.
    pub(super) fn send_probe(
        &self,
        dev: &Device<MetaRoceDriver>,
        conn: &Conn,
        buf: &mut [u8],
        routes: &mut [RouteCache],
    ) {
        let net = dev.data().net();
        let header = Header {
            ty: PacketType::Control as u8,
            flags: Flags(0),
            path: 0,
            dst_conn: conn.peer_conn_id(),
            src_conn: self.local_id,
            psn: 0,
        };
        let control = Control {
            code: ControlCode::Open,
            path: 0,
            value: 0,
        };
        let Ok(len) = (PacketRepr::Control { header, control }).emit(buf) else {
            return;
        };
        let skb = SkBuff::alloc_for_udp(&self.ndev, len, GFP_ATOMIC).and_then(|mut skb| {
            skb.append(buf.get(..len).ok_or(EINVAL)?)?;
            Ok(skb)
        });
        let skb = match skb {
            Ok(skb) => skb,
            Err(e) => {
                net.count_tx(Err(e), 0);
                return;
            }
        };
        let to = Destination {
            src: self.src,
            dst: self.peer,
            src_port: conn.path_port(0).unwrap_or(UDP_PORT),
            dst_port: UDP_PORT,
            ecn: Ecn::Ect0,
        };
        let sent = match routes.first_mut() {
            Some(r) => net.tunnel().send_cached(&self.ndev, &to, skb, r),
            None => net.tunnel().send(&self.ndev, &to, skb),
        };
        net.count_tx(sent, len);
    }

    /// Sends what the core has to send; returns how many datagrams it built.
    #[allow(clippy::too_many_arguments, reason = "the run loop state")]
    pub(super) fn transmit(
        &self,
        dev: &Device<MetaRoceDriver>,
        netdev: &NetDevice,
        now: CoreInstant,
        conn: &mut Conn,
        qps: &mut [Option<Bound>],
        buf: &mut [u8],
        routes: &mut [RouteCache],
    ) -> usize {
        let net = dev.data().net();
        let id = conn.config().local_conn_id;
        let gso = rdma::params::gso();
        // Per path, its datagrams built in this run and not sent yet: they leave as one
        // UDP GSO buffer when the next one does not fit (another port or ECN, a
        // different size, out of fragment slots or past 64 KiB) or the core has nothing
        // more to send. The core sprays the paths round robin, so each keeps its own.
        let mut bursts: [Option<Burst>; MAX_PATHS] = [const { None }; MAX_PATHS];
        let mut count = 0;
        loop {
            let retransmits = conn.stats().tx_retransmits;
            let Some(t) = conn.poll_transmit(now, buf) else {
                break;
            };
            // A packet that cannot be built (no memory, or its local buffer went away
            // with a deregistered MR) is not sent and counts as `tx_errors`: nothing
            // goes out that is not the application's data, and the core retransmits
            // (a READ response without its memory as an access error).
            let skb = match Self::build(dev, netdev, qps, &buf[..t.len], &t) {
                Ok(skb) => skb,
                Err(e) => {
                    match &t.payload {
                        Some(p) if e == EFAULT => conn.payload_unavailable(p),
                        _ => {}
                    }
                    net.count_tx(Err(e), 0);
                    continue;
                }
            };
            let to = Destination {
                src: self.src,
                dst: self.peer,
                src_port: t.src_port,
                dst_port: UDP_PORT,
                ecn: Ecn::Ect0,
            };
            let len = skb.len();
            let traced = trace::packet(id, &buf[..t.len], len);
            let zero_copy = usize::from(skb.paged_len() > 0);
            // A path id beyond the array (never, MAX_PATHS bounds it) or GSO off: alone.
            let slot = if gso {
                bursts.get_mut(usize::from(t.path))
            } else {
                None
            };
            match slot {
                Some(slot) => {
                    let rest = match slot.as_mut() {
                        Some(b) if b.to == to => match b.gso.push(skb) {
                            Ok(()) => {
                                b.packets += 1;
                                b.zero_copy += zero_copy;
                                None
                            }
                            Err(skb) => Some(skb),
                        },
                        _ => Some(skb),
                    };
                    if let Some(skb) = rest {
                        if let Some(b) = slot.take() {
                            b.send(net.tunnel(), net.counters(), netdev, routes);
                        }
                        *slot = Some(Burst::new(skb, to, t.path, zero_copy));
                    }
                }
                None => Burst::new(skb, to, t.path, zero_copy).send(
                    net.tunnel(),
                    net.counters(),
                    netdev,
                    routes,
                ),
            }
            let retx = conn.stats().tx_retransmits != retransmits;
            if let Some(p) = &t.payload {
                let qp = match *p {
                    Payload::Wr { qp, .. } | Payload::Mr { qp, .. } => qp,
                };
                if let Some(b) = qps.get(qp.index()).and_then(Option::as_ref) {
                    b.qp().data().counters.count_tx(p.len(), retx);
                }
            }
            if let Some(p) = traced {
                rdma::trace::packet_tx(&p, retx);
            }
            count += 1;
        }
        for b in bursts.iter_mut().filter_map(Option::take) {
            b.send(net.tunnel(), net.counters(), netdev, routes);
        }
        count
    }

    /// The datagram of `t`: the headers, then the payload from local memory (`EFAULT`
    /// when that memory is not there). A payload of at least [`ZERO_COPY_MIN`] bytes
    /// rides as fragments of the memory region's pages; smaller ones, and any that
    /// would take more fragments than a buffer holds, are copied.
    pub(super) fn build(
        dev: &Device<MetaRoceDriver>,
        netdev: &NetDevice,
        qps: &mut [Option<Bound>],
        headers: &[u8],
        t: &Transmit,
    ) -> Result<SkBuff> {
        let plen = t.payload.map_or(0, |p| p.len() as usize);
        if let Some(p) = t.payload.as_ref().filter(|_| plen >= ZERO_COPY_MIN) {
            let mut skb = SkBuff::alloc_for_udp(netdev, headers.len(), GFP_ATOMIC)?;
            skb.append(headers)?;
            if attach_payload(dev, qps, p, &mut skb).is_ok() {
                return Ok(skb);
            }
            // The copy below reports what is wrong, if anything.
        }
        let mut skb = SkBuff::alloc_for_udp(netdev, headers.len() + plen, GFP_ATOMIC)?;
        skb.append(headers)?;
        if let Some(p) = &t.payload {
            gather_payload(dev, qps, p, skb.put(plen)?).map_err(|_| EFAULT)?;
        }
        Ok(skb)
    }
}
