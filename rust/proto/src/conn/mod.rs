// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! A connection: one per peer pair, carrying many QPs over many paths under
//! one congestion controller.
//!
//! The connection is a sans-I/O state machine. See the crate documentation for
//! the calling contract; every method is O(paths + QPs) or better except where
//! noted, allocates nothing and never panics.

mod ack;
mod config;
mod events;
mod path_health;
mod qp;
mod rx;
mod store;
#[cfg(test)]
mod tests;
mod tx;
mod undo;

pub use config::{
    rto_from_local_ack_timeout, Config, DEFAULT_PACING_GAIN, MAX_PACING_GAIN, MAX_PATH_BURST,
};
pub use rx::RxDrop;
pub use store::{QpArray, QpSlot, QpStore};
pub use tx::{Payload, Transmit};

use crate::cc::{Aimd, CongestionControl, Signal};

use crate::constants::{
    MAX_MSG_LEN, MAX_PATHS, MAX_PENDING_EVENTS, MAX_PENDING_NAKS, MAX_RECV_WR, MAX_SEND_WR,
};
use crate::event::{Event, WcStatus};
use crate::path::{PathStats, TxPath};
pub(crate) use crate::qp_id::QpId;
use crate::rng::Rng;
use crate::sack::SackWindow;
use crate::timer::{earliest, Instant};
use crate::wire::Nak;
use crate::wr::{Opcode, WorkRequest};
use pin_init::{init, init_array_from_fn, Init};
use qp::{Qp, QpState, RecvWqe, SendWr};
use store::QpStoreExt;

/// The QPs a delivery pass must visit. A datagram concerns one QP (a data
/// packet) or a few (an ACK freeing response slots), so one index is kept and
/// anything more falls back to visiting every QP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum PendingDelivery {
    #[default]
    None,
    One(usize),
    Many,
}

impl PendingDelivery {
    fn add(&mut self, qi: usize) {
        *self = match *self {
            Self::None => Self::One(qi),
            Self::One(j) if j == qi => Self::One(qi),
            _ => Self::Many,
        };
    }
}

/// Connection lifecycle.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ConnState {
    /// Running (possibly still waiting to learn the peer's connection id).
    #[default]
    Open,
    /// Local close requested; a CLOSE packet is pending.
    Closing,
    /// Closed locally or by the peer.
    Closed,
}

/// Why a post or setup call was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PostError {
    /// No such QP, or it is not bound.
    InvalidQp,
    /// No free QP slot.
    TooManyQps,
    /// The queue is full.
    QueueFull,
    /// The QP is in the error state.
    QpError,
    /// Malformed request (length, alignment).
    Invalid,
    /// The connection is closed.
    Closed,
}

/// Connection counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Datagrams received.
    pub rx_packets: u64,
    /// Datagrams dropped as malformed, misaddressed or out of window.
    pub rx_dropped: u64,
    /// Of those, data packets whose PSN lay outside the path's window, ACKs
    /// that report PSNs this side never sent, and `PATH_FLOOR`s too far ahead
    /// ([`RxDrop::OutOfWindow`](crate::RxDrop::OutOfWindow)).
    pub rx_out_of_window: u64,
    /// Of those, data packets for no bound QP or a QP in error
    /// ([`RxDrop::NoQp`](crate::RxDrop::NoQp)).
    pub rx_no_qp: u64,
    /// Of those, datagrams whose connection ids do not match
    /// ([`RxDrop::WrongConnection`](crate::RxDrop::WrongConnection)), among them
    /// every one with `dst_conn` 0 once the peer has shown that it knows ours.
    pub rx_wrong_conn: u64,
    /// Data packets whose segment was already received (still acknowledged).
    pub rx_duplicates: u64,
    /// Of those, request segments for a closed QP that had received them
    /// ([MR-QP-8]): a retransmission its peer sent after the last ACK was lost.
    pub rx_closed_qp_acked: u64,
    /// Data packets refused with a NAK.
    pub rx_naked: u64,
    /// Payload bytes placed (first copies only).
    pub rx_bytes: u64,
    /// Data packets sent.
    pub tx_data: u64,
    /// Retransmitted data packets.
    pub tx_retransmits: u64,
    /// ACK packets sent.
    pub tx_acks: u64,
    /// NAK packets sent.
    pub tx_naks: u64,
    /// Payload bytes sent (including retransmissions).
    pub tx_bytes: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Of those, found spurious ([MR-RTX-12]).
    pub spurious_timeouts: u64,
    /// Probe timeouts that declared packets lost ([MR-RTX-15]).
    pub probes: u64,
    /// Events dropped because the event queue was full.
    pub events_dropped: u64,
    /// NAKs not sent because the NAK queue was full.
    pub naks_dropped: u64,
    /// PATH_FLOOR control packets sent.
    pub tx_floors: u64,
}

/// Receiver-side state of one of the peer's paths.
#[derive(Clone, Debug, Default)]
pub(crate) struct RxPath {
    pub(crate) window: SackWindow,
    pub(crate) ce_count: u16,
    /// Duplicate data packets received, mod 2^8.
    pub(crate) dup_count: u8,
    /// ACKs that should still carry this path's block.
    pub(crate) report: u8,
}

