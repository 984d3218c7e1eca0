// SPDX-License-Identifier: GPL-2.0

//! The port's counters (`rdma statistic show link DEV/1`, `hw_counters/` in sysfs) and
//! the per-QP ones (`rdma statistic qp show`, see `rdma::stats`), as one table of
//! (name, reader), [`TABLE`]: the names ([`HW_COUNTERS`]), their number, the per-QP
//! count ([`QP_COUNTERS`]) and the values all come from it.
//!
//! The per-QP counters are relaxed atomics in the QP, counted where the connection's
//! run attributes a packet or a completion to it (under the connection's lock it
//! already holds: no lock of their own), read by ib_core's counters.

use crate::ud::UdDrop;
use kernel::{
    prelude::*,
    sync::atomic::{Atomic, Relaxed},
};
use metaroce_proto::Stats;
use rdma::{
    cq::WcStatus,
    stats::CounterDesc,
    udp::{Ecn, TunnelStats},
};

/// The counters of one QP, from its creation.
pub(crate) struct QpCounters {
    /// Data packets sent with this QP's payload (its requests' data, its READ
    /// responses), retransmissions included.
    tx_data: Atomic<u64>,
    /// Their payload bytes.
    tx_bytes: Atomic<u64>,
    /// Of those packets, retransmissions.
    tx_retransmits: Atomic<u64>,
    /// Received data segments placed in this QP's memory (first copies).
    rx_data: Atomic<u64>,
    /// Their payload bytes.
    rx_bytes: Atomic<u64>,
    /// Send completions with a remote error (access, invalid request, operation).
    rem_errors: Atomic<u64>,
    /// Send completions whose retries ran out (transport or RNR).
    retry_exceeded: Atomic<u64>,
    /// Requests of the peer refused (access or invalid request).
    req_refused: Atomic<u64>,
}

impl QpCounters {
    pub(crate) const fn new() -> Self {
        Self {
            tx_data: Atomic::new(0),
            tx_bytes: Atomic::new(0),
            tx_retransmits: Atomic::new(0),
            rx_data: Atomic::new(0),
            rx_bytes: Atomic::new(0),
            rem_errors: Atomic::new(0),
            retry_exceeded: Atomic::new(0),
            req_refused: Atomic::new(0),
        }
    }

    /// A data packet with `bytes` of this QP's payload went out.
    pub(crate) fn count_tx(&self, bytes: u32, retransmit: bool) {
        self.tx_data.fetch_add(1, Relaxed);
        self.tx_bytes.fetch_add(u64::from(bytes), Relaxed);
        if retransmit {
            self.tx_retransmits.fetch_add(1, Relaxed);
        }
    }

    /// `bytes` of a received segment were placed.
    pub(crate) fn count_rx(&self, bytes: usize) {
        self.rx_data.fetch_add(1, Relaxed);
        self.rx_bytes.fetch_add(bytes as u64, Relaxed);
    }

    /// A send work request completed with `status`.
    pub(crate) fn count_send_status(&self, status: WcStatus) {
        match status {
            WcStatus::RemAccessErr | WcStatus::RemInvReqErr | WcStatus::RemOpErr => {
                self.rem_errors.fetch_add(1, Relaxed);
            }
            WcStatus::RetryExcErr | WcStatus::RnrRetryExcErr => {
                self.retry_exceeded.fetch_add(1, Relaxed);
            }
            _ => {}
        }
    }

    /// A request of the peer was refused.
    pub(crate) fn count_refused(&self) {
        self.req_refused.fetch_add(1, Relaxed);
    }

    /// The values, in the order of the `qp_*` port counters.
    pub(crate) fn read(&self, values: &mut [u64]) {
        for (v, (_, reader)) in values.iter_mut().zip(&TABLE[TABLE.len() - QP_COUNTERS..]) {
            if let Reader::Qp(read) = reader {
                *v = read(self).load(Relaxed);
            }
        }
    }
}

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
    /// Connections that lingered after their last QP (spec [MR-CONN-16]).
    pub(crate) conns_lingered: Atomic<u64>,
    /// Probes of its peer (CONTROL `OPEN`) a lingering connection left unanswered.
    pub(crate) rx_linger_probes: Atomic<u64>,
    /// UD datagrams sent.
    pub(crate) ud_tx: Atomic<u64>,
    /// UD datagrams delivered to a receive.
    pub(crate) ud_rx: Atomic<u64>,
    /// UD datagrams dropped: malformed, no UD QP in RTR/RTS with that number and
    /// Q_Key, or no receive posted (the sum of the reasons below and malformed ones).
    pub(crate) ud_rx_dropped: Atomic<u64>,
    /// Of those: no UD QP with the header's number in RTR, RTS or SQD.
    pub(crate) ud_rx_no_qp: Atomic<u64>,
    /// Of those: the QP's Q_Key differs from the header's.
    pub(crate) ud_rx_bad_qkey: Atomic<u64>,
    /// Of those: the destination address is none of the device's ([MR-UD-5]).
    pub(crate) ud_rx_not_ours: Atomic<u64>,
    /// Of those: the QP had no receive posted.
    pub(crate) ud_rx_no_recv: Atomic<u64>,
    /// The transport counters of retired connections ([`TRANSPORT_COUNTERS`]).
    retired: [Atomic<u64>; TRANSPORT_COUNTERS],
}

