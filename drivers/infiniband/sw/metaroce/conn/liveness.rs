// SPDX-License-Identifier: GPL-2.0

//! Whether the peer is still there: when it was last heard from, and the probes that
//! ask it (a CONTROL `OPEN` to its connection id, spec [MR-CONN-8]) before a QP binds
//! after a quiet second or when it spoke with a new connection id. A peer that answers
//! none is gone, and the connection closes (spec [MR-CONN-14]).

use super::{ConnCtx, Serialized};
use crate::driver::MetaRoceDriver;
use kernel::{
    sync::{atomic::Relaxed, Arc},
    time::Delta,
};
use metaroce_proto::{ConnState as CoreState, Instant as CoreInstant};
use rdma::device::Device;

/// A peer not heard from for this long is probed before a QP binds to its connection:
/// it may have restarted (spec [MR-CONN-14]).
pub(crate) const QUIET_NS: u64 = 1_000_000_000;

/// Probes of a peer, this far apart; the peer is gone when it answered none of
/// [`PROBES`] by the time the next would go.
const PROBE_INTERVAL_NS: u64 = 100_000_000;
const PROBES: u8 = 3;

/// How long [`ConnCtx::probe_and_wait`] waits for a verdict at most.
const PROBE_WAIT_NS: u64 = (PROBES as u64 + 2) * PROBE_INTERVAL_NS;

/// A probe of the peer in progress ([`ConnCtx::watch_peer`]).
#[derive(Clone, Copy)]
pub(super) struct Probe {
    /// Probes sent.
    pub(super) sent: u8,
    /// When the next goes, or the peer is found gone.
    pub(super) next_at: CoreInstant,
}

impl ConnCtx {
    /// The peer's connection id, 0 until learned.
    pub(crate) fn peer_id(&self) -> u32 {
        self.peer_id.load(Relaxed)
    }

    /// Whether the peer has shown that it knows our connection id (as of the last
    /// run): the core refuses a `dst_conn` 0 packet from then on, and the receive path
    /// drops it before queueing it (spec [MR-CONN-13]).
    pub(crate) fn peer_knows_us(&self) -> bool {
        self.peer_knows_us.load(Relaxed)
    }

    /// Nanoseconds since a datagram of the peer last reached the core.
    pub(crate) fn quiet_ns(&self) -> u64 {
        rdma::clock::local_ns().saturating_sub(self.heard_at.load(Relaxed))
    }

    /// Asks the connection to probe its peer, if it has not heard from it within a
    /// probe interval (any context). A peer that answers none of the probes is gone:
    /// the connection closes ([`Self::watch_peer`]).
    pub(crate) fn probe_peer(self: &Arc<Self>) {
        if self.is_closed() || self.probing.load(Relaxed) || self.quiet_ns() < PROBE_INTERVAL_NS {
            return;
        }
        self.probe_req.store(true, Relaxed);
        self.kick();
    }

    /// Probes the peer now and waits for the verdict (process context, sleeps up to
    /// half a second): `true` if the peer is gone and the connection closed.
    pub(crate) fn probe_and_wait(self: &Arc<Self>, dev: &Device<MetaRoceDriver>) -> bool {
        self.probe_req.store(true, Relaxed);
        self.drive(dev, &mut self.state.lock());
        let start = rdma::clock::local_ns();
        while (self.probe_req.load(Relaxed) || self.probing.load(Relaxed))
            && rdma::clock::local_ns().saturating_sub(start) < PROBE_WAIT_NS
        {
            kernel::time::delay::fsleep(Delta::from_millis(5));
        }
        self.is_closed()
    }

    /// Notes what the peer sent, and probes it when asked to
    /// ([`Self::probe_peer`]): a peer that answers none of [`PROBES`] probes sent
    /// [`PROBE_INTERVAL_NS`] apart (while nothing else came from it either) is gone,
    /// and the connection closes: its QPs are flushed and a CLOSE goes out (spec
    /// [MR-CONN-14]).
    pub(super) fn watch_peer(
        self: &Arc<Self>,
        dev: &Device<MetaRoceDriver>,
        now: CoreInstant,
        st: &mut Serialized,
    ) {
        let s = st.conn.stats();
        let valid = s.rx_packets.saturating_sub(s.rx_dropped);
        let heard = valid != st.valid_rx;
        if heard {
            st.valid_rx = valid;
            self.heard_at.store(rdma::clock::local_ns(), Relaxed);
        }
        let peer = st.conn.peer_conn_id();
        if peer != 0 && self.peer_id() == 0 {
            self.peer_id.store(peer, Relaxed);
        }
        self.peer_knows_us.store(st.conn.peer_knows_us(), Relaxed);
        let asked = self.probe_req.load(Relaxed) && self.probe_req.xchg(false, Relaxed);
        let stats = &dev.data().net().engine().stats;
        // No probe without the peer's id, or once closing.
        if peer == 0 || self.is_closed() || st.conn.state() != CoreState::Open {
            st.probe = None;
        } else if let Some(p) = st.probe {
            if heard {
                // The peer is there.
                st.probe = None;
            } else if now >= p.next_at && p.sent >= PROBES {
                st.probe = None;
                st.conn.close(0);
                self.closed.store(true, Relaxed);
                stats.conns_peer_gone.fetch_add(1, Relaxed);
            } else if now >= p.next_at {
                st.probe = Some(Probe {
                    sent: p.sent + 1,
                    next_at: now.add_nanos(PROBE_INTERVAL_NS),
                });
                self.send_probe(dev, &st.conn, &mut st.buf, &mut st.routes);
            }
        } else if asked && !heard {
            st.probe = Some(Probe {
                sent: 1,
                next_at: now.add_nanos(PROBE_INTERVAL_NS),
            });
            stats.conn_probes.fetch_add(1, Relaxed);
            self.send_probe(dev, &st.conn, &mut st.buf, &mut st.routes);
        }
        self.probing.store(st.probe.is_some(), Relaxed);
    }
}