/// Initial PSN of `path` for packets sent by connection `conn_id`: both sides
/// derive it, and an off-path attacker must know the connection id.
//= Documentation/metaroce/spec.rst#initial-psn
pub(crate) fn initial_psn(conn_id: u32, path: usize) -> u32 {
    let mut x = (u64::from(conn_id) << 8 | path as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (x ^ (x >> 31)) as u32
}

/// First sequence number of a QP stream: `k` = 0 for the MSN, 1 for the
/// request-stream SSN, 2 for the response-stream SSN of the direction whose
/// verbs PSN is `psn` (the requester's `sq_psn`, the responder's `rq_psn`).
//= Documentation/metaroce/spec.rst#streams
pub fn stream_start(psn: u32, k: usize) -> u32 {
    initial_psn(psn, k)
}

/// Packets needed for `len` bytes at `mtu` bytes each (at least one).
pub(crate) fn segments(len: u32, mtu: u32) -> u32 {
    let mtu = mtu.max(1);
    (len / mtu)
        .wrapping_add(u32::from(!len.is_multiple_of(mtu)))
        .max(1)
}

/// One MetaRoCE connection (see the crate documentation).
///
/// A connection is large (about 330 KiB: per-path in-flight rings and per-QP
/// queues), far more than a kernel stack. Build it in place with
/// [`Connection::init`] / [`Connection::init_aimd`], which return a `pin_init`
/// initializer that writes every field straight into its final memory without
/// any large temporary; for example, in the kernel,
/// `KBox::init(Connection::init_aimd(cfg, now, seed), GFP_KERNEL)?`.
/// [`Connection::reset`] re-initializes one in place. There is no by-value
/// constructor: host code boxes the same initializer (`Box::init`).
#[derive(Clone, Debug)]
pub struct Connection<C: CongestionControl = Aimd, S: QpStore = QpArray> {
    cfg: Config,
    state: ConnState,
    peer_conn: u32,
    /// A packet from the peer carried our id in `dst_conn`: packets with
    /// `dst_conn` 0 are refused from then on.
    peer_knows_us: bool,
    rng: Rng,
    cc: C,
    paths: [TxPath; MAX_PATHS],
    rx_paths: [RxPath; MAX_PATHS],
    qps: S,
    /// Round-robin cursors.
    next_path: usize,
    /// Data packets sent on `next_path` in a row (at most `path_burst`).
    path_run: u32,
    next_qp: usize,
    ack_path: usize,
    // Acknowledgement generation.
    ack_pending: u32,
    ack_now: bool,
    ack_deadline: Option<Instant>,
    /// When the newest data packet the next ACK reports was recorded (the ACK's
    /// `ack_delay` counts from there).
    last_recorded: Option<Instant>,
    local_hint_bps: u64,
    // Peer feedback and pacing.
    peer_hint_bps: u64,
    conn_rtt: crate::path::RttEstimator,
    next_send_at: Instant,
    /// The pacing interval of the last packet sent: how far behind the pacing
    /// clock a late run may be and keep its schedule.
    pace_interval_ns: u64,
    /// `poll_transmit` held data back for pacing.
    paced: bool,
    consecutive_rto: u32,
    /// When the run counted in `consecutive_rto` began.
    rto_run_since: Instant,
    /// Loss detections so far: a path timeout or an ACK block that declared
    /// packets lost ([`Qp::request_lost`](qp::Qp::request_lost) counts each once).
    loss_detections: u32,
    /// Path timeouts that duplicates may yet prove spurious.
    undo: undo::TimeoutUndo,
    /// The source port of the last path retired as dead, tried again later
    /// ([MR-PATH-13]).
    dead_port: path_health::DeadPort,
    /// The (QP, SSN) whose packet last got a probe deadline for blocking its
    /// stream ([MR-RTX-16]): each blocking segment is looked for once.
    block_probed: Option<(u16, u32)>,
    /// Health epochs judged since the last rebalancing ([MR-PATH-14]).
    judged: u32,
    rnr_wakeup: Option<Instant>,
    naks: [Option<Nak>; MAX_PENDING_NAKS],
    /// QPs whose in-order delivery may progress since the last delivery pass.
    deliver: PendingDelivery,
    close_pending: Option<u32>,
    /// A QP may have a first request of the peer to report
    /// ([`Event::FirstRequest`]); false once a scan found none.
    first_requests: bool,
    events: [Option<Event>; MAX_PENDING_EVENTS],
    ev_head: usize,
    ev_len: usize,
    stats: Stats,
}

impl Connection<Aimd, QpArray> {
    /// In-place initializer of a connection with the default AIMD controller
    /// (configured from `config.aimd`): see [`Connection::init`].
    pub fn init_aimd(config: Config, now: Instant, seed: u64) -> impl Init<Self> {
        let cfg = config.sanitized();
        Self::init(cfg, Aimd::init(cfg.aimd), now, seed)
    }
}

impl Connection<Aimd, QpArray> {
    /// In-place initializer of a connection with the default AIMD controller
    /// and the QP store `qps` (an initializer of any [`QpStore`]; see
    /// [`Connection::init_with`]).
    pub fn init_aimd_with<S: QpStore>(
        config: Config,
        qps: impl Init<S>,
        now: Instant,
        seed: u64,
    ) -> impl Init<Connection<Aimd, S>> {
        let cfg = config.sanitized();
        Connection::init_with(cfg, Aimd::init(cfg.aimd), qps, now, seed)
    }
}

impl<C: CongestionControl> Connection<C, QpArray> {
    /// In-place initializer of a connection with a caller-chosen congestion
    /// controller (`cc` is a `C` by value or an initializer of one) and the
    /// default QP store ([`QpArray`]). `seed` drives source-port choice; `now`
    /// is the caller's current time. Nothing larger than one small element is
    /// built on the stack: the paths, QPs and their rings are written in place,
    /// element by element. Infallible.
    ///
    /// Run it with any `pin_init` slot: `KBox::init(.., GFP_KERNEL)` in the
    /// kernel, `Box::init(..)` (`pin_init::InPlaceInit`) on a host.
    pub fn init(config: Config, cc: impl Init<C>, now: Instant, seed: u64) -> impl Init<Self> {
        Self::init_with(
            config,
            cc,
            init_array_from_fn(|_| QpSlot::init()),
            now,
            seed,
        )
    }
}

impl<C: CongestionControl, S: QpStore> Connection<C, S> {
    /// In-place initializer of a connection with the QP store `qps` (an
    /// initializer of any [`QpStore`], e.g. an empty growable one): see
    /// [`Connection::init`].
    pub fn init_with(
        config: Config,
        cc: impl Init<C>,
        qps: impl Init<S>,
        now: Instant,
        seed: u64,
    ) -> impl Init<Self> {
        let cfg = config.sanitized();
        init!(Connection {
            cfg,
            state: ConnState::Open,
            peer_conn: 0,
            peer_knows_us: false,
            rng: Rng::new(seed),
            cc <- cc,
            paths <- init_array_from_fn(|_| TxPath::init(0, 0)),
            rx_paths <- init_array_from_fn(|_| RxPath::default()),
            qps <- qps,
            next_path: 0,
            path_run: 0,
            next_qp: 0,
            ack_path: 0,
            ack_pending: 0,
            ack_now: false,
            ack_deadline: None,
            last_recorded: None,
            local_hint_bps: 0,
            peer_hint_bps: 0,
            conn_rtt: Default::default(),
            next_send_at: now,
            pace_interval_ns: 0,
            paced: false,
            consecutive_rto: 0,
            rto_run_since: Instant::ZERO,
            loss_detections: 0,
            undo: Default::default(),
            dead_port: Default::default(),
            block_probed: None,
            judged: 0,
            rnr_wakeup: None,
            naks <- init_array_from_fn(|_| None),
            deliver: PendingDelivery::None,
            close_pending: None,
            first_requests: false,
            events <- init_array_from_fn(|_| None),
            ev_head: 0,
            ev_len: 0,
            stats: Stats::default(),
        })
        .chain(move |c| {
            c.setup(seed);
            Ok(())
        })
    }

    /// Re-initializes this connection in place, as [`Connection::init`] would
    /// (field by field: no large temporary).
    pub fn reset(&mut self, config: Config, cc: C, now: Instant, seed: u64) {
        self.cfg = config.sanitized();
        self.cc = cc;
        self.state = ConnState::Open;
        self.peer_conn = 0;
        self.peer_knows_us = false;
        self.rng = Rng::new(seed);
        for p in self.paths.iter_mut() {
            p.reset(0, 0, self.cfg.reorder_threshold);
        }
        for p in self.rx_paths.iter_mut() {
            *p = RxPath::default();
        }
        for i in 0..self.qps.len() {
            if let Some(q) = self.qps.qp_mut(i) {
                q.reset();
            }
        }
        self.next_path = 0;
        self.path_run = 0;
        self.next_qp = 0;
        self.ack_path = 0;
        self.ack_pending = 0;
        self.ack_now = false;
        self.ack_deadline = None;
        self.last_recorded = None;
        self.local_hint_bps = 0;
        self.peer_hint_bps = 0;
        self.conn_rtt = Default::default();
        self.next_send_at = now;
        self.pace_interval_ns = 0;
        self.paced = false;
        self.consecutive_rto = 0;
        self.rto_run_since = Instant::ZERO;
        self.loss_detections = 0;
        self.undo = Default::default();
        self.dead_port = Default::default();
        self.block_probed = None;
        self.judged = 0;
        self.rnr_wakeup = None;
        self.naks.iter_mut().for_each(|n| *n = None);
        self.deliver = PendingDelivery::None;
        self.close_pending = None;
        self.first_requests = false;
        self.events.iter_mut().for_each(|e| *e = None);
        self.ev_head = 0;
        self.ev_len = 0;
        self.stats = Stats::default();
        self.setup(seed);
    }

    /// Second stage of construction, on the blank connection: paths get their
    /// ports and first PSNs, the rate hint and a configured peer take effect.
    fn setup(&mut self, seed: u64) {
        self.rng = Rng::new(seed);
        self.local_hint_bps = self.cfg.rate_hint_bps;
        let local = self.cfg.local_conn_id;
        for i in 0..self.paths.len() {
            let port = self.fresh_port();
            if let Some(p) = self.paths.get_mut(i) {
                p.reset(port, initial_psn(local, i), self.cfg.reorder_threshold);
            }
        }
        if self.cfg.peer_conn_id != 0 {
            self.learn_peer(self.cfg.peer_conn_id);
        }
    }

    /// A source port not used by any path.
    fn fresh_port(&mut self) -> u16 {
        loop {
            let p = crate::path::port_from(self.rng.next_u32());
            if !self.paths.iter().any(|x| x.sport == p) {
                return p;
            }
        }
    }

    fn learn_peer(&mut self, peer: u32) {
        self.peer_conn = peer;
        for (i, p) in (0..MAX_PATHS).zip(self.rx_paths.iter_mut()) {
            *p = RxPath {
                window: SackWindow::new(initial_psn(peer, i)),
                ..Default::default()
            };
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Lifecycle state.
    pub fn state(&self) -> ConnState {
        self.state
    }

    /// The peer's connection id (0 until known).
    pub fn peer_conn_id(&self) -> u32 {
        self.peer_conn
    }

    /// Counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Counters of `path`.
    pub fn path_stats(&self, path: usize) -> Option<PathStats> {
        self.paths.get(path).map(|p| p.stats)
    }

    /// A snapshot of `path`: port, state, window, RTT, bytes in flight, counters.
    pub fn path_view(&self, path: usize) -> Option<crate::path::PathView> {
        let p = self.paths.get(path)?;
        Some(crate::path::PathView::of(p, self.cc.path_window(path)))
    }

    /// Current UDP source port of `path`.
    pub fn path_port(&self, path: usize) -> Option<u16> {
        self.paths.get(path).map(|p| p.sport)
    }

    /// Smoothed RTT of `path` in ns (0 before the first sample).
    pub fn path_srtt(&self, path: usize) -> Option<u64> {
        self.paths.get(path).map(|p| p.rtt.srtt_or(0))
    }

    /// A one-line summary of internal state, for debugging (tests, the driver's
    /// debugfs).
    #[doc(hidden)]
    pub fn debug_state(&self) -> impl core::fmt::Display + '_ {
        DebugState(self)
    }

    /// Congestion controller.
    pub fn cc(&self) -> &C {
        &self.cc
    }

    /// Bytes in flight over all paths.
    pub fn bytes_in_flight(&self) -> u64 {
        self.paths.iter().fold(0u64, |a, p| {
            a.saturating_add(u64::from(p.inflight.bytes_in_flight))
        })
    }

    /// Sets the fair-share rate (bytes/s, 0 = none) advertised in every ACK.
    pub fn set_rate_hint(&mut self, bps: u64) {
        self.local_hint_bps = bps;
    }

    /// Whether a packet from the peer has shown that it knows our connection id: from
    /// then on a packet with `dst_conn` 0 is refused ([MR-CONN-13]), and a driver may
    /// drop it before it queues it.
    pub fn peer_knows_us(&self) -> bool {
        self.peer_knows_us
    }

    /// The rate hint this side advertises in its ACKs, bytes/s (0 = none).
    pub fn rate_hint(&self) -> u64 {
        self.local_hint_bps
    }

    /// The peer's last rate hint for us, bytes/s (0 = none).
    pub fn peer_rate_hint(&self) -> u64 {
        self.peer_hint_bps
    }

    /// Binds a QP with stream numbers derived from PSN 0 on both sides; see
    /// [`open_qp_psn`](Self::open_qp_psn), which a verbs driver should use.
    pub fn open_qp(&mut self, local_qpn: u32, remote_qpn: u32) -> Result<QpId, PostError> {
        self.open_qp_psn(local_qpn, remote_qpn, 0, 0)
    }

    /// Binds a QP (at RTR): `local_qpn` receives, packets go to the peer's
    /// `remote_qpn`. `sq_psn` and `rq_psn` are the verbs QP attributes: the
    /// initial PSN this QP sends with and the one it expects from the peer,
    /// which the applications exchange (the peer's `sq_psn` is our `rq_psn`).
    /// The first MSN and SSN of each stream derive from them
    /// ([`stream_start`]), so packets of an earlier binding of the same QPN
    /// are not mistaken for new data.
    //= Documentation/metaroce/spec.rst#streams
    pub fn open_qp_psn(
        &mut self,
        local_qpn: u32,
        remote_qpn: u32,
        sq_psn: u32,
        rq_psn: u32,
    ) -> Result<QpId, PostError> {
        if self.state != ConnState::Open {
            return Err(PostError::Closed);
        }
        if self.qp_by_qpn(local_qpn).is_some() {
            return Err(PostError::Invalid);
        }
        // The closed QP of this number gives way to the new binding; a closed one's
        // slot is taken only when no slot is free ([MR-QP-8]).
        let slots = 0..self.qps.len().min(usize::from(u16::MAX));
        let find = |f: &dyn Fn(&Qp) -> bool| slots.clone().find(|&i| self.qps.qp(i).is_some_and(f));
        let i = find(&|q| q.state == QpState::Closed && q.local_qpn == local_qpn)
            .or_else(|| find(&|q| q.state == QpState::Free))
            .or_else(|| find(&|q| q.state == QpState::Closed))
            .ok_or(PostError::TooManyQps)?;
        let q = self.qps.qp_mut(i).ok_or(PostError::TooManyQps)?;
        let (msn, ssn, rssn) = (
            stream_start(sq_psn, 0),
            stream_start(sq_psn, 1),
            stream_start(sq_psn, 2),
        );
        let (peer_msn, peer_ssn, peer_rssn) = (
            stream_start(rq_psn, 0),
            stream_start(rq_psn, 1),
            stream_start(rq_psn, 2),
        );
        // In place: a QP is about 20 KiB.
        q.reset();
        q.state = QpState::Active;
        q.local_qpn = local_qpn;
        q.remote_qpn = remote_qpn;
        q.sq_head = msn;
        q.next_msn = msn;
        q.send_msn = msn;
        q.next_ssn = ssn;
        q.req_acked.reset(ssn);
        q.resp_rx.reset(rssn);
        q.req_rx.reset(peer_ssn);
        q.deliver_msn = peer_msn;
        q.next_resp_ssn = peer_rssn;
        q.resp_acked.reset(peer_rssn);
        q.rnr_retry = self.cfg.rnr_retry;
        q.retry_limit = self.cfg.retry_limit;
        Ok(QpId(i as u16))
    }

    /// Changes the retransmission settings (verbs `retry_cnt` and the local ACK
    /// timeout arrive at RTS, after the connection exists): `retry_limit` is the
    /// connection's own and new QPs' ([`set_retry_limit`](Self::set_retry_limit)
    /// sets a bound QP's); out-of-range values are clamped as
    /// [`Config::sanitized`] does.
    pub fn set_retransmission(&mut self, retry_limit: u8, rto_initial_ns: u64, rto_min_ns: u64) {
        self.cfg.retry_limit = retry_limit;
        self.cfg.rto_initial_ns = rto_initial_ns;
        self.cfg.rto_min_ns = rto_min_ns.max(1_000);
        self.cfg.rto_max_ns = self.cfg.rto_max_floor();
    }

    /// Sets how often a QP's requests may be found lost in a row before the QP
    /// fails with `RetryExcErr` (verbs `retry_cnt`, which QPs sharing a
    /// connection may set differently; [MR-RTX-13]). 0 counts as 1.
    pub fn set_retry_limit(&mut self, qp: QpId, retry_limit: u8) -> Result<(), PostError> {
        self.active_qp(qp)?.retry_limit = retry_limit.max(1);
        Ok(())
    }

    /// Sets the RNR retries of a QP's work requests (verbs `rnr_retry`; 7 is
    /// unlimited), which QPs sharing a connection may set differently.
    pub fn set_rnr_retry(&mut self, qp: QpId, rnr_retry: u8) -> Result<(), PostError> {
        self.active_qp(qp)?.rnr_retry = rnr_retry.min(7);
        Ok(())
    }

    /// Sets how many READ and ATOMIC requests of a QP may be outstanding at once
    /// (verbs `max_rd_atomic`; 0 = no limit, the default). A request beyond the
    /// limit waits, and the QP's later work requests with it, until the response
    /// to an earlier one is complete.
    //= Documentation/metaroce/spec.rst#read-and-atomic-limits
    pub fn set_max_rd_atomic(&mut self, qp: QpId, max_rd_atomic: u8) -> Result<(), PostError> {
        self.active_qp(qp)?.rd_atomic_limit = max_rd_atomic;
        Ok(())
    }

    /// Sets the send PSN of a QP bound at RTR before verbs knew it: the `sq_psn`
    /// attribute arrives with the RTR-to-RTS transition. Only before the QP has
    /// posted anything (`PostError::Invalid` otherwise); the receive side keeps
    /// what it has already accepted.
    //= Documentation/metaroce/spec.rst#streams
    pub fn set_sq_psn(&mut self, qp: QpId, sq_psn: u32) -> Result<(), PostError> {
        let q = self.active_qp(qp)?;
        if q.next_msn != q.sq_head || q.next_msn != q.send_msn || q.next_rsn != 0 {
            return Err(PostError::Invalid);
        }
        let (msn, ssn, rssn) = (
            stream_start(sq_psn, 0),
            stream_start(sq_psn, 1),
            stream_start(sq_psn, 2),
        );
        q.sq_head = msn;
        q.next_msn = msn;
        q.send_msn = msn;
        q.next_ssn = ssn;
        q.req_acked.reset(ssn);
        q.resp_rx.reset(rssn);
        Ok(())
    }

    /// Unbinds a QP at once; its outstanding work is forgotten without completions.
    /// If it received requests, its slot keeps their record until reused, to
    /// acknowledge the peer's retransmissions of them ([MR-QP-8]).
    pub fn close_qp(&mut self, qp: QpId) {
        if let Some(q) = self.qps.qp_mut(qp.index()) {
            q.close();
        }
    }

    /// Whether a closed QP still acknowledges retransmissions of the requests it
    /// received ([MR-QP-8]): a connection left with no bound QP SHOULD then linger
    /// before it is freed ([MR-CONN-16]).
    //= Documentation/metaroce/spec.rst#linger
    pub fn has_closed_qps(&self) -> bool {
        (0..self.qps.len()).any(|i| self.qps.qp(i).is_some_and(|q| q.state == QpState::Closed))
    }

    /// Moves a QP to the error state (verbs `modify_qp(IBV_QPS_ERR)`): every
    /// outstanding send work request that is not already complete and every
    /// posted receive completes with `WrFlushErr`, in order, through
    /// [`poll_event`](Self::poll_event). The QP sends no new requests, drops
    /// incoming requests, and still acknowledges responses so that the peer's
    /// response slots free. No [`Event::QpError`] is reported for it (the
    /// driver asked for it); unbind it later with [`close_qp`](Self::close_qp).
    //= Documentation/metaroce/spec.rst#completion-ordering
    pub fn qp_to_error(&mut self, qp: QpId) -> Result<(), PostError> {
        let q = self.active_qp(qp)?;
        if q.error.is_none() {
            q.error_reported = true;
        }
        q.fail(WcStatus::WrFlushErr);
        Ok(())
    }

    /// The QP store: every slot, bound or free.
    pub fn qps(&self) -> &S {
        &self.qps
    }

    /// The QP store, to add slots when [`open_qp_psn`](Self::open_qp_psn) finds none
    /// free (`PostError::TooManyQps`). Slots must never be removed or reordered: a
    /// slot's index is the id of the QP bound to it.
    pub fn qps_mut(&mut self) -> &mut S {
        &mut self.qps
    }

    pub(crate) fn qp_by_qpn(&self, qpn: u32) -> Option<usize> {
        (0..self.qps.len()).find(|&i| {
            self.qps
                .qp(i)
                .is_some_and(|q| q.state == QpState::Active && q.local_qpn == qpn)
        })
    }

    fn active_qp(&mut self, qp: QpId) -> Result<&mut Qp, PostError> {
        match self.qps.qp_mut(qp.index()) {
            Some(q) if q.state == QpState::Active => Ok(q),
            _ => Err(PostError::InvalidQp),
        }
    }

    /// Queues a send work request on `qp`.
    ///
    /// [`PostError::QueueFull`] while `qp` holds [`MAX_SEND_WR`] requests: a slot
    /// frees when [`poll_event`](Self::poll_event) hands out its completion.
    pub fn post_send(&mut self, qp: QpId, wr: WorkRequest) -> Result<(), PostError> {
        if self.state != ConnState::Open {
            return Err(PostError::Closed);
        }
        let mtu = self.cfg.mtu;
        let q = self.active_qp(qp)?;
        if q.error.is_some() {
            return Err(PostError::QpError);
        }
        if q.next_msn.wrapping_sub(q.sq_head) as usize >= MAX_SEND_WR {
            return Err(PostError::QueueFull);
        }
        let mut wr = wr;
        if wr.opcode.is_atomic() {
            if wr.remote_addr & 7 != 0 {
                return Err(PostError::Invalid);
            }
            wr.len = crate::constants::ATOMIC_LEN;
        }
        if wr.len > MAX_MSG_LEN {
            return Err(PostError::Invalid);
        }
        let nsegs = match wr.opcode {
            Opcode::Read | Opcode::CompareSwap | Opcode::FetchAdd => 1,
            _ => segments(wr.len, mtu),
        };
        let msn = q.next_msn;
        let rsn = if wr.opcode.consumes_recv() {
            let r = q.next_rsn;
            q.next_rsn = r.wrapping_add(1);
            r
        } else {
            0
        };
        let slot =
            q.sq.get_mut(msn as usize % MAX_SEND_WR)
                .ok_or(PostError::QueueFull)?;
        *slot = SendWr {
            wr,
            msn,
            ssn_first: q.next_ssn,
            nsegs,
            rsn,
            ..Default::default()
        };
        q.next_ssn = q.next_ssn.wrapping_add(nsegs);
        q.next_msn = msn.wrapping_add(1);
        Ok(())
    }

    /// Posts a receive buffer of `len` bytes on `qp`; SENDs consume them in order.
    pub fn post_recv(&mut self, qp: QpId, wr_id: u64, len: u32) -> Result<(), PostError> {
        let q = self.active_qp(qp)?;
        if q.error.is_some() {
            return Err(PostError::QpError);
        }
        if q.rq_tail.wrapping_sub(q.rq_head) as usize >= MAX_RECV_WR {
            return Err(PostError::QueueFull);
        }
        let slot =
            q.rq.get_mut(q.rq_tail as usize % MAX_RECV_WR)
                .ok_or(PostError::QueueFull)?;
        *slot = RecvWqe {
            wr_id,
            len,
            done: None,
        };
        q.rq_tail = q.rq_tail.wrapping_add(1);
        Ok(())
    }

    /// Closes the connection: a CLOSE packet is sent and all QPs are flushed.
    pub fn close(&mut self, reason: u32) {
        if self.state == ConnState::Open {
            self.state = ConnState::Closing;
            self.close_pending = Some(reason);
            self.fail_all(WcStatus::WrFlushErr);
        }
    }

    /// When [`handle_timeout`](Self::handle_timeout) should be called next.
    ///
    /// Call after every other method; `None` means no timer is needed.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut t = if self.ack_pending > 0 {
            self.ack_deadline
        } else {
            None
        };
        for p in self.paths.iter().take(usize::from(self.cfg.paths)) {
            t = earliest(t, p.rto_deadline);
            t = earliest(t, p.probe_deadline);
        }
        t = earliest(t, self.rnr_wakeup);
        if self.paced {
            t = earliest(t, Some(self.next_send_at));
        }
        t
    }

    /// Processes expired timers: ACK delay, retransmission timeouts, RNR waits.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Some(d) = self.ack_deadline {
            if now >= d && self.ack_pending > 0 {
                self.ack_now = true;
            }
        }
        if self.rnr_wakeup.is_some_and(|w| now >= w) {
            // Re-arm for holds of other work requests that end later.
            self.rnr_wakeup = self.next_rnr_wakeup(now);
        }
        for i in 0..usize::from(self.cfg.paths) {
            let expired = self
                .paths
                .get(i)
                .and_then(|p| p.rto_deadline)
                .is_some_and(|d| now >= d);
            if expired {
                self.on_rto(i, now);
                continue;
            }
            let overdue = self
                .paths
                .get(i)
                .and_then(|p| p.probe_deadline)
                .is_some_and(|d| now >= d);
            if overdue {
                self.on_probe_timeout(i, now);
            }
        }
    }

    /// A path's probe timer fired ([MR-RTX-15]): its packets sent at least a probe
    /// timeout ago are lost, as if a SACK had shown it; no backoff, no timeout.
    //= Documentation/metaroce/spec.rst#probe-timeout
    fn on_probe_timeout(&mut self, i: usize, now: Instant) {
        let hold = self.cfg.ack_hold_ns();
        let initial = self.cfg.rto_initial_ns;
        self.loss_detections = self.loss_detections.wrapping_add(1);
        let Some(p) = self.paths.get_mut(i) else {
            return;
        };
        p.probe_deadline = None;
        let Some(pto) = p.probe_timeout(hold, &self.conn_rtt) else {
            return;
        };
        let (mut psn, end) = p.inflight.range();
        let mut lost_bytes = 0u32;
        // Later packets were sent later still: stop at the first not yet overdue.
        while psn != end
            && self
                .paths
                .get(i)
                .and_then(|p| p.inflight.get(psn))
                .is_some_and(|s| now.nanos_since(s.sent_at) >= pto)
        {
            lost_bytes = lost_bytes.saturating_add(self.declare_lost(i, psn, now));
            psn = psn.wrapping_add(1);
        }
        let Some(p) = self.paths.get_mut(i) else {
            return;
        };
        let srtt = p.rtt.srtt_or(initial);
        if lost_bytes > 0 {
            p.stats.probes = p.stats.probes.saturating_add(1);
            p.silent_probes = p.silent_probes.saturating_add(1);
            self.stats.probes = self.stats.probes.saturating_add(1);
            self.cc
                .on_congestion(i, Signal::Loss(lost_bytes), srtt, now);
            // A path that stays silent probe after probe is dead, as after as many
            // timeouts: the probes would otherwise keep its RTO from ever firing.
            if p.silent_probes >= self.cfg.path_retire_rtos {
                self.retire_path(i, true);
            }
        }
        self.rearm_rto(i, now, false);
    }

    /// A path's retransmission timer fired: everything in flight on it is lost.
    //= Documentation/metaroce/spec.rst#rto
    fn on_rto(&mut self, i: usize, now: Instant) {
        let base_rto = self.base_rto(i);
        let Some(p) = self.paths.get_mut(i) else {
            return;
        };
        p.rto_deadline = None;
        let (mut psn, end) = p.inflight.range();
        p.timeout_end = Some(end);
        self.loss_detections = self.loss_detections.wrapping_add(1);
        while psn != end {
            if let Some(s) = p.inflight.mark_lost(psn) {
                self.qps
                    .request_lost(&s, self.loss_detections, now, &self.cfg);
            }
            psn = psn.wrapping_add(1);
        }
        p.consecutive_rto = p.consecutive_rto.saturating_add(1);
        p.backoff = p.backoff.saturating_add(1).min(16);
        p.stats.timeouts = p.stats.timeouts.saturating_add(1);
        let retire = p.consecutive_rto >= self.cfg.path_retire_rtos;
        let srtt = p.rtt.srtt_or(self.cfg.rto_initial_ns);
        // Duplicates of its retransmissions come back within about a round trip,
        // unless the host that delayed the ACKs delays them too.
        let window = base_rto.saturating_mul(2);
        self.undo.on_timeout(i, now, window);
        self.stats.timeouts = self.stats.timeouts.saturating_add(1);
        self.cc.on_congestion(i, Signal::Timeout, srtt, now);
        if retire {
            self.retire_path(i, true);
        }
        if self.consecutive_rto == 0 {
            self.rto_run_since = now;
        }
        self.consecutive_rto = self.consecutive_rto.saturating_add(1);
        // The most patient QP's limit: the others fail by their own ([MR-RTX-13]).
        let limit = (0..self.qps.len())
            .filter_map(|i| self.qps.qp(i))
            .filter(|q| q.state == QpState::Active)
            .fold(self.cfg.retry_limit, |l, q| l.max(q.retry_limit));
        if self
            .cfg
            .retries_exhausted(limit, self.consecutive_rto, self.rto_run_since, now)
        {
            self.fail_all(WcStatus::RetryExcErr);
        }
    }

    /// Path `pi`'s base RTO ([MR-RTX-4]): from its own RTT samples; before its first,
    /// the largest base RTO of the connection's other paths that have samples (a
    /// retired path's new route, [MR-PATH-9]), and `rto_initial` only while no path
    /// has any.
    //= Documentation/metaroce/spec.rst#rto
    pub(crate) fn base_rto(&self, pi: usize) -> u64 {
        if let Some(p) = self.paths.get(pi).filter(|p| p.rtt.has_sample()) {
            return self.cfg.rto_ns(&p.rtt);
        }
        let mut measured: Option<u64> = None;
        for p in self.paths.iter().take(usize::from(self.cfg.paths)) {
            if p.rtt.has_sample() {
                let r = self.cfg.rto_ns(&p.rtt);
                measured = Some(measured.map_or(r, |m| m.max(r)));
            }
        }
        measured.unwrap_or_else(|| self.cfg.rto_ns(&Default::default()))
    }

    /// Retires a path: new source port and fresh RTT, a fresh window if `reset_window`
    /// (a dead path, [MR-CC-8]; not a worse one, [MR-PATH-8]); PSNs continue.
    //= Documentation/metaroce/spec.rst#path-retirement
    pub(crate) fn retire_path(&mut self, i: usize, reset_window: bool) {
        let port = self.fresh_port();
        self.move_path(i, port, reset_window);
    }

    /// Moves path `i` to source port `port` as [`retire_path`](Self::retire_path) does.
    pub(crate) fn move_path(&mut self, i: usize, port: u16, reset_window: bool) {
        if reset_window {
            if let Some(p) = self.paths.get(i) {
                let sent = self.packets_sent();
                self.dead_port.on_dead(p.sport, sent);
            }
        }
        let Some(p) = self.paths.get_mut(i) else {
            return;
        };
        p.sport = port;
        p.rtt = Default::default();
        p.consecutive_rto = 0;
        p.silent_probes = 0;
        p.backoff = 0;
        p.timeout_end = None;
        p.reorder_threshold = self.cfg.reorder_threshold;
        // Re-synchronize the receiver with this path at once (PATH_FLOOR).
        p.floor_sent_at = None;
        p.stats.retired = p.stats.retired.saturating_add(1);
        // A new route: its health is judged afresh ([MR-PATH-8]).
        p.health = crate::path::Health {
            sent: p.stats.sent,
            bad: path_health::bad(&p.stats),
            pace_sent: p.stats.sent,
            ..Default::default()
        };
        if reset_window {
            self.cc.on_path_reset(i);
        }
        self.push_event(Event::PathRetired {
            path: i as u8,
            new_port: port,
        });
    }

    /// Fails every QP that still has work: the oldest outstanding request gets
    /// `status`, the rest are flushed.
    fn fail_all(&mut self, status: WcStatus) {
        for i in 0..self.qps.len() {
            let Some(q) = self.qps.qp_mut(i).filter(|q| q.state == QpState::Active) else {
                continue;
            };
            if !q.fail_oldest(status) && status == WcStatus::WrFlushErr {
                q.fail(status);
            }
        }
    }

    pub(crate) fn push_event(&mut self, e: Event) {
        if self.ev_len >= MAX_PENDING_EVENTS {
            self.stats.events_dropped = self.stats.events_dropped.saturating_add(1);
            return;
        }
        let i = self.ev_head.wrapping_add(self.ev_len) % MAX_PENDING_EVENTS;
        if let Some(s) = self.events.get_mut(i) {
            *s = Some(e);
            self.ev_len = self.ev_len.wrapping_add(1);
        }
    }
}