/// The protocol counters summed over a device's connections, in this order:
/// data packets sent, retransmitted, retransmission timeouts, of those the spurious
/// ones, ACKs sent, NAKs sent, duplicate data received, datagrams the core dropped
/// and of those the ones out of a path's window and for no QP, datagrams the inbox
/// dropped, runs of the connections' serialized context, PATH_FLOORs sent, duplicates
/// acknowledged for a closed QP.
pub(crate) const TRANSPORT_COUNTERS: usize = 15;

pub(crate) fn transport_values(
    s: &Stats,
    inbox_drops: u64,
    runs: u64,
) -> [u64; TRANSPORT_COUNTERS] {
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
        s.tx_floors,
        s.rx_closed_qp_acked,
    ]
}

impl EngineCounters {
    /// Counts a UD datagram dropped for `why`.
    pub(crate) fn count_ud_drop(&self, why: UdDrop) {
        self.ud_rx_dropped.fetch_add(1, Relaxed);
        let reason = match why {
            UdDrop::Malformed => return,
            UdDrop::NoQp => &self.ud_rx_no_qp,
            UdDrop::BadQkey => &self.ud_rx_bad_qkey,
            UdDrop::NotOurs => &self.ud_rx_not_ours,
            UdDrop::NoRecv => &self.ud_rx_no_recv,
        };
        reason.fetch_add(1, Relaxed);
    }

    pub(crate) fn new() -> Self {
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
            conns_lingered: Atomic::new(0),
            rx_linger_probes: Atomic::new(0),
            ud_tx: Atomic::new(0),
            ud_rx: Atomic::new(0),
            ud_rx_dropped: Atomic::new(0),
            ud_rx_no_qp: Atomic::new(0),
            ud_rx_bad_qkey: Atomic::new(0),
            ud_rx_not_ours: Atomic::new(0),
            ud_rx_no_recv: Atomic::new(0),
            retired: [const { Atomic::new(0) }; TRANSPORT_COUNTERS],
        }
    }

    /// Adds the transport counters of a connection that goes away.
    pub(crate) fn retire(&self, stats: &Stats, inbox_drops: u64, runs: u64) {
        for (t, v) in self
            .retired
            .iter()
            .zip(transport_values(stats, inbox_drops, runs))
        {
            t.fetch_add(v, Relaxed);
        }
    }

    /// The transport counters of the connections gone so far.
    pub(crate) fn retired(&self) -> [u64; TRANSPORT_COUNTERS] {
        let mut sum = [0u64; TRANSPORT_COUNTERS];
        for (s, r) in sum.iter_mut().zip(self.retired.iter()) {
            *s = r.load(Relaxed);
        }
        sum
    }
}

/// Datagram counters of one device.
pub(crate) struct NetCounters {
    rx_packets: Atomic<u64>,
    rx_bytes: Atomic<u64>,
    /// Per ECN codepoint, indexed by its value.
    rx_ecn: [Atomic<u64>; 4],
    tx_packets: Atomic<u64>,
    tx_bytes: Atomic<u64>,
    tx_errors: Atomic<u64>,
    /// Sent datagrams whose payload rode as memory-region pages, not copied.
    tx_zero_copy: Atomic<u64>,
    /// Sent buffers that carried more than one datagram (UDP GSO bursts).
    tx_gso_bursts: Atomic<u64>,
    /// The datagrams those carried.
    tx_gso_segments: Atomic<u64>,
}

impl NetCounters {
    pub(crate) fn new() -> Self {
        Self {
            rx_packets: Atomic::new(0),
            rx_bytes: Atomic::new(0),
            rx_ecn: [const { Atomic::new(0) }; 4],
            tx_packets: Atomic::new(0),
            tx_bytes: Atomic::new(0),
            tx_errors: Atomic::new(0),
            tx_zero_copy: Atomic::new(0),
            tx_gso_bursts: Atomic::new(0),
            tx_gso_segments: Atomic::new(0),
        }
    }

    pub(crate) fn count_rx(&self, ecn: Ecn, len: usize) {
        self.rx_packets.fetch_add(1, Relaxed);
        self.rx_bytes.fetch_add(len as u64, Relaxed);
        self.rx_ecn[ecn as usize].fetch_add(1, Relaxed);
    }

