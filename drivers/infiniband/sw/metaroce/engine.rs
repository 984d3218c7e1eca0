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
//! the next QP to that peer opens a new connection. An open connection whose last QP
//! goes may linger (spec [MR-CONN-16]): found by its connection id only, until the
//! reaper ([`Engine::reap`]) frees it.

use crate::conn::ConnCtx;
use crate::convert::ip;
use crate::counters::{transport_values, EngineCounters, NetCounters, TRANSPORT_COUNTERS};
use crate::driver::MetaRoceDriver;
use crate::rate_hint::RateShare;
use crate::transport::config;
use core::{fmt, net::IpAddr};
use kernel::{
    impl_has_work, new_mutex, new_spinlock_irq, new_work,
    prelude::*,
    sync::{aref::ARef, atomic::Relaxed, Arc, Mutex, SpinLockIrq},
    workqueue::{Work, WorkItem},
};
use metaroce_proto::{
    constants::COMMON_HEADER_LEN,
    limit::TokenBucket,
    wire::{
        headers_len, Control, ControlCode, Flags, Header, PacketType, UdHeader, MAX_UD_HEADER_LEN,
    },
    Instant, QpId,
};
use rdma::{
    device::{Device, DriverQp, Registry},
    netdev::{NetDevice, NetDeviceId},
    qp::QpAttributes,
    udp::Received,
};

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
    /// Frees the connections whose linger ended ([`Engine::reap`]).
    #[pin]
    reaper: Work<Engine>,
}

impl_has_work! {
    impl HasWork<Self> for Engine { self.reaper }
}

impl WorkItem for Engine {
    type Pointer = Arc<Engine>;

    fn run(this: Arc<Engine>) {
        this.free_lingering();
    }
}

/// Datagrams with `dst_conn` 0 (a peer opening a connection, before it has our id) a
/// device queues at most at once; per second, the module parameter `open_rate` (spec
/// [MR-SEC-8]). A peer sends such datagrams for one round trip per connection it
/// opens; a spoofer of a peer's address could otherwise fill inboxes with them at line
/// rate.
pub(crate) const OPEN_BURST: u32 = 1024;

