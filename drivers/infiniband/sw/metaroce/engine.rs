// SPDX-License-Identifier: GPL-2.0

//! The transport engine of one device: its connections, one per peer address, and the
//! receive dispatch to them.
//!
//! A connection is created when the first QP to a peer enters RTR and goes away with
//! the last QP bound to it. Received datagrams find their connection by the `dst_conn`
//! of the common header and the source address, both of which must match, or, for a
//! connection the peer is opening (`dst_conn == 0`, `OPEN`), by the source address
//! alone. Nothing is created for unsolicited packets.
//!
//! A closed connection (its peer sent CLOSE, or the peer is gone, see
//! [`crate::conn`]) stays in the table, out of every lookup, until its last QP goes:
//! the next QP to that peer opens a new connection.

use crate::conn::ConnCtx;
use crate::counters::NetCounters;
use crate::driver::MetaRoceDriver;
use crate::rate_hint::RateShare;
use core::{
    fmt,
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
};
use kernel::{
    new_mutex, new_spinlock_irq,
    prelude::*,
    sync::{
        aref::ARef,
        atomic::{Atomic, Relaxed},
        Arc, Mutex, SpinLockIrq,
    },
};
use metaroce_proto::{
    constants::COMMON_HEADER_LEN,
    limit::TokenBucket,
    wire::{
        headers_len, Control, ControlCode, Flags, Header, PacketType, UdHeader, MAX_UD_HEADER_LEN,
    },
    Config, Instant, QpId, Stats,
};
use rdma::{
    av::IpAddress,
    device::{Device, Registry},
    netdev::{NetDevice, NetDeviceId},
    qp::{Qp, QpAttributes},
    udp::Received,
};

/// UDP source ports (paths) each connection sprays over.
pub(crate) const PATHS: u8 = 8;

/// Engine counters (see `HW_COUNTERS`).
pub(crate) struct EngineCounters {
    /// Connections created so far.
    pub(crate) conns_opened: Atomic<u64>,
    /// QP bindings made so far.
    pub(crate) qps_bound: Atomic<u64>,
    /// Datagrams for no connection of this device.
    pub(crate) rx_no_conn: Atomic<u64>,
    /// Datagrams without a valid MetaRoCE common header.
    pub(crate) rx_bad_header: Atomic<u64>,
    /// Datagrams whose `dst_conn` names a connection of another peer address.
    pub(crate) rx_wrong_peer: Atomic<u64>,
    /// Datagrams with `dst_conn` 0 after the peer showed that it knows our id,
    /// dropped before they are queued.
    pub(crate) rx_late_open: Atomic<u64>,
    /// Datagrams the connection would refuse, dropped before they are queued: a
    /// `src_conn` other than the peer's id, or `dst_conn` 0 without `OPEN`.
    pub(crate) rx_wrong_src: Atomic<u64>,
    /// Datagrams with `dst_conn` 0 (not authenticated by our connection id) over the
    /// device's rate for them, dropped before they are queued (spec [MR-SEC-8]).
    pub(crate) rx_open_limited: Atomic<u64>,
    /// New connections refused: the device has `max_conns` (spec [MR-SEC-9]).
    pub(crate) conns_refused: Atomic<u64>,
    /// Connections closed by their peer's CLOSE.
    pub(crate) conns_peer_closed: Atomic<u64>,
    /// Connections closed because their peer answered no probe.
    pub(crate) conns_peer_gone: Atomic<u64>,
    /// Probes of a peer started ([`ConnCtx::probe_peer`]).
    pub(crate) conn_probes: Atomic<u64>,
    /// UD datagrams sent.
    pub(crate) ud_tx: Atomic<u64>,
    /// UD datagrams delivered to a receive.
    pub(crate) ud_rx: Atomic<u64>,
    /// UD datagrams dropped: malformed, no UD QP in RTR/RTS with that number and
    /// Q_Key, or no receive posted.
    pub(crate) ud_rx_dropped: Atomic<u64>,
    /// The transport counters of retired connections ([`TRANSPORT_COUNTERS`]).
    retired: [Atomic<u64>; TRANSPORT_COUNTERS],
}

