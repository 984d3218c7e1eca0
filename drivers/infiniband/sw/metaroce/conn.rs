// SPDX-License-Identifier: GPL-2.0

//! One MetaRoCE connection to a peer: the protocol core's [`Connection`] and the
//! single serialized context that drives it.
//!
//! Everything that touches the connection runs under its lock, a spinlock taken with
//! bottom halves disabled: the work item (softirq) that receive, the hrtimer and a
//! streaming QP's doorbell queue, the doorbell of any other QP, the receive softirq
//! itself for a datagram its sender waits on, and the verbs that bind, fail or
//! unbind a QP. Nothing in there sleeps. See
//! Documentation/metaroce/design.rst, "The transport engine".
//!
//! A connection is *closed* when its peer sends CLOSE, or when the peer is gone: asked
//! with probes (a CONTROL `OPEN` to its connection id, which a live peer answers
//! with an ACK, spec [MR-CONN-8]) because it spoke with a new connection id or a QP
//! binds after a quiet second, it answered none. A closed connection is out of its
//! device's lookups (no datagram reaches it, no QP binds to it), its QPs are in the
//! error state, and it goes with the last of them (spec [MR-CONN-14]). An open
//! connection whose last QP goes may linger first (`linger.rs`, spec [MR-CONN-16]).
//!
//! This file holds the context and its run loop; `steer.rs` where and when it runs
//! (doorbells, receive, the work item's CPU), `liveness.rs` whether the peer is there,
//! `linger.rs` its end, `xmit.rs` the datagrams it sends and `view.rs` what it shows
//! of itself.

use crate::bound::Bound;
use crate::driver::MetaRoceDriver;
use crate::memory::QpMemory;
use crate::trace;
use crate::transport::{retransmission, Conn, QpSlots, MAX_QPS_PER_CONN};
use core::net::IpAddr;
use kernel::{
    impl_has_hr_timer, impl_has_work, new_spinlock_irq, new_work,
    prelude::*,
    sync::{
        aref::ARef,
        atomic::{Atomic, Relaxed},
        Arc, ArcBorrow, SpinLockIrq,
    },
    time::{
        hrtimer::{
            ArcHrTimerHandle, HrTimer, HrTimerCallback, HrTimerCallbackContext, HrTimerPointer,
            HrTimerRestart, RelativeMode,
        },
        Delta, Monotonic,
    },
    workqueue::{Work, WorkItem},
};
use metaroce_proto::{
    constants::MIN_TRANSMIT_BUF, Config, ConnState as CoreState, Connection, Event,
    Instant as CoreInstant, PostError, QpId, QpSlot, QpStore, ResponderError,
};
use rdma::{
    device::{Device, DriverQp, Registry},
    netdev::{NetDevice, NetDeviceId},
    qp::QpEvent,
    sync::SpinLockBh,
    udp::{Ecn, OwnedDatagram, RouteCache},
};

mod linger;
mod liveness;
mod steer;
mod view;
mod xmit;

use liveness::Probe;
pub(crate) use liveness::QUIET_NS;
use steer::{NO_CPU, STREAM_BATCH};

/// Received datagrams a connection buffers between two runs of its work item, at most.
const INBOX_LEN: usize = 1024;

/// Room for datagrams each half of a new connection's inbox starts with: a half doubles
/// when a datagram finds it full, up to [`INBOX_LEN`] ([`ConnCtx::deliver`]), so an idle
/// or request-response connection never holds the room a stream needs (1024 slots of
/// about 90 bytes, each half).
const INBOX_MIN: usize = 16;

/// The shortest timer delay, for deadlines already due.
const MIN_TIMER_NS: u64 = 1_000;

/// Counters of one connection's driver side.
pub(crate) struct ConnCounters {
    pub(crate) inbox_drops: Atomic<u64>,
    /// Runs of the serialized context.
    pub(crate) runs: Atomic<u64>,
}

impl ConnCounters {
    fn new() -> Self {
        Self {
            inbox_drops: Atomic::new(0),
            runs: Atomic::new(0),
        }
    }
}

