// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The baseline: RoCEv2 RC with go-back-N, as rdma_rxe and most NICs run it.
//!
//! One PSN sequence per QP and one fixed UDP source port per QP (so ECMP pins
//! the QP to one path). The responder accepts only the expected PSN: it places
//! it, acknowledges cumulatively (every `ack_every` packets and at every
//! message end), and drops anything beyond it, sending one NAK (PSN sequence
//! error) per gap. The requester goes back to the NAKed PSN and resends
//! everything from there. A retransmission timer (IB `timeout`: 4.096 us *
//! 2^t, no backoff) rewinds to the oldest unacknowledged PSN; `retry_cnt`
//! timeouts without progress fail the QP with `IBV_WC_RETRY_EXC_ERR`.
//! Congestion control is optional DCQCN ([`crate::dcqcn`]).
//!
//! Wire format (our own, sized like the real headers): data packets carry a
//! 32-byte header (BTH 12 + RETH 16 + ICRC 4), control packets are 20 bytes
//! (BTH + AETH + ICRC).

use std::collections::BTreeMap;

use metaroce_proto::{Completion, Dest, Memory, QpId, WcOpcode, WcStatus};

use crate::clock::Time;
use crate::datagram::{Datagram, Ecn, HostId};
use crate::dcqcn::{Dcqcn, DcqcnConfig};
use crate::endpoint::{Endpoint, EndpointStats};
use crate::memory::{Backing, HostMemory};
use crate::workload::{imm_of, FlowLayout, FlowLog, FlowSpec, Logged, Op};

/// RoCEv2 UDP destination port.
pub const ROCE_PORT: u16 = 4791;
const DATA_HDR: usize = 32;
const CTRL_LEN: usize = 20;
const T_DATA: u8 = 1;
const T_ACK: u8 = 2;
const T_NAK: u8 = 3;
const T_CNP: u8 = 4;

/// Baseline parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GbnConfig {
    /// Payload bytes per packet.
    pub mtu: u32,
    /// Most unacknowledged PSNs per QP.
    pub window_pkts: u32,
    /// Retransmission timeout (4.096 us * 2^timeout).
    pub rto_ns: Time,
    /// Timeouts without progress before the QP fails.
    pub retry_cnt: u32,
    /// Acknowledge at least every this many in-order packets.
    pub ack_every: u32,
    /// DCQCN, or no congestion control.
    pub dcqcn: Option<DcqcnConfig>,
}

impl GbnConfig {
    /// The IB `timeout` attribute as nanoseconds: 4.096 us * 2^t.
    pub const fn ib_timeout_ns(t: u32) -> Time {
        4096 << t
    }

    /// NIC-like defaults: 4 KiB MTU, timeout 14 (67 ms, perftest's default), retry 7, no CC.
    pub fn new() -> Self {
        GbnConfig {
            mtu: 4096,
            window_pkts: 1024,
            rto_ns: Self::ib_timeout_ns(14),
            retry_cnt: 7,
            ack_every: 4,
            dcqcn: None,
        }
    }
}

impl Default for GbnConfig {
    fn default() -> Self {
        Self::new()
    }
}

struct Tx {
    spec: FlowSpec,
    peer: HostId,
    sport: u16,
    first_psn: Vec<u32>,
    total: u32,
    /// End of the PSNs of the messages released ([`FlowSpec::after`]).
    limit: u32,
    una: u32,
    nxt: u32,
    high: u32,
    rto_at: Option<Time>,
    retries: u32,
    next_send_at: Time,
    dcqcn: Option<Dcqcn>,
    failed: bool,
    log: FlowLog,
}

impl Tx {
    fn msg_of(&self, psn: u32) -> usize {
        self.first_psn.partition_point(|&p| p <= psn) - 1
    }

    fn can_send(&self, window: u32) -> bool {
        !self.failed && self.nxt < self.limit && self.nxt - self.una < window
    }
}

struct Rx {
    spec: FlowSpec,
    layout: FlowLayout,
    peer: HostId,
    sport: u16,
    expected: u32,
    nak_sent: bool,
    ack_pending: bool,
    nak_pending: bool,
    since_ack: u32,
    cnp_pending: bool,
    last_cnp: Option<Time>,
    log: FlowLog,
}

/// A host whose transport is the go-back-N baseline.
pub struct GbnHost {
    id: HostId,
    cfg: GbnConfig,
    mem: HostMemory,
    tx: BTreeMap<usize, Tx>,
    rx: BTreeMap<usize, Rx>,
    rr: usize,
    completions: u64,
    placed: BTreeMap<HostId, u64>,
    stats: EndpointStats,
}