/// The protocol counters summed over a device's connections, in this order:
/// data packets sent, retransmitted, retransmission timeouts, of those the spurious
/// ones, ACKs sent, NAKs sent, duplicate data received, datagrams the core dropped
/// and of those the ones out of a path's window and for no QP, datagrams the inbox
/// dropped, runs of the connections' serialized context.
pub(crate) const TRANSPORT_COUNTERS: usize = 13;

fn transport_values(s: &Stats, inbox_drops: u64, runs: u64) -> [u64; TRANSPORT_COUNTERS] {
    [
        s.tx_data,
        s.tx_retransmits,
        s.timeouts,
        s.spurious_timeouts,
        s.tx_acks,
        s.tx_naks,
        s.rx_duplicates,
        s.rx_dropped,
        s.rx_out_of_window,
        s.rx_no_qp,
        s.rx_wrong_conn,
        inbox_drops,
        runs,
    ]
}

impl EngineCounters {
    fn new() -> Self {
        Self {
            conns_opened: Atomic::new(0),
            qps_bound: Atomic::new(0),
            rx_no_conn: Atomic::new(0),
            rx_bad_header: Atomic::new(0),
            rx_wrong_peer: Atomic::new(0),
            rx_late_open: Atomic::new(0),
            rx_wrong_src: Atomic::new(0),
            rx_open_limited: Atomic::new(0),
            conns_refused: Atomic::new(0),
            conns_peer_closed: Atomic::new(0),
            conns_peer_gone: Atomic::new(0),
            conn_probes: Atomic::new(0),
            ud_tx: Atomic::new(0),
            ud_rx: Atomic::new(0),
            ud_rx_dropped: Atomic::new(0),
            retired: [const { Atomic::new(0) }; TRANSPORT_COUNTERS],
        }
    }
}

/// A QP's place in the engine.
#[derive(Clone)]
pub(crate) struct Binding {
    pub(crate) conn: Arc<ConnCtx>,
    pub(crate) id: QpId,
}

/// The connections of one device.
#[pin_data]
pub(crate) struct Engine {
    registry: Arc<Registry<MetaRoceDriver>>,
    netdev: NetDeviceId,
    ndev: ARef<NetDevice>,
    pub(crate) counters: Arc<NetCounters>,
    pub(crate) stats: EngineCounters,
    /// Taken in softirq context, hence IRQ-safe.
    #[pin]
    conns: SpinLockIrq<KVec<Arc<ConnCtx>>>,
    /// Serializes creating and retiring connections.
    #[pin]
    bind_lock: Mutex<()>,
    /// The budget of datagrams with `dst_conn` 0 (`open_rate`, [`OPEN_BURST`]).
    #[pin]
    open_budget: SpinLockIrq<TokenBucket>,
    /// The inbound capacity shared among the peers (rate hints).
    rate: RateShare,
}

/// Datagrams with `dst_conn` 0 (a peer opening a connection, before it has our id) a
/// device queues at most at once; per second, the module parameter `open_rate` (spec
/// [MR-SEC-8]). A peer sends such datagrams for one round trip per connection it
/// opens; a spoofer of a peer's address could otherwise fill inboxes with them at line
/// rate.
pub(crate) const OPEN_BURST: u32 = 1024;

/// Data packets a receiver acknowledges at once. ACKs cost a software transport
/// nearly as much as data packets; the sender asks for an immediate ACK whenever it
/// waits for one (`ACK_REQ`: a signaled completion, a full window, a retransmission).
pub(crate) const ACK_EVERY: u32 = 8;

/// The longest a receiver holds an ACK back ([MR-SACK-10]): long enough that the
/// delay timer seldom fires while data flows (with 1 ms, READ requests arriving every
/// half millisecond under TCG each cost the requester a run and half an ACK). The core
/// holds it back a quarter of the shortest retransmission timeout at most, and adds it
/// to the RTO.
pub(crate) const ACK_DELAY_NS: u64 = 2_000_000;