    pub(crate) fn count_tx(&self, ret: Result, len: usize) {
        self.count_tx_paged(ret, len, false);
    }

    /// Counts the transmission of a burst of `packets` datagrams of `len` bytes in all,
    /// `zero_copy` of them with a paged payload, sent as one buffer (UDP GSO) when
    /// `packets > 1`.
    pub(crate) fn count_tx_burst(&self, ret: Result, packets: usize, len: usize, zero_copy: usize) {
        if ret.is_ok() {
            self.tx_zero_copy.fetch_add(zero_copy as u64, Relaxed);
            self.tx_packets.fetch_add(packets as u64, Relaxed);
            self.tx_bytes.fetch_add(len as u64, Relaxed);
            if packets > 1 {
                self.tx_gso_bursts.fetch_add(1, Relaxed);
                self.tx_gso_segments.fetch_add(packets as u64, Relaxed);
            }
        } else {
            self.tx_errors.fetch_add(packets as u64, Relaxed);
        }
    }

    /// Counts a transmission whose payload was paged (`zero_copy`) or not.
    pub(crate) fn count_tx_paged(&self, ret: Result, len: usize, zero_copy: bool) {
        if ret.is_ok() && zero_copy {
            self.tx_zero_copy.fetch_add(1, Relaxed);
        }
        if ret.is_ok() {
            self.tx_packets.fetch_add(1, Relaxed);
            self.tx_bytes.fetch_add(len as u64, Relaxed);
        } else {
            self.tx_errors.fetch_add(1, Relaxed);
        }
    }
}

/// What the port counters are read from, gathered once per read.
pub(crate) struct Sources<'a> {
    pub(crate) net: &'a NetCounters,
    pub(crate) engine: &'a EngineCounters,
    /// The device's open connections.
    pub(crate) conns: usize,
    /// The transport counters of the device's connections, open and gone.
    pub(crate) transport: [u64; TRANSPORT_COUNTERS],
    /// The counters of the device's namespace.
    pub(crate) ns: TunnelStats,
}