/// What only the serialized context touches (the state under [`ConnCtx::state`]).
struct Serialized {
    conn: KBox<Conn>,
    /// The bound QPs, by their stream index.
    qps: KVec<Option<Bound>>,
    /// The other half of the inbox's double buffer.
    rx: KVec<OwnedDatagram>,
    /// Headers of the packet being built.
    buf: KVec<u8>,
    /// The route of each path (its UDP source port), kept between datagrams.
    routes: KVec<RouteCache>,
    /// The armed timer (holds a reference to the connection until cancelled).
    timer: Option<ArcHrTimerHandle<ConnCtx>>,
    /// Its deadline.
    armed: Option<CoreInstant>,
    /// The latest time a run read: the core's clock never goes back, whichever CPU
    /// runs the connection ([`rdma::clock`]).
    clock: CoreInstant,
    /// Shut down: do nothing more.
    dead: bool,
    /// Datagrams the core took from the peer so far (received, not dropped).
    valid_rx: u64,
    /// The probe of the peer in progress.
    probe: Option<Probe>,
    /// Payload bytes the core placed so far (its `rx_bytes`), as of the last run.
    placed: u64,
}

/// A connection and its execution context.
#[pin_data]
pub(crate) struct ConnCtx {
    /// Our connection id (the peer's `dst_conn`).
    pub(crate) local_id: u32,
    /// The peer's address and ours.
    pub(crate) peer: IpAddr,
    src: IpAddr,
    registry: Arc<Registry<MetaRoceDriver>>,
    netdev: NetDeviceId,
    /// The device's netdev, held (the RDMA core's `ib_device_get_netdev` may not be
    /// called from softirq).
    ndev: ARef<NetDevice>,
    /// The core's clock starts at the connection's creation ([`rdma::clock::local_ns`]).
    epoch: u64,
    pub(crate) counters: ConnCounters,
    /// The CPU of the last streaming doorbell (the application's), or [`NO_CPU`]:
    /// while the connection streams, its work item runs on another CPU.
    app_cpu: Atomic<u32>,
    /// The last run received and sent [`STREAM_BATCH`] or more datagrams: the
    /// connection carries a stream, and its work item leaves a CPU that runs a user
    /// task for the next one ([`Self::kick`]).
    in_stream: Atomic<bool>,
    /// A streaming doorbell found the connection running and left its QP's new WQEs
    /// to the next run ([`Self::doorbell`]).
    rung: Atomic<bool>,
    /// [`Self::shutdown`] began: the receive path queues and schedules nothing more.
    /// Set and read under the inbox's lock.
    shut: Atomic<bool>,
    /// Closed: by the peer's CLOSE, or the peer is gone. Out of the device's lookups.
    closed: Atomic<bool>,
    /// The peer's connection id, once learned (0 before).
    peer_id: Atomic<u32>,
    /// The core's [`Conn::peer_knows_us`], as of the last run.
    peer_knows_us: Atomic<bool>,
    /// When a datagram of the peer last reached the core ([`rdma::clock::local_ns`]).
    heard_at: Atomic<u64>,
    /// A probe of the peer is asked for ([`Self::probe_peer`]).
    probe_req: Atomic<bool>,
    /// A probe of the peer is in progress.
    probing: Atomic<bool>,
    /// When a run last placed data of the peer ([`rdma::clock::local_ns`]; 0 never):
    /// the peer is an active sender for the device's rate hint.
    data_at: Atomic<u64>,
    /// When the last QP went and the connection began to linger
    /// ([`rdma::clock::local_ns`]; 0: it does not linger, see `linger.rs`).
    linger_since: Atomic<u64>,
    #[pin]
    inbox: SpinLockIrq<KVec<OwnedDatagram>>,
    #[pin]
    state: SpinLockBh<Serialized>,
    #[pin]
    work: Work<ConnCtx>,
    #[pin]
    timer: HrTimer<ConnCtx>,
}

impl_has_work! {
    impl HasWork<Self> for ConnCtx { self.work }
}

impl_has_hr_timer! {
    impl HasHrTimer<Self> for ConnCtx {
        mode: RelativeMode<Monotonic>,
        field: self.timer
    }
}

impl WorkItem for ConnCtx {
    type Pointer = Arc<ConnCtx>;

    fn run(this: Arc<ConnCtx>) {
        this.run_queued();
    }
}