/// The retransmission timer from the verbs "local ACK timeout" (`4.096 us << timeout`,
/// 0 meaning infinite): the initial RTO is that timeout, as the IB spec has it, and the
/// adaptive RTO never goes below a quarter of it (perftest's 14 gives 67 ms and
/// 16.8 ms). A software transport's queues grow by milliseconds within one round trip
/// when a window opens (more so in an emulated VM), faster than the RTT estimate
/// follows: a shorter floor retransmitted up to 9% of the data of a 64 KiB
/// `ib_write_bw` spuriously. Losses are recovered from SACK well before that.
pub(crate) fn rto_from_local_ack_timeout(timeout: u8) -> (u64, u64) {
    const DEFAULT: u8 = 14;
    let t = if timeout == 0 {
        DEFAULT
    } else {
        timeout.min(24)
    };
    let ns = 4096u64 << t;
    let initial = ns.clamp(1_000_000, 1_000_000_000);
    (initial, (ns / 4).clamp(100_000, 40_000_000))
}

/// The most connections a device has (module parameter `max_conns`).
fn max_conns() -> usize {
    crate::module_parameters::max_conns.value() as usize
}

pub(crate) fn ip(a: IpAddress) -> IpAddr {
    match a {
        IpAddress::V4(b) => IpAddr::V4(Ipv4Addr::from(b)),
        IpAddress::V6(b) => IpAddr::V6(Ipv6Addr::from(b)),
    }
}

impl Engine {
    pub(crate) fn new(
        registry: Arc<Registry<MetaRoceDriver>>,
        netdev: &NetDevice,
        counters: Arc<NetCounters>,
    ) -> Result<Arc<Self>> {
        let (id, ndev) = (netdev.id(), rdma::netdev::hold(netdev));
        let rate = RateShare::new(netdev.link_speed_mbps());
        Arc::pin_init(
            pin_init!(Self {
                registry,
                netdev: id,
                ndev,
                counters,
                stats: EngineCounters::new(),
                conns <- new_spinlock_irq!(KVec::new()),
                bind_lock <- new_mutex!(()),
                open_budget <- new_spinlock_irq!(TokenBucket::new(
                    crate::module_parameters::open_rate.value(),
                    OPEN_BURST,
                    Instant::from_nanos(rdma::clock::local_ns()),
                )),
                rate,
            }),
            GFP_KERNEL,
        )
    }

    /// The device's network device.
    pub(crate) fn netdev(&self) -> &NetDevice {
        &self.ndev
    }

    /// The number of open connections (closed ones waiting for their QPs to go are
    /// not counted).
    pub(crate) fn conns(&self) -> usize {
        self.conns.lock().iter().filter(|c| !c.is_closed()).count()
    }

    /// Writes the state of every connection (the `conns` debugfs file).
    pub(crate) fn write_conns(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut conns = KVec::new();
        for c in self.conns.lock().iter() {
            conns.push(c.clone(), GFP_ATOMIC).map_err(|_| fmt::Error)?;
        }
        for c in &conns {
            c.write_state(f)?;
        }
        Ok(())
    }

    /// Writes every open connection's rate hints and paths (the `paths` debugfs file).
    pub(crate) fn write_paths(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut conns = KVec::new();
        for c in self.conns.lock().iter().filter(|c| !c.is_closed()) {
            conns.push(c.clone(), GFP_ATOMIC).map_err(|_| fmt::Error)?;
        }
        for c in &conns {
            c.write_paths(f)?;
        }
        Ok(())
    }

    /// The rate hint (bytes/s, 0 = none) for the ACKs the device's connections send
    /// now (spec [MR-CC-12], [MR-CC-14]; [`RateShare`]). Any context; called with a
    /// connection's lock held, it takes the table's lock after it.
    pub(crate) fn rate_hint(&self) -> u64 {
        self.rate.hint(rdma::clock::local_ns(), |since| {
            let conns = self.conns.lock();
            let active = conns
                .iter()
                .filter(|c| !c.is_closed() && c.data_at() >= since);
            active.count() as u64
        })
    }