/// How one counter is read.
#[derive(Clone, Copy)]
enum Reader {
    /// A datagram counter of the device.
    Net(fn(&NetCounters) -> &Atomic<u64>),
    /// A counter of the device's engine.
    Eng(fn(&EngineCounters) -> &Atomic<u64>),
    /// The `i`th of [`Engine::transport_counters`] (summed over the connections; their
    /// order is the engine's `transport_values`).
    Transport(usize),
    /// Any other value of the port.
    Port(fn(&Sources<'_>) -> u64),
    /// A counter of one QP: the port reports 0 for it (see `rdma::stats`).
    Qp(fn(&QpCounters) -> &Atomic<u64>),
}

use Reader::{Eng, Net, Port, Qp, Transport};

/// Every counter, in the order the port reports them; the per-QP ones last, as
/// `rdma::stats` requires.
const TABLE: &[(&CStr, Reader)] = &[
    (c"rx_packets", Net(|n| &n.rx_packets)),
    (c"rx_bytes", Net(|n| &n.rx_bytes)),
    (c"rx_not_ect", Net(|n| &n.rx_ecn[Ecn::NotEct as usize])),
    (c"rx_ect0", Net(|n| &n.rx_ecn[Ecn::Ect0 as usize])),
    (c"rx_ect1", Net(|n| &n.rx_ecn[Ecn::Ect1 as usize])),
    (c"rx_ce", Net(|n| &n.rx_ecn[Ecn::Ce as usize])),
    (c"tx_packets", Net(|n| &n.tx_packets)),
    (c"tx_bytes", Net(|n| &n.tx_bytes)),
    (c"tx_errors", Net(|n| &n.tx_errors)),
    (c"tx_zero_copy", Net(|n| &n.tx_zero_copy)),
    (c"tx_gso_bursts", Net(|n| &n.tx_gso_bursts)),
    (c"tx_gso_segments", Net(|n| &n.tx_gso_segments)),
    // The transport engine: connections (one per peer) and the QPs they carry.
    (c"conns_open", Port(|s| s.conns as u64)),
    (c"conns_opened", Eng(|e| &e.conns_opened)),
    (c"qps_bound", Eng(|e| &e.qps_bound)),
    (c"rx_no_conn", Eng(|e| &e.rx_no_conn)),
    (c"rx_bad_header", Eng(|e| &e.rx_bad_header)),
    (c"rx_wrong_peer", Eng(|e| &e.rx_wrong_peer)),
    (c"rx_late_open", Eng(|e| &e.rx_late_open)),
    (c"conns_peer_closed", Eng(|e| &e.conns_peer_closed)),
    (c"conns_peer_gone", Eng(|e| &e.conns_peer_gone)),
    (c"conn_probes", Eng(|e| &e.conn_probes)),
    (c"rx_wrong_src", Eng(|e| &e.rx_wrong_src)),
    (c"rx_open_limited", Eng(|e| &e.rx_open_limited)),
    (c"conns_refused", Eng(|e| &e.conns_refused)),
    (c"conns_lingered", Eng(|e| &e.conns_lingered)),
    (c"rx_linger_probes", Eng(|e| &e.rx_linger_probes)),
    // Unreliable datagrams (crate::ud).
    (c"ud_tx", Eng(|e| &e.ud_tx)),
    (c"ud_rx", Eng(|e| &e.ud_rx)),
    (c"ud_rx_dropped", Eng(|e| &e.ud_rx_dropped)),
    (c"ud_rx_no_qp", Eng(|e| &e.ud_rx_no_qp)),
    (c"ud_rx_bad_qkey", Eng(|e| &e.ud_rx_bad_qkey)),
    (c"ud_rx_not_ours", Eng(|e| &e.ud_rx_not_ours)),
    (c"ud_rx_no_recv", Eng(|e| &e.ud_rx_no_recv)),
    // Summed over the connections.
    (c"tx_data", Transport(0)),
    (c"tx_retransmits", Transport(1)),
    (c"rto_expired", Transport(2)),
    (c"rto_spurious", Transport(3)),
    (c"tx_acks", Transport(4)),
    (c"tx_naks", Transport(5)),
    (c"rx_duplicates", Transport(6)),
    (c"rx_dropped", Transport(7)),
    (c"rx_out_of_window", Transport(8)),
    (c"rx_no_qp", Transport(9)),
    (c"rx_wrong_conn", Transport(10)),
    (c"rx_inbox_full", Transport(11)),
    (c"conn_runs", Transport(12)),
    (c"tx_floors", Transport(13)),
    (c"rx_closed_qp_acked", Transport(14)),
    // Per namespace: shared by the devices of the device's namespace.
    (c"ns_rx_no_device", Port(|s| s.ns.rx_unclaimed)),
    (c"ns_rx_malformed", Port(|s| s.ns.rx_malformed)),
    (c"ns_tx_no_route", Port(|s| s.ns.tx_no_route)),
    (c"ns_rx_gro_buffers", Port(|s| s.ns.rx_gro_buffers)),
    (c"ns_rx_gro_segments", Port(|s| s.ns.rx_gro_segments)),
    // Per QP.
    (c"qp_tx_data", Qp(|q| &q.tx_data)),
    (c"qp_tx_bytes", Qp(|q| &q.tx_bytes)),
    (c"qp_tx_retransmits", Qp(|q| &q.tx_retransmits)),
    (c"qp_rx_data", Qp(|q| &q.rx_data)),
    (c"qp_rx_bytes", Qp(|q| &q.rx_bytes)),
    (c"qp_rem_errors", Qp(|q| &q.rem_errors)),
    (c"qp_retry_exceeded", Qp(|q| &q.retry_exceeded)),
    (c"qp_req_refused", Qp(|q| &q.req_refused)),
];

/// The counters' names, in [`TABLE`]'s order (`Driver::HW_COUNTERS`).
pub(crate) const HW_COUNTERS: [CounterDesc; TABLE.len()] = {
    let mut names = [const { CounterDesc::new(c"") }; TABLE.len()];
    let mut i = 0;
    while i < TABLE.len() {
        names[i] = CounterDesc::new(TABLE[i].0);
        i += 1;
    }
    names
};

/// How many of the last counters are per QP (`Driver::QP_COUNTERS`).
pub(crate) const QP_COUNTERS: usize = {
    let mut n = 0;
    let mut transport = 0;
    let mut i = 0;
    while i < TABLE.len() {
        match TABLE[i].1 {
            Qp(_) => n += 1,
            // The per-QP counters come last.
            Net(_) | Eng(_) | Port(_) => assert!(n == 0),
            // The transport counters are the engine's, each once, in its order.
            Transport(t) => {
                assert!(n == 0 && t == transport);
                transport += 1;
            }
        }
        i += 1;
    }
    assert!(transport == TRANSPORT_COUNTERS);
    n
};

/// Fills `values` in [`TABLE`]'s order; 0 for the per-QP counters.
pub(crate) fn read_port(sources: &Sources<'_>, values: &mut [u64]) {
    for (v, (_, reader)) in values.iter_mut().zip(TABLE) {
        *v = match reader {
            Net(read) => read(sources.net).load(Relaxed),
            Eng(read) => read(sources.engine).load(Relaxed),
            Port(read) => read(sources),
            Transport(i) => sources.transport[*i],
            Qp(_) => 0,
        };
    }
}