/// Formats internal state (see [`Connection::debug_state`]).
struct DebugState<'a, C: CongestionControl, S: QpStore>(&'a Connection<C, S>);

impl<C: CongestionControl, S: QpStore> core::fmt::Display for DebugState<'_, C, S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let c = self.0;
        write!(
            f,
            "ack_pending={} ack_now={} ack_deadline={:?} rnr={:?} paced={} next_send_at={:?} \
             sent={} dead_port={} due={:?} shift={}",
            c.ack_pending,
            c.ack_now,
            c.ack_deadline,
            c.rnr_wakeup,
            c.paced,
            c.next_send_at,
            c.packets_sent(),
            c.dead_port.port,
            c.dead_port.due,
            c.dead_port.shift
        )?;
        for (i, p) in (0..usize::from(c.cfg.paths)).zip(c.paths.iter()) {
            let (una, next) = p.inflight.range();
            let rx_base = c.rx_paths.get(i).map_or(0, |r| r.window.base());
            write!(f, " | p{} rto={:?} fl={} lost={} bytes={} cwnd={} psn={}..{} peer_cum={} rto_run={} rx_base={}",
                i, p.rto_deadline, p.inflight.in_flight, p.inflight.lost, p.inflight.bytes_in_flight,
                c.cc.path_window(i), una, next, p.peer_cum, p.consecutive_rto, rx_base)?;
        }
        for (i, q) in (0..c.qps.len())
            .filter_map(|i| Some((i, c.qps.qp(i)?)))
            .filter(|(_, q)| q.state == QpState::Active)
        {
            write!(f, " | q{} head={} send={}/{} next={} req_acked={} resp_rx={} deliver={} req_rx={} resp={}..{} err={:?}",
                i, q.sq_head, q.send_msn, q.send_seg, q.next_msn, q.req_acked.base(), q.resp_rx.base(),
                q.deliver_msn, q.req_rx.base(), q.resp_head, q.resp_tail, q.error)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod size_tests {
    #[test]
    fn sizes() {
        extern crate std;
        std::println!(
            "Connection {} Qp {} TxPath {}",
            core::mem::size_of::<super::Connection>(),
            core::mem::size_of::<super::qp::Qp>(),
            core::mem::size_of::<crate::path::TxPath>()
        );
    }
}