/// The fixed source port of a QP (rxe: 0xC000 | hash(qpn) & 0x3FFF).
fn qp_port(flow: usize, dir: u64) -> u16 {
    let h = crate::rng::Rng::derive(0x0CE, flow as u64 * 2 + dir).next_u64();
    0xC000 | (h as u16 & 0x3FFF)
}

fn qp_of(flow: usize) -> QpId {
    QpId(flow as u16)
}

fn get_u32(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .map_or(0, |s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

impl GbnHost {
    /// A host with no flows yet.
    pub fn new(id: HostId, cfg: GbnConfig) -> Self {
        GbnHost {
            id,
            cfg,
            mem: HostMemory::default(),
            tx: BTreeMap::new(),
            rx: BTreeMap::new(),
            rr: 0,
            completions: 0,
            placed: BTreeMap::new(),
            stats: EndpointStats::default(),
        }
    }

    fn ctrl(&self, ty: u8, flow: usize, psn: u32, peer: HostId, sport: u16) -> Datagram {
        let mut b = vec![0u8; CTRL_LEN];
        b[0] = ty;
        b[4..8].copy_from_slice(&(flow as u32).to_be_bytes());
        b[8..12].copy_from_slice(&psn.to_be_bytes());
        Datagram::new(self.id, peer, sport, ROCE_PORT, Ecn::Ect, b)
    }

    fn on_data(&mut self, now: Time, d: &Datagram) {
        let b = &d.data;
        let flow = get_u32(b, 4) as usize;
        let psn = get_u32(b, 8);
        let msg = get_u32(b, 12) as usize;
        let offset = get_u32(b, 16);
        let len = get_u32(b, 20) as usize;
        let Some(r) = self.rx.get_mut(&flow) else {
            return;
        };
        if d.ecn == Ecn::Ce && self.cfg.dcqcn.is_some() {
            let gap = self.cfg.dcqcn.map_or(0, |c| c.cnp_interval_ns);
            if r.last_cnp.is_none_or(|t| now >= t + gap) {
                r.last_cnp = Some(now);
                r.cnp_pending = true;
            }
        }
        if psn < r.expected {
            r.ack_pending = true;
            return;
        }
        if psn > r.expected {
            self.stats.ooo_discarded_bytes += len as u64;
            if !r.nak_sent {
                r.nak_sent = true;
                r.nak_pending = true;
            }
            return;
        }
        let Some(m) = r.spec.msgs.get(msg).copied() else {
            return;
        };
        let payload = b.get(DATA_HDR..DATA_HDR + len).unwrap_or(&[]);
        let qp = qp_of(flow);
        let dest = match m.op {
            Op::Send => Dest::Recv {
                wr_id: msg as u64,
                offset,
            },
            _ => Dest::Remote {
                rkey: r.layout.write_rkey,
                va: r.layout.va + r.layout.offsets[msg] + u64::from(offset),
            },
        };
        if !payload.is_empty() && self.mem.for_conn(0).place(qp, dest, payload).is_err() {
            return;
        }
        *self.placed.entry(d.src).or_default() += payload.len() as u64;
        r.expected += 1;
        r.nak_sent = false;
        r.since_ack += 1;
        let last = offset as usize + len >= m.len as usize;
        if last || r.since_ack >= self.cfg.ack_every {
            r.ack_pending = true;
        }
        if last && m.op.consumes_recv() {
            let (opcode, imm) = match m.op {
                Op::Send => (WcOpcode::Recv, None),
                _ => (WcOpcode::RecvRdmaWithImm, Some(imm_of(flow, msg))),
            };
            let wc = Completion {
                qp,
                wr_id: msg as u64,
                status: WcStatus::Success,
                opcode,
                byte_len: m.len,
                imm,
                solicited: false,
            };
            r.log.recv.push(Logged { wc, at: now });
            self.completions += 1;
        }
    }

    fn on_ack(&mut self, now: Time, flow: usize, psn: u32, nak: bool) {
        let rto = self.cfg.rto_ns;
        let Some(t) = self.tx.get_mut(&flow) else {
            return;
        };
        if t.failed {
            return;
        }
        if psn > t.una && psn <= t.high {
            t.una = psn;
            t.retries = 0;
            // Complete every message whose last packet is acknowledged, in order.
            while t.log.send.len() < t.spec.msgs.len() {
                let i = t.log.send.len();
                let end = t.first_psn.get(i + 1).copied().unwrap_or(t.total);
                if end > t.una {
                    break;
                }
                let opcode = if t.spec.msgs[i].op == Op::Send {
                    WcOpcode::Send
                } else {
                    WcOpcode::RdmaWrite
                };
                let wc = Completion {
                    qp: qp_of(flow),
                    wr_id: i as u64,
                    status: WcStatus::Success,
                    opcode,
                    byte_len: t.spec.msgs[i].len,
                    imm: None,
                    solicited: false,
                };
                t.log.send.push(Logged { wc, at: now });
                self.completions += 1;
            }
            t.rto_at = if t.una < t.limit {
                Some(now + rto)
            } else {
                None
            };
        }
        if nak && psn >= t.una && psn < t.nxt {
            t.nxt = psn;
        }
        if t.nxt < t.una {
            t.nxt = t.una;
        }
    }

    fn fail(t: &mut Tx, flow: usize, now: Time, completions: &mut u64) {
        t.failed = true;
        t.rto_at = None;
        let mut status = WcStatus::RetryExcErr;
        while t.log.send.len() < t.spec.msgs.len() {
            let i = t.log.send.len();
            let wc = Completion {
                qp: qp_of(flow),
                wr_id: i as u64,
                status,
                opcode: WcOpcode::RdmaWrite,
                byte_len: 0,
                imm: None,
                solicited: false,
            };
            t.log.send.push(Logged { wc, at: now });
            *completions += 1;
            status = WcStatus::WrFlushErr;
        }
    }

    fn data_packet(&mut self, flow: usize, now: Time) -> Option<Datagram> {
        let mtu = self.cfg.mtu;
        let t = self.tx.get_mut(&flow)?;
        let psn = t.nxt;
        let msg = t.msg_of(psn);
        let m = t.spec.msgs[msg];
        let offset = (psn - t.first_psn[msg]) * mtu;
        let len = m.len.saturating_sub(offset).min(mtu);
        let mut b = Vec::with_capacity(DATA_HDR + len as usize);
        b.resize(DATA_HDR, 0);
        b[0] = T_DATA;
        b[1] = m.op as u8;
        for (at, v) in [
            (4, flow as u32),
            (8, psn),
            (12, msg as u32),
            (16, offset),
            (20, len),
        ] {
            b[at..at + 4].copy_from_slice(&v.to_be_bytes());
        }
        if len > 0
            && !self
                .mem
                .gather_wr((0, qp_of(flow), msg as u64), offset, len, &mut b)
        {
            b.resize(DATA_HDR + len as usize, 0);
        }
        t.nxt += 1;
        self.stats.data_packets += 1;
        self.stats.payload_bytes += u64::from(len);
        if psn < t.high {
            self.stats.retransmits += 1;
        }
        t.high = t.high.max(t.nxt);
        if t.rto_at.is_none() {
            t.rto_at = Some(now + self.cfg.rto_ns);
        }
        if let Some(d) = &t.dcqcn {
            let wire = (b.len() + crate::datagram::WIRE_OVERHEAD) as f64 * 8.0;
            t.next_send_at = now + (wire / d.rate_bps() * 1e9) as Time;
        }
        Some(Datagram::new(
            self.id,
            t.peer,
            t.sport,
            ROCE_PORT,
            Ecn::Ect,
            b,
        ))
    }
}

impl Endpoint for GbnHost {
    fn add_flow(&mut self, flow: usize, spec: &FlowSpec, now: Time) {
        assert!(
            spec.msgs
                .iter()
                .all(|m| matches!(m.op, Op::Write | Op::WriteImm | Op::Send)),
            "the go-back-N model moves data with WRITE and SEND only"
        );
        let layout = FlowLayout::new(flow, spec);
        let log = FlowLog {
            conn: 0,
            qp: qp_of(flow),
            ..Default::default()
        };
        if spec.src == self.id {
            let mut first_psn = Vec::with_capacity(spec.msgs.len());
            let mut psn = 0u32;
            for (i, m) in spec.msgs.iter().enumerate() {
                first_psn.push(psn);
                psn += m.len.div_ceil(self.cfg.mtu).max(1);
                self.mem.send.insert(
                    (0, qp_of(flow), i as u64),
                    layout.requester_buffer(flow, spec, i),
                );
            }
            let mut log = log;
            log.started = Some(now);
            let limit = first_psn
                .get(spec.initially_released())
                .copied()
                .unwrap_or(psn);
            self.tx.insert(
                flow,
                Tx {
                    spec: spec.clone(),
                    peer: spec.dst,
                    sport: qp_port(flow, 0),
                    first_psn,
                    total: psn,
                    limit,
                    una: 0,
                    nxt: 0,
                    high: 0,
                    rto_at: None,
                    retries: 0,
                    next_send_at: now,
                    dcqcn: self.cfg.dcqcn.map(Dcqcn::new),
                    failed: false,
                    log,
                },
            );
        } else if spec.dst == self.id {
            layout.register_responder(flow, spec, &mut self.mem);
            for (i, m) in spec.msgs.iter().enumerate() {
                if m.op == Op::Send {
                    self.mem.recv.insert(
                        (0, qp_of(flow), i as u64),
                        Backing::new(m.len as usize, spec.verify),
                    );
                }
            }
            let rx = Rx {
                spec: spec.clone(),
                layout,
                peer: spec.src,
                sport: qp_port(flow, 1),
                expected: 0,
                nak_sent: false,
                ack_pending: false,
                nak_pending: false,
                since_ack: 0,
                cnp_pending: false,
                last_cnp: None,
                log,
            };
            self.rx.insert(flow, rx);
        }
    }

    fn release(&mut self, flow: usize, msgs: usize, _now: Time) {
        if let Some(t) = self.tx.get_mut(&flow) {
            let end = t.first_psn.get(msgs).copied().unwrap_or(t.total);
            t.limit = t.limit.max(end);
        }
    }

    fn on_datagram(&mut self, now: Time, d: Datagram) {
        if !d.checksum_ok() {
            // The ICRC (and UDP checksum) catch every bit flip.
            self.stats.checksum_drops += 1;
            return;
        }
        let flow = get_u32(&d.data, 4) as usize;
        let psn = get_u32(&d.data, 8);
        match d.data.first().copied() {
            Some(T_DATA) => self.on_data(now, &d),
            Some(T_ACK) => self.on_ack(now, flow, psn, false),
            Some(T_NAK) => self.on_ack(now, flow, psn, true),
            Some(T_CNP) => {
                if let Some(dc) = self.tx.get_mut(&flow).and_then(|t| t.dcqcn.as_mut()) {
                    dc.on_cnp(now);
                }
            }
            _ => self.stats.rx_dropped += 1,
        }
    }

    fn on_timeout(&mut self, now: Time) {
        let (rto, retry) = (self.cfg.rto_ns, self.cfg.retry_cnt);
        for (&flow, t) in self.tx.iter_mut() {
            if let Some(d) = &mut t.dcqcn {
                d.on_timeout(now);
            }
            if t.rto_at.is_some_and(|at| at <= now) {
                self.stats.timeouts += 1;
                t.retries += 1;
                if t.retries > retry {
                    Self::fail(t, flow, now, &mut self.completions);
                } else {
                    t.nxt = t.una;
                    t.rto_at = Some(now + rto);
                }
            }
        }
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Datagram> {
        // Control packets first.
        let mut ctrl = None;
        for (&flow, r) in self.rx.iter_mut() {
            let (ty, psn) = if r.cnp_pending {
                r.cnp_pending = false;
                (T_CNP, 0)
            } else if r.nak_pending {
                r.nak_pending = false;
                self.stats.naks += 1;
                (T_NAK, r.expected)
            } else if r.ack_pending {
                r.ack_pending = false;
                r.since_ack = 0;
                self.stats.acks += 1;
                (T_ACK, r.expected)
            } else {
                continue;
            };
            ctrl = Some((ty, flow, psn, r.peer, r.sport));
            break;
        }
        if let Some((ty, flow, psn, peer, sport)) = ctrl {
            return Some(self.ctrl(ty, flow, psn, peer, sport));
        }
        let window = self.cfg.window_pkts;
        let flows: Vec<usize> = self.tx.keys().copied().collect();
        let n = flows.len();
        for k in 0..n {
            let flow = flows[(self.rr + k) % n];
            let t = &self.tx[&flow];
            if t.can_send(window) && t.next_send_at <= now {
                self.rr = (self.rr + k + 1) % n;
                return self.data_packet(flow, now);
            }
        }
        None
    }

    fn poll_timeout(&self) -> Option<Time> {
        let window = self.cfg.window_pkts;
        self.tx
            .values()
            .flat_map(|t| {
                let pace = t.can_send(window).then_some(t.next_send_at);
                [
                    t.rto_at,
                    pace,
                    t.dcqcn.as_ref().and_then(Dcqcn::poll_timeout),
                ]
            })
            .flatten()
            .min()
    }

    fn flow_log(&self, flow: usize) -> Option<&FlowLog> {
        self.tx
            .get(&flow)
            .map(|t| &t.log)
            .or_else(|| self.rx.get(&flow).map(|r| &r.log))
    }

    fn memory(&self) -> &HostMemory {
        &self.mem
    }

    fn stats(&self) -> EndpointStats {
        self.stats
    }

    fn completions(&self) -> u64 {
        self.completions
    }

    fn placed_from(&self, peer: HostId) -> u64 {
        self.placed.get(&peer).copied().unwrap_or(0)
    }
}