    /// Hands a received datagram to its connection (softirq context).
    ///
    /// The headers are made linear here (a no-op for our own datagrams, sent so); a
    /// data packet's payload may stay in paged fragments until its connection places
    /// it. A UD datagram is made wholly linear once its header names a QP that takes
    /// it ([`crate::ud::receive`]).
    pub(crate) fn receive(&self, mut rx: Received<'_>) {
        self.counters
            .count_rx(rx.info().ecn, rx.payload().len() + rx.paged_len());
        let linear = rx.make_linear(COMMON_HEADER_LEN).and_then(|()| {
            let n = if UdHeader::is_ud(rx.payload()) {
                MAX_UD_HEADER_LEN
            } else {
                headers_len(rx.payload())
            };
            rx.make_linear(n)
        });
        if linear.is_err() {
            self.stats.rx_bad_header.fetch_add(1, Relaxed);
            rx.discard();
            return;
        }
        if UdHeader::is_ud(rx.payload()) {
            let delivered = self
                .registry
                .get_by_netdev(self.netdev)
                .is_some_and(|dev| crate::ud::receive(&dev, &mut rx));
            let counter = if delivered {
                &self.stats.ud_rx
            } else {
                &self.stats.ud_rx_dropped
            };
            counter.fetch_add(1, Relaxed);
            rx.discard();
            return;
        }
        let Ok(h) = Header::parse(rx.payload()) else {
            self.stats.rx_bad_header.fetch_add(1, Relaxed);
            rx.discard();
            return;
        };
        let peer = rx.info().src.ip();
        // Spec [MR-SEC-7]: a connection id is only valid from the connection's peer.
        let (found, wrong_peer) = {
            let conns = self.conns.lock();
            if h.dst_conn != 0 {
                match conns
                    .iter()
                    .find(|c| c.local_id == h.dst_conn && !c.is_closed())
                {
                    Some(c) if c.peer == peer => (Some(c.clone()), false),
                    Some(_) => (None, true),
                    None => (None, false),
                }
            } else {
                (
                    conns
                        .iter()
                        .find(|c| c.peer == peer && !c.is_closed())
                        .cloned(),
                    false,
                )
            }
        };
        if wrong_peer {
            self.stats.rx_wrong_peer.fetch_add(1, Relaxed);
            rx.discard();
            return;
        }
        if let Some(c) = found.as_ref().filter(|_| h.dst_conn == 0) {
            // Spec [MR-CONN-14]: the peer opens a connection with a new id while ours
            // knows another one: it may have restarted. The connection asks it.
            let id = c.peer_id();
            if h.flags.has(Flags::OPEN)
                && id != 0
                && h.src_conn != id
                && !Self::is_close(&h, rx.payload())
            {
                c.probe_peer();
            }
            // Spec [MR-CONN-13]: the core would refuse it; it takes no inbox slot.
            if c.peer_knows_us() {
                self.stats.rx_late_open.fetch_add(1, Relaxed);
                rx.discard();
                return;
            }
        }
        if let Some(c) = found.as_ref() {
            // What the core would refuse takes no inbox slot either: `dst_conn` 0
            // without OPEN, or a `src_conn` other than the peer's (spec [MR-CONN-5]).
            let id = c.peer_id();
            if (h.dst_conn == 0 && !h.flags.has(Flags::OPEN)) || (id != 0 && h.src_conn != id) {
                self.stats.rx_wrong_src.fetch_add(1, Relaxed);
                rx.discard();
                return;
            }
            // Spec [MR-SEC-8]: unauthenticated datagrams within the device's budget.
            if h.dst_conn == 0
                && !self
                    .open_budget
                    .lock()
                    .take(Instant::from_nanos(rdma::clock::local_ns()))
            {
                self.stats.rx_open_limited.fetch_add(1, Relaxed);
                rx.discard();
                return;
            }
        }
        match found {
            // The datagrams of one GSO buffer go to the connection's inbox together:
            // an awaited one runs the connection at once only as the last.
            Some(c) => {
                let awaited = h.is_awaited() && !rx.more_follow();
                c.deliver(rx.into_owned(), awaited)
            }
            None => {
                self.stats.rx_no_conn.fetch_add(1, Relaxed);
                rx.discard();
            }
        }
    }