impl HrTimerCallback for ConnCtx {
    type Pointer<'a> = Arc<ConnCtx>;

    fn run(this: ArcBorrow<'_, Self>, _ctx: HrTimerCallbackContext<'_, Self>) -> HrTimerRestart {
        Arc::<ConnCtx>::from(this).kick();
        HrTimerRestart::NoRestart
    }
}

impl ConnCtx {
    /// Creates the connection `local_id` to `peer`, configured from the first QP.
    pub(crate) fn new(
        registry: Arc<Registry<MetaRoceDriver>>,
        ndev: ARef<NetDevice>,
        local_id: u32,
        src: IpAddr,
        peer: IpAddr,
        cfg: Config,
    ) -> Result<Arc<Self>> {
        let epoch = rdma::clock::local_ns();
        let conn = KBox::init(
            Connection::init_aimd_with(
                cfg,
                QpSlots::default(),
                CoreInstant::ZERO,
                rdma::random::u64(),
            ),
            GFP_KERNEL_ACCOUNT,
        )?;
        let qps = KVec::new();
        let mut buf = KVec::with_capacity(MIN_TRANSMIT_BUF, GFP_KERNEL_ACCOUNT)?;
        buf.resize(MIN_TRANSMIT_BUF, 0, GFP_KERNEL_ACCOUNT)?;
        let mut routes = KVec::with_capacity(usize::from(cfg.paths), GFP_KERNEL_ACCOUNT)?;
        for _ in 0..cfg.paths {
            routes.push(RouteCache::new(GFP_KERNEL_ACCOUNT)?, GFP_KERNEL_ACCOUNT)?;
        }
        let state = Serialized {
            conn,
            qps,
            rx: KVec::with_capacity(INBOX_MIN, GFP_KERNEL_ACCOUNT)?,
            buf,
            routes,
            timer: None,
            armed: None,
            clock: CoreInstant::ZERO,
            dead: false,
            valid_rx: 0,
            probe: None,
            placed: 0,
        };
        let inbox = KVec::with_capacity(INBOX_MIN, GFP_KERNEL_ACCOUNT)?;
        // As if the peer had just been heard from (`epoch` names the field inside).
        let born = epoch;
        Arc::pin_init(
            pin_init!(Self {
                local_id,
                peer,
                src,
                registry,
                netdev: ndev.id(),
                ndev,
                epoch,
                counters: ConnCounters::new(),
                app_cpu: Atomic::new(NO_CPU),
                in_stream: Atomic::new(false),
                rung: Atomic::new(false),
                shut: Atomic::new(false),
                closed: Atomic::new(false),
                peer_id: Atomic::new(0),
                peer_knows_us: Atomic::new(false),
                heard_at: Atomic::new(born),
                probe_req: Atomic::new(false),
                probing: Atomic::new(false),
                data_at: Atomic::new(0),
                linger_since: Atomic::new(0),
                inbox <- new_spinlock_irq!(inbox),
                state <- rdma::new_spinlock_bh!(state, "metaroce_conn"),
                work <- new_work!("metaroce::ConnCtx::work"),
                timer <- HrTimer::new(),
            }),
            GFP_KERNEL_ACCOUNT,
        )
    }

    /// The core's time: nanoseconds since the connection's creation.
    fn now(&self) -> CoreInstant {
        CoreInstant::from_nanos(rdma::clock::local_ns().saturating_sub(self.epoch))
    }

    /// The core's time for a run: [`Self::now`], never earlier than a previous run's.
    fn tick(&self, st: &mut Serialized) -> CoreInstant {
        st.clock = st.clock.max(self.now());
        st.clock
    }

    /// A run of the connection for one of its work items.
    fn run_queued(self: &Arc<Self>) {
        self.run_locked(&mut self.state.lock());
    }

    /// Runs the connection, whose lock `st` is, for its device; with the device gone,
    /// drops what was received.
    fn run_locked(self: &Arc<Self>, st: &mut Serialized) {
        match self.registry.get_by_netdev(self.netdev) {
            Some(dev) => self.drive(&dev, st),
            None => self.inbox.lock().clear(),
        }
    }