/// The most connections a device has (module parameter `max_conns`).
fn max_conns() -> usize {
    crate::module_parameters::max_conns.value() as usize
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
                reaper <- new_work!("metaroce::Engine::reaper"),
            }),
            GFP_KERNEL,
        )
    }

    /// The device's network device.
    pub(crate) fn netdev(&self) -> &NetDevice {
        &self.ndev
    }

    /// The number of open connections (closed ones waiting for their QPs to go and
    /// lingering ones are not counted).
    pub(crate) fn conns(&self) -> usize {
        self.conns.lock().iter().filter(|c| c.is_open()).count()
    }

    /// A connection of the table that `f` picks.
    fn find_conn(&self, f: impl Fn(&ConnCtx) -> bool) -> Option<Arc<ConnCtx>> {
        self.conns.lock().iter().find(|c| f(c)).cloned()
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
        for c in self.conns.lock().iter().filter(|c| c.is_open()) {
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
            let active = conns.iter().filter(|c| c.is_open() && c.data_at() >= since);
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
            let r = match self.registry.get_by_netdev(self.netdev) {
                Some(dev) => crate::ud::receive(&dev, &mut rx),
                None => Err(crate::ud::UdDrop::NoQp),
            };
            match r {
                Ok(()) => {
                    self.stats.ud_rx.fetch_add(1, Relaxed);
                }
                Err(why) => self.stats.count_ud_drop(why),
            }
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
                // By the address alone; a lingering connection only by the peer's id
                // too: its peer retransmits without knowing ours (spec [MR-CONN-16]).
                let open = conns.iter().find(|c| c.peer == peer && c.is_open());
                let lingering = || {
                    conns
                        .iter()
                        .find(|c| c.peer == peer && c.is_lingering() && c.peer_id() == h.src_conn)
                };
                (open.or_else(lingering).cloned(), false)
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
                && !Self::is_control(&h, rx.payload(), ControlCode::Close)
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
        // A lingering connection takes no new work: it leaves a probe of its peer
        // unanswered, as if it had gone (spec [MR-CONN-14], [MR-CONN-16]).
        if found.as_ref().is_some_and(|c| c.is_lingering())
            && Self::is_control(&h, rx.payload(), ControlCode::Open)
        {
            self.stats.rx_linger_probes.fetch_add(1, Relaxed);
            rx.discard();
            return;
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

    /// Whether the datagram whose header is `h` is a CONTROL packet with `code`: a
    /// CLOSE (of a connection that has gone, or goes: no sign of a restart), an OPEN.
    fn is_control(h: &Header, datagram: &[u8], code: ControlCode) -> bool {
        h.ty == PacketType::Control as u8 && Control::parse(datagram).is_ok_and(|c| c.code == code)
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
        qp: &Arc<DriverQp<MetaRoceDriver>>,
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
        qp: &Arc<DriverQp<MetaRoceDriver>>,
        attrs: &QpAttributes,
        peer: IpAddr,
    ) -> Result<Binding> {
        let av = attrs.av.ok_or(EINVAL)?;
        let existing = self.find_conn(|c| c.peer == peer && c.is_open());
        let existing = existing.filter(|c| {
            c.peer_id() == 0 || c.quiet_ns() < crate::conn::QUIET_NS || !c.probe_and_wait(dev)
        });
        let (conn, new) = match existing {
            Some(c) => (c, false),
            None => {
                // Spec [MR-SEC-9]: a bounded number of connections per device
                // (checked at RTR already; this is for RTRs that raced for the last).
                // A lingering connection gives its place (spec [MR-CONN-16]).
                if self.conns.lock().len() >= max_conns() {
                    match self.find_conn(|c| c.is_lingering()) {
                        Some(c) => self.retire(&c),
                        None => {
                            self.refuse_conn(dev);
                            return Err(ENOSPC);
                        }
                    }
                }
                let id = self.fresh_conn_id()?;
                let cfg = config(id, dev.data().payload_mtu(attrs.path_mtu), attrs);
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
            let held = conns.iter().filter(|c| !c.is_lingering()).count();
            held < max_conns() || conns.iter().any(|c| c.peer == peer && c.is_open())
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

    /// Unbinds a QP; the connection goes with its last QP, or lingers first if a
    /// closed QP of it acknowledges what it received (spec [MR-CONN-16]).
    pub(crate) fn unbind(&self, b: Binding) {
        let _guard = self.bind_lock.lock();
        if b.conn.unbind(b.id) > 0 {
            return;
        }
        if b.conn.start_linger() {
            self.stats.conns_lingered.fetch_add(1, Relaxed);
        } else {
            self.retire(&b.conn);
        }
    }

    /// Asks the reaper to free the connections whose linger ended (any context).
    pub(crate) fn reap(self: &Arc<Self>) {
        let _ = rdma::work::system_percpu().enqueue::<Arc<Self>, 0>(self.clone());
    }

    /// The reaper's work: frees the connections whose linger ended.
    fn free_lingering(&self) {
        let _guard = self.bind_lock.lock();
        while let Some(c) = self.find_conn(ConnCtx::linger_over) {
            self.retire(&c);
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
        self.stats.retire(&stats, drops, runs);
        drop(removed);
    }

    /// The transport counters ([`TRANSPORT_COUNTERS`]) of retired and open connections.
    pub(crate) fn transport_counters(&self) -> [u64; TRANSPORT_COUNTERS] {
        let mut sum = self.stats.retired();
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
        {
            let _guard = self.bind_lock.lock();
            while let Some(c) = self.find_conn(|_| true) {
                self.retire(&c);
            }
        }
        // No connection is left to queue the reaper (it takes `bind_lock`).
        rdma::work::flush(&self.reaper);
    }
}