    /// Whether the datagram whose header is `h` is a CLOSE (of a connection that has
    /// gone, or goes: no sign of a restart).
    fn is_close(h: &Header, datagram: &[u8]) -> bool {
        h.ty == PacketType::Control as u8
            && Control::parse(datagram).is_ok_and(|c| c.code == ControlCode::Close)
    }

    /// A random connection id that no connection of this device uses: ids are
    /// unpredictable (spec [MR-CONN-2]: with the initial PSNs derived from them, an
    /// off-path attacker must guess 64 bits) and a peer tells a recreated device's
    /// connections apart. Called under `bind_lock`, so no other bind takes it first.
    fn fresh_conn_id(&self) -> Result<u32> {
        // With fewer than 2^20 connections, 8 draws all collide with odds below 2^-96.
        for _ in 0..8 {
            let id = rdma::random::u64() as u32;
            if id != 0 && !self.conns.lock().iter().any(|c| c.local_id == id) {
                return Ok(id);
            }
        }
        Err(EBUSY)
    }

    /// Binds `qp` (entering RTR) to the connection to the peer of its address vector,
    /// creating the connection if there is none, or if the one there is closed (also
    /// while this runs). A connection whose peer was quiet for [`crate::conn::QUIET_NS`]
    /// first probes it (sleeping up to half a second): a peer that has restarted since
    /// gets a new connection, rather than this QP an old one that it no longer knows.
    pub(crate) fn bind(
        &self,
        dev: &Device<MetaRoceDriver>,
        qp: &Arc<Qp<MetaRoceDriver>>,
        attrs: &QpAttributes,
    ) -> Result<Binding> {
        let av = attrs.av.ok_or(EINVAL)?;
        let peer = ip(av.dst);
        let _guard = self.bind_lock.lock();
        let mut retried = false;
        loop {
            match self.bind_once(dev, qp, attrs, peer) {
                Err(e) if e == ECONNRESET && !retried => retried = true,
                r => return r,
            }
        }
    }

    /// [`Self::bind`] to the connection found or made now; `ECONNRESET` if that one
    /// closed meanwhile.
    fn bind_once(
        &self,
        dev: &Device<MetaRoceDriver>,
        qp: &Arc<Qp<MetaRoceDriver>>,
        attrs: &QpAttributes,
        peer: IpAddr,
    ) -> Result<Binding> {
        let av = attrs.av.ok_or(EINVAL)?;
        let existing = self
            .conns
            .lock()
            .iter()
            .find(|c| c.peer == peer && !c.is_closed())
            .cloned();
        let existing = existing.filter(|c| {
            c.peer_id() == 0 || c.quiet_ns() < crate::conn::QUIET_NS || !c.probe_and_wait(dev)
        });
        let (conn, new) = match existing {
            Some(c) => (c, false),
            None => {
                // Spec [MR-SEC-9]: a bounded number of connections per device
                // (checked at RTR already; this is for RTRs that raced for the last).
                if self.conns.lock().len() >= max_conns() {
                    self.refuse_conn(dev);
                    return Err(ENOSPC);
                }
                let id = self.fresh_conn_id()?;
                let mut cfg = Config::new(id);
                cfg.paths = PATHS;
                cfg.mtu = dev.data().payload_mtu(attrs.path_mtu);
                // `retry_cnt`, `rnr_retry` and `timeout` are RTS attributes: these
                // are defaults until the QP gets there (ConnCtx::ready_to_send).
                cfg.retry_limit = attrs.retry_cnt.max(7);
                let (initial, min) = rto_from_local_ack_timeout(attrs.timeout);
                cfg.rto_initial_ns = initial;
                cfg.rto_min_ns = min;
                cfg.rto_max_ns = cfg.rto_max_ns.max(initial);
                cfg.rnr_retry = 7;
                cfg.ack_every = ACK_EVERY;
                cfg.ack_delay_ns = ACK_DELAY_NS;
                cfg.pacing_burst_ns = u64::from(rdma::params::pacing_burst_us()) * 1000;
                cfg.path_burst = rdma::params::path_burst();
                // Percent to 1/1024 units (the core clamps it to 1024..=4096).
                cfg.pacing_gain = rdma::params::pacing_gain_pct().saturating_mul(1024) / 100;
                cfg.window_ack_req = match rdma::params::window_ack_req() {
                    0 => u32::MAX,
                    n => n,
                };
                let c = ConnCtx::new(
                    self.registry.clone(),
                    self.ndev.clone(),
                    id,
                    ip(av.src),
                    peer,
                    cfg,
                )?;
                self.conns.lock().push(c.clone(), GFP_ATOMIC)?;
                self.stats.conns_opened.fetch_add(1, Relaxed);
                (c, true)
            }
        };
        match conn.bind(dev, qp, attrs.dest_qp_num, attrs.sq_psn, attrs.rq_psn) {
            Ok(id) => {
                self.stats.qps_bound.fetch_add(1, Relaxed);
                Ok(Binding { conn, id })
            }
            Err(e) => {
                if new {
                    self.retire(&conn);
                }
                Err(e)
            }
        }
    }