    /// Whether the connection is closed (by its peer, or the peer is gone): the device
    /// routes no datagram to it and binds no QP to it.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Relaxed)
    }

    /// Binds `qp` (entering RTR) as a stream to the peer's `dest_qpn`.
    pub(crate) fn bind(
        self: &Arc<Self>,
        dev: &Device<MetaRoceDriver>,
        qp: &Arc<DriverQp<MetaRoceDriver>>,
        dest_qpn: u32,
        sq_psn: u32,
        rq_psn: u32,
    ) -> Result<QpId> {
        // Allocated before the lock: nothing under it sleeps.
        let mut b = Bound::new(qp.clone(), QpId(0), qp.attributes().access)?;
        // A slot in case every one is taken (about 15 KiB, freed if not needed).
        let spare = KBox::init(QpSlot::init(), GFP_KERNEL_ACCOUNT)?;
        let mut st = self.state.lock();
        if st.dead {
            return Err(ENOTCONN);
        }
        // Closed since the engine found it: the engine opens a new one.
        if self.is_closed() || st.conn.state() != CoreState::Open {
            return Err(ECONNRESET);
        }
        let id = match st.conn.open_qp_psn(qp.qpn(), dest_qpn, sq_psn, rq_psn) {
            Err(PostError::TooManyQps) if st.conn.qps().len() < MAX_QPS_PER_CONN => {
                st.qps.push(None, GFP_ATOMIC)?;
                if let Err(e) = st.conn.qps_mut().push(spare) {
                    st.qps.pop();
                    return Err(e);
                }
                st.conn.open_qp_psn(qp.qpn(), dest_qpn, sq_psn, rq_psn)
            }
            r => r,
        }
        .map_err(|_| ENOSPC)?;
        b.set_id(id);
        match st.qps.get_mut(id.index()) {
            Some(slot) => *slot = Some(b),
            None => {
                st.conn.close_qp(id);
                return Err(EINVAL);
            }
        }
        self.drive(dev, &mut st);
        Ok(id)
    }

    /// The QP entered RTS: its retry counts and ACK timeout are known now (its own
    /// `rnr_retry` and `retry_cnt`; the last QP to enter RTS sets the connection's
    /// retransmission timer), and from RTR its send PSN. From SQD (with limits the
    /// user may have changed there) or RTS, its streams go on where they are.
    pub(crate) fn ready_to_send(
        self: &Arc<Self>,
        dev: &Device<MetaRoceDriver>,
        id: QpId,
        from_rtr: bool,
    ) {
        let mut st = self.state.lock();
        let attrs = match st.qps.get(id.index()).and_then(Option::as_ref) {
            Some(b) => b.qp().attributes(),
            None => return,
        };
        let access = attrs.access;
        if from_rtr {
            let _ = st.conn.set_sq_psn(id, attrs.sq_psn);
        }
        let _ = st.conn.set_rnr_retry(id, attrs.rnr_retry);
        let _ = st.conn.set_retry_limit(id, attrs.retry_cnt);
        // A QP allowed no READ or atomic at all gets one at a time: its READs wait for
        // each other rather than never going out (rdma_rxe stalls such a QP).
        let _ = st.conn.set_max_rd_atomic(id, attrs.max_rd_atomic.max(1));
        let (limit, initial, min) = retransmission(&attrs);
        st.conn.set_retransmission(limit.max(1), initial, min);
        if let Some(b) = st.qps.get_mut(id.index()).and_then(Option::as_mut) {
            b.ready_to_send(access);
        }
        self.drive(dev, &mut st);
    }

    /// The QP entered SQD from RTS: it hands the core no new send WQE
    /// ([`Bound::sync_send`] waits for RTS), and says when those it handed over have
    /// completed ([`Bound::check_drained`]).
    pub(crate) fn drain_sq(self: &Arc<Self>, dev: &Device<MetaRoceDriver>, id: QpId) {
        let mut st = self.state.lock();
        if let Some(b) = st.qps.get_mut(id.index()).and_then(Option::as_mut) {
            b.start_draining();
        }
        self.drive(dev, &mut st);
    }

    /// The user moved the QP to the error state: flush everything, in order.
    pub(crate) fn fail_qp(self: &Arc<Self>, dev: &Device<MetaRoceDriver>, id: QpId) {
        let mut st = self.state.lock();
        let Serialized { conn, qps, .. } = &mut *st;
        if let Some(b) = qps.get_mut(id.index()).and_then(Option::as_mut) {
            b.fail(conn);
        }
        self.drive(dev, &mut st);
    }

    /// Unbinds the QP at once (RESET or destroy): no completions, no further access to
    /// its rings. Returns the number of QPs still bound.
    pub(crate) fn unbind(&self, id: QpId) -> usize {
        let mut st = self.state.lock();
        st.conn.close_qp(id);
        let b = st.qps.get_mut(id.index()).and_then(Option::take);
        let left = st.qps.iter().filter(|b| b.is_some()).count();
        drop(st);
        // The QP reference goes outside the lock.
        drop(b);
        left
    }

    /// Stops the connection for good: no more timer, and the work item has finished.
    /// The connection must already be unreachable (out of its device's table, no QP
    /// bound). Process context, never from the work item.
    pub(crate) fn shutdown(self: &Arc<Self>) {
        {
            let mut inbox = self.inbox.lock();
            self.shut.store(true, Relaxed);
            inbox.clear();
        }
        let (timer, qps) = {
            let mut st = self.state.lock();
            st.dead = true;
            (st.timer.take(), core::mem::take(&mut st.qps))
        };
        // Cancels the timer and waits for a running callback.
        drop(timer);
        drop(qps);
        rdma::work::flush(&self.work);
        self.inbox.lock().clear();
    }

    /// Runs the connection: received datagrams, timers, completions, new work
    /// requests, then transmissions, and arms the timer.
    fn drive(self: &Arc<Self>, dev: &Device<MetaRoceDriver>, st: &mut Serialized) {
        if st.dead {
            self.inbox.lock().clear();
            return;
        }
        self.counters.runs.fetch_add(1, Relaxed);
        let now = self.tick(st);
        {
            let mut inbox = self.inbox.lock();
            core::mem::swap(&mut *inbox, &mut st.rx);
        }
        let Serialized { conn, qps, rx, .. } = st;
        if self.rung.load(Relaxed) && self.rung.xchg(false, Relaxed) {
            for b in qps.iter_mut().flatten() {
                b.mark_send_pending();
            }
        }
        let received = rx.len();
        let snapshot = trace::RunSnapshot::take(conn);
        let id = conn.config().local_conn_id;
        for d in rx.iter() {
            let ce = d.info().ecn == Ecn::Ce;
            let paged = u32::try_from(d.paged_len()).unwrap_or(u32::MAX);
            let mut mem = QpMemory {
                dev,
                qps,
                rx: Some(d.rest()),
            };
            let r = conn.handle_datagram_split(now, ce, d.payload(), paged, &mut mem);
            if let Some(p) = trace::packet(id, d.payload(), d.payload().len() + d.paged_len()) {
                rdma::trace::packet_rx(&p, ce, trace::verdict(&r));
            }
        }
        rx.clear();
        if conn.poll_timeout().is_some_and(|t| t <= now) {
            conn.handle_timeout(now);
        }
        self.watch_peer(dev, now, st);
        self.share_rate(dev, st);
        let Serialized {
            conn,
            qps,
            buf,
            routes,
            ..
        } = st;
        // Completions first: the core frees a send slot only when it hands out the
        // work request's completion, so new WQEs taken before that would find a core
        // that the ACKs just emptied still full, and wait for a run that nothing
        // schedules (no ACK or timer is due once all is acknowledged).
        self.drain_events(dev, conn, qps);
        for b in qps.iter_mut().flatten() {
            b.sync_send(dev, conn);
        }
        self.drain_events(dev, conn, qps);
        let sent = self.transmit(dev, &self.ndev, now, conn, qps, buf, routes);
        self.in_stream
            .store(received + sent >= STREAM_BATCH, Relaxed);
        self.drain_events(dev, conn, qps);
        for b in qps.iter_mut().flatten() {
            b.flush_rest();
            b.check_drained();
        }
        if let Some(s) = snapshot {
            s.report(conn);
        }
        let linger = self.watch_linger(dev, st);
        self.arm(st, now, linger);
    }

    /// Notes whether the peer delivered data, and sets the rate hint of the ACKs to
    /// send: the device's fair share (spec [MR-CC-12]; [`crate::rate_hint`]).
    fn share_rate(&self, dev: &Device<MetaRoceDriver>, st: &mut Serialized) {
        let placed = st.conn.stats().rx_bytes;
        if placed != st.placed {
            st.placed = placed;
            self.data_at.store(rdma::clock::local_ns(), Relaxed);
        }
        let hint = dev.data().net().engine().rate_hint();
        st.conn.set_rate_hint(hint);
    }

    /// When a run last placed data of the peer ([`rdma::clock::local_ns`]; 0 never).
    pub(crate) fn data_at(&self) -> u64 {
        self.data_at.load(Relaxed)
    }

    fn drain_events(
        &self,
        dev: &Device<MetaRoceDriver>,
        conn: &mut Conn,
        qps: &mut [Option<Bound>],
    ) {
        let id = conn.config().local_conn_id;
        while let Some(ev) = conn.poll_event() {
            match ev {
                Event::Completion(c) => {
                    if let Some(b) = qps.get_mut(c.qp.index()).and_then(Option::as_mut) {
                        b.complete(&c);
                    }
                }
                Event::QpError { qp, status } => {
                    if let Some(b) = qps.get_mut(qp.index()).and_then(Option::as_mut) {
                        rdma::trace::qp_error(
                            id,
                            b.qp().qpn(),
                            crate::convert::wc_status(status) as u32,
                        );
                        b.core_failed();
                    }
                }
                Event::FirstRequest { qp } => {
                    if let Some(b) = qps.get_mut(qp.index()).and_then(Option::as_mut) {
                        b.request_arrived();
                    }
                }
                Event::ResponderError { qp, error } => {
                    if let Some(b) = qps.get(qp.index()).and_then(Option::as_ref) {
                        b.qp().data().counters.count_refused();
                        b.qp().raise_event(match error {
                            ResponderError::Access => QpEvent::AccessErr,
                            ResponderError::InvalidRequest => QpEvent::ReqErr,
                        });
                    }
                }
                // The core flushed every QP (their errors come with the next
                // transmission); the device forgets the connection.
                Event::Closed { .. } => {
                    if !self.closed.xchg(true, Relaxed) {
                        dev.data()
                            .net()
                            .engine()
                            .stats
                            .conns_peer_closed
                            .fetch_add(1, Relaxed);
                    }
                }
                Event::PathRetired { path, new_port } => {
                    let retired = conn.path_stats(usize::from(path)).map_or(0, |p| p.retired);
                    rdma::trace::path_retired(id, path, new_port, retired);
                }
            }
        }
    }

    /// Arms the timer for the core's next deadline, the peer probe's, or the linger's
    /// end (`linger`, [`Self::watch_linger`]). A pending timer that expires no later
    /// than that is left alone: it fires early, the run finds nothing due and arms the
    /// timer again. The retransmission deadline moves forward with every ACK, so this
    /// spares a cancel and a restart (a clock event reprogramming) on nearly every run.
    fn arm(self: &Arc<Self>, st: &mut Serialized, now: CoreInstant, linger: Option<CoreInstant>) {
        // A closed connection keeps its QPs (in error) until they go, and nothing else.
        if st.conn.state() == CoreState::Closed {
            drop(st.timer.take());
            st.armed = None;
            return;
        }
        let probe = st.probe.map(|p| p.next_at);
        let next = [st.conn.poll_timeout(), probe, linger]
            .into_iter()
            .flatten()
            .min();
        let Some(next) = next else {
            return;
        };
        if st.timer.is_some() && st.armed.is_some_and(|a| a > now && a <= next) {
            return;
        }
        // Cancel the old one first: starting restarts the same timer, and dropping an
        // old handle afterwards would cancel the new expiry.
        drop(st.timer.take());
        st.armed = Some(next);
        // A deadline already due gets a short delay rather than a busy loop.
        let delta = next
            .as_nanos()
            .saturating_sub(now.as_nanos())
            .max(MIN_TIMER_NS);
        let delta = Delta::from_nanos(delta.min(i64::MAX as u64) as i64);
        st.timer = Some(self.clone().start(delta));
    }
}