    /// Whether a QP to `peer` entering RTR finds its connection, or may make one
    /// within `max_conns` (spec [MR-SEC-9]); counts a refusal. Any context.
    pub(crate) fn admits(&self, dev: &Device<MetaRoceDriver>, peer: IpAddr) -> bool {
        let ok = {
            let conns = self.conns.lock();
            conns.len() < max_conns() || conns.iter().any(|c| c.peer == peer && !c.is_closed())
        };
        if !ok {
            self.refuse_conn(dev);
        }
        ok
    }

    fn refuse_conn(&self, dev: &Device<MetaRoceDriver>) {
        self.stats.conns_refused.fetch_add(1, Relaxed);
        kernel::pr_warn_once!(
            "{:?}: {} connections, the most max_conns allows: RTR to a new peer fails (ENOSPC)\n",
            dev.name(),
            max_conns()
        );
    }

    /// Unbinds a QP; the connection goes with its last QP.
    pub(crate) fn unbind(&self, b: Binding) {
        let _guard = self.bind_lock.lock();
        if b.conn.unbind(b.id) == 0 {
            self.retire(&b.conn);
        }
    }

    /// Takes `conn` out of the table and stops it (with `bind_lock` held or at the end).
    fn retire(&self, conn: &Arc<ConnCtx>) {
        let removed = {
            let mut conns = self.conns.lock();
            let i = conns.iter().position(|c| Arc::ptr_eq(c, conn));
            i.and_then(|i| conns.remove(i).ok())
        };
        conn.shutdown();
        let (stats, drops, runs) = conn.stats();
        for (t, v) in self
            .stats
            .retired
            .iter()
            .zip(transport_values(&stats, drops, runs))
        {
            t.fetch_add(v, Relaxed);
        }
        drop(removed);
    }

    /// The transport counters ([`TRANSPORT_COUNTERS`]) of retired and open connections.
    pub(crate) fn transport_counters(&self) -> [u64; TRANSPORT_COUNTERS] {
        let mut sum = [0u64; TRANSPORT_COUNTERS];
        for (s, r) in sum.iter_mut().zip(self.stats.retired.iter()) {
            *s = r.load(Relaxed);
        }
        let mut live = KVec::new();
        for c in self.conns.lock().iter() {
            if live.push(c.clone(), GFP_ATOMIC).is_err() {
                break;
            }
        }
        for c in &live {
            let (stats, drops, runs) = c.stats();
            for (s, v) in sum.iter_mut().zip(transport_values(&stats, drops, runs)) {
                *s += v;
            }
        }
        sum
    }

    /// Stops every connection (the device is going away).
    pub(crate) fn shutdown_all(&self) {
        let _guard = self.bind_lock.lock();
        loop {
            let next = self.conns.lock().first().cloned();
            let Some(c) = next else {
                break;
            };
            self.retire(&c);
        }
    }
}
