// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Transmit path: what to send next, on which path, and when.
//!
//! Priority: ACK, NAK, CLOSE, then data. Data is retransmissions first (lost
//! packets' data as new packets), then new response segments, then new request
//! segments round-robin over QPs. A data packet goes out on the next path (round
//! robin) with room in its SACK window and congestion window, within the
//! connection window, and no earlier than the pacing clock allows.
//!
//= Documentation/metaroce/spec.rst#transmit

use super::qp::QpState;
use super::store::{QpStore, QpStoreExt};
use super::{ConnState, Connection, QpId};
use crate::cc::CongestionControl;
use crate::constants::{
    MAX_DATA_HEADER_LEN, MAX_RESPONSES, MAX_SEND_WR, MIN_TRANSMIT_BUF, PSN_ACCEPT_WINDOW,
    REASM_WINDOW,
};
use crate::path::inflight::{Chunk, Sent, SlotState};
use crate::psn::seq_diff;
use crate::timer::Instant;
use crate::wire::{Control, ControlCode, DataExt, Flags, Header, PacketRepr, StreamHeader};
use crate::wr::Opcode;

/// Payload bytes the driver appends after the headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Payload {
    /// Bytes `offset..offset + len` of send work request `wr_id`'s local buffer.
    Wr {
        /// Local QP.
        qp: QpId,
        /// Send work request.
        wr_id: u64,
        /// Byte offset in the message.
        offset: u32,
        /// Byte count.
        len: u32,
    },
    /// READ response data: `len` bytes of local memory at `rkey`/`va`
    /// (validated when the READ was executed).
    Mr {
        /// Local QP.
        qp: QpId,
        /// The READ's MSN.
        msn: u32,
        /// Local memory key (the peer's rkey).
        rkey: u32,
        /// Address of the first byte.
        va: u64,
        /// Byte count.
        len: u32,
    },
}

impl Payload {
    /// Payload length in bytes.
    pub fn len(&self) -> u32 {
        match *self {
            Payload::Wr { len, .. } | Payload::Mr { len, .. } => len,
        }
    }

    /// Whether the payload is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A packet to send: headers are in the caller's buffer; append the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Transmit {
    /// Header bytes written at the start of the buffer.
    pub len: usize,
    /// Path id.
    pub path: u8,
    /// UDP source port to send from (the path's current port).
    pub src_port: u16,
    /// Payload to append, if any.
    pub payload: Option<Payload>,
}

/// The path a data packet goes out on.
struct PathChoice {
    path: usize,
    /// The connection's or the path's window may have no room for a further
    /// packet after this one ([MR-SACK-20]: the packet asks for an ACK).
    last_fit: bool,
}

impl<C: CongestionControl, S: QpStore> Connection<C, S> {
    /// The caller could not read the payload of a transmission from local memory, and
    /// did not send it. For a READ response, the memory left after the READ was
    /// executed (its region was deregistered): the response turns into an access
    /// error, and the QP fails ([MR-CMP-9]). The packet is lost to the core: its
    /// retransmission, built from the response, carries the error. A send work
    /// request's buffer that went away is the application's error: its packets stay
    /// unsent until the request's retries run out.
    //= Documentation/metaroce/spec.rst#responder-errors
    pub fn payload_unavailable(&mut self, payload: &Payload) {
        let Payload::Mr { qp, msn, .. } = *payload else {
            return;
        };
        let Some(q) = self.qps.qp_mut(qp.index()) else {
            return;
        };
        let Some((i, _)) = q.response(msn) else {
            return;
        };
        let Some(r) = q.responses.get_mut(i as usize % MAX_RESPONSES) else {
            return;
        };
        if r.atomic || r.status != crate::wire::Status::Ok {
            return;
        }
        r.status = crate::wire::Status::AccessError;
        q.fail_responder(crate::wire::Status::AccessError);
    }

    /// Produces the next packet, if any may be sent at `now`.
    ///
    /// Writes the headers into `buf` (at least
    /// [`MIN_TRANSMIT_BUF`](crate::constants::MIN_TRANSMIT_BUF) bytes) and says
    /// which payload to append. Call until it returns `None`.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        if buf.len() < MIN_TRANSMIT_BUF {
            return None;
        }
        self.report_qp_errors();
        if self.ack_pending > 0 && (self.ack_now || self.ack_deadline.is_some_and(|d| now >= d)) {
            let path = self.ack_path % usize::from(self.cfg.paths).max(1);
            self.ack_path = self.ack_path.wrapping_add(1);
            let len = self.emit_ack(now, buf)?;
            return Some(self.control_transmit(len, path));
        }
        if let Some(nak) = self.naks.iter_mut().find_map(|n| n.take()) {
            let h = self.unsequenced_header();
            let len = PacketRepr::Nak { header: h, nak }.emit(buf).ok()?;
            self.stats.tx_naks = self.stats.tx_naks.saturating_add(1);
            return Some(self.control_transmit(len, 0));
        }
        if let Some(len) = self.emit_floor(now, buf) {
            return Some(len);
        }
        if let Some(reason) = self.close_pending.take() {
            self.state = ConnState::Closed;
            // While still opening, CLOSE carries OPEN like every other packet.
            //= Documentation/metaroce/spec.rst#connection-ids
            let h = self.unsequenced_header();
            let control = Control {
                code: ControlCode::Close,
                path: 0,
                value: reason,
            };
            let len = PacketRepr::Control { header: h, control }.emit(buf).ok()?;
            return Some(self.control_transmit(len, 0));
        }
        if self.state != ConnState::Open {
            return None;
        }
        self.paced = false;
        if self.cfg.pacing && now < self.next_send_at {
            self.paced = self.has_data_to_send();
            return None;
        }
        self.poll_data(now, buf)
    }

    /// A `PATH_FLOOR` for the first path whose receiver is stuck below PSNs
    /// this side has resolved: once the previous one was answered, or a base
    /// RTO after it. It goes out on another path than the one it describes
    /// (that one may be dead).
    //= Documentation/metaroce/spec.rst#path-floor
    fn emit_floor(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        if self.state != ConnState::Open || self.peer_conn == 0 {
            return None;
        }
        let n = usize::from(self.cfg.paths).max(1);
        // Floors are not congestion controlled: one per SRTT per path, behind a
        // queue that outgrew the SRTT, fed that queue. An unanswered floor is
        // sent again after a base RTO, which follows the queue (late packets
        // are RTT samples).
        let i = (0..n).find(|&i| {
            self.paths.get(i).is_some_and(|p| {
                p.floor_needed()
                    && p.floor_sent_at
                        .is_none_or(|t| now.nanos_since(t) >= self.base_rto(i))
            })
        })?;
        // Another path, preferably one without timeouts (several paths can
        // share a failed route).
        let start = i
            .wrapping_add(1)
            .wrapping_add(self.ack_path % n.saturating_sub(1).max(1));
        let others = (0..n)
            .map(|k| start.wrapping_add(k) % n)
            .filter(|&k| k != i || n == 1);
        let mut via = i;
        for k in others {
            via = k;
            if self.paths.get(k).is_some_and(|p| p.consecutive_rto == 0) {
                break;
            }
        }
        self.ack_path = self.ack_path.wrapping_add(1);
        let p = self.paths.get_mut(i)?;
        p.floor_sent_at = Some(now);
        // The receiver takes a floor less than PSN_ACCEPT_WINDOW beyond the
        // cumulative PSN it last reported: a receiver further behind (after a
        // long blackhole) is brought up in steps, one per round trip.
        let step = p.peer_cum.wrapping_add(PSN_ACCEPT_WINDOW.wrapping_sub(1));
        let una = p.inflight.una();
        let value = if seq_diff(una, step) > 0 { step } else { una };
        p.floor_value = value;
        let control = Control {
            code: ControlCode::PathFloor,
            path: i as u8,
            value,
        };
        let len = PacketRepr::Control {
            header: self.unsequenced_header(),
            control,
        }
        .emit(buf)
        .ok()?;
        self.stats.tx_floors = self.stats.tx_floors.saturating_add(1);
        Some(self.control_transmit(len, via))
    }

    /// Common header of an ACK, NAK or CONTROL packet (type filled in by the
    /// emitter): `OPEN` with `dst_conn = 0` while the peer's id is unknown.
    pub(crate) fn unsequenced_header(&self) -> Header {
        let flags = if self.peer_conn == 0 {
            Flags(Flags::OPEN)
        } else {
            Flags(0)
        };
        Header {
            dst_conn: self.peer_conn,
            src_conn: self.cfg.local_conn_id,
            flags,
            ..Default::default()
        }
    }

    fn control_transmit(&self, len: usize, path: usize) -> Transmit {
        let src_port = self.paths.get(path).map_or(0, |p| p.sport);
        Transmit {
            len,
            path: path as u8,
            src_port,
            payload: None,
        }
    }

    /// Whether anything (new or lost data) waits to be sent.
    pub(crate) fn has_data_to_send(&self) -> bool {
        self.state == ConnState::Open
            && (self.paths.iter().any(|p| p.inflight.lost > 0)
                || (0..self.qps.len()).any(|i| {
                    self.qps.qp(i).is_some_and(|q| {
                        q.state == QpState::Active
                            && (q.send_msn != q.next_msn || q.resp_tail != q.resp_head)
                    })
                }))
    }

    /// A path that may carry `bytes` more now (round robin), computing the
    /// bytes in flight once per packet.
    fn pick_path(&self, bytes: u32) -> Option<PathChoice> {
        let n = usize::from(self.cfg.paths).max(1);
        let total = self.bytes_in_flight();
        let conn_window = self.cc.conn_window();
        if total > 0 && total.saturating_add(u64::from(bytes)) > conn_window {
            return None;
        }
        let path = (0..n)
            .map(|k| self.next_path.wrapping_add(k) % n)
            .find(|&i| {
                self.paths.get(i).is_some_and(|p| {
                    let f = &p.inflight;
                    f.has_room()
                        && (f.bytes_in_flight == 0
                            || f.bytes_in_flight.saturating_add(bytes) <= self.cc.path_window(i))
                })
            })?;
        // Room for this packet and one more, each with the largest header, in a
        // window small enough that the sender would wait for a delayed ACK.
        let full = u64::from(bytes.saturating_add(MAX_DATA_HEADER_LEN as u32));
        let two = full.saturating_mul(2);
        let small = u64::from(self.cfg.window_ack_req).saturating_mul(full);
        let on_path = self
            .paths
            .get(path)
            .map_or(0, |p| p.inflight.bytes_in_flight);
        let path_window = u64::from(self.cc.path_window(path));
        let last_fit = (conn_window <= small && total.saturating_add(two) > conn_window)
            || (path_window <= small && u64::from(on_path).saturating_add(two) > path_window);
        Some(PathChoice { path, last_fit })
    }

    /// Moves the round-robin cursor after a data packet on `path`: to the next
    /// path once `path_burst` packets in a row went on this one.
    //= Documentation/metaroce/spec.rst#multipath
    fn advance_path(&mut self, path: usize) {
        self.path_run = if path == self.next_path {
            self.path_run.saturating_add(1)
        } else {
            1
        };
        if self.path_run >= self.cfg.path_burst {
            self.path_run = 0;
            self.next_path = path.wrapping_add(1) % usize::from(self.cfg.paths).max(1);
        } else {
            self.next_path = path;
        }
    }

    fn poll_data(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let mtu = self.cfg.mtu;
        let PathChoice { path, last_fit } = self.pick_path(mtu)?;
        let (chunk, retx) = match self.next_lost(now) {
            Some(c) => (c, true),
            None => match self.next_new() {
                Some(c) => (c, false),
                None => {
                    self.probe_blocking_segment();
                    return None;
                }
            },
        };
        // Ask for an ACK at once when waiting for the receiver's ACK delay would
        // stall the sender: a retransmission, or a packet after which the
        // connection's or the path's window has no room for another.
        //= Documentation/metaroce/spec.rst#ack-policy
        let ack_req = retx || last_fit;
        let (len, payload) = self.build(chunk, path, ack_req, buf)?;
        let bytes = payload.map_or(0, |p| p.len()).saturating_add(len as u32);
        let p = self.paths.get_mut(path)?;
        let psn = p
            .inflight
            .push(chunk, u16::try_from(bytes).unwrap_or(u16::MAX), now)?;
        // The PSN is known only now; patch it into the header.
        buf.get_mut(12..16)?.copy_from_slice(&psn.to_be_bytes());
        p.stats.sent = p.stats.sent.saturating_add(1);
        if retx {
            p.stats.retransmitted = p.stats.retransmitted.saturating_add(1);
            self.stats.tx_retransmits = self.stats.tx_retransmits.saturating_add(1);
        }
        let src_port = p.sport;
        self.advance_cursor(chunk, retx);
        self.advance_path(path);
        self.stats.tx_data = self.stats.tx_data.saturating_add(1);
        self.stats.tx_bytes = self
            .stats
            .tx_bytes
            .saturating_add(u64::from(payload.map_or(0, |p| p.len())));
        self.cc.on_sent(path, bytes, now);
        self.rearm_rto(path, now, false);
        self.pace(now, bytes);
        Some(Transmit {
            len,
            path: path as u8,
            src_port,
            payload,
        })
    }

    /// Advances the pacing clock by one packet of `bytes`.
    //= Documentation/metaroce/spec.rst#pacing
    pub(super) fn pace(&mut self, now: Instant, bytes: u32) {
        if !self.cfg.pacing {
            return;
        }
        let mut rate = self.peer_hint_bps;
        if self.conn_rtt.has_sample() {
            let srtt = self.conn_rtt.srtt_or(1).max(1);
            let w = (self.cc.conn_window().saturating_mul(1_000_000_000) / srtt)
                .saturating_mul(u64::from(self.cfg.pacing_gain))
                / 1024;
            rate = if rate == 0 { w } else { rate.min(w) };
        }
        if rate == 0 {
            self.next_send_at = now;
            self.pace_interval_ns = 0;
            return;
        }
        let interval = u64::from(bytes).saturating_mul(1_000_000_000) / rate;
        // A clock up to two packets' time behind is a run that came late: it
        // keeps its schedule and sends the packets it missed, or at a low rate
        // (a hint's share) every late timer would lose rate for good (an
        // incast's 4 senders got 62% of their hints in the VM, whose timers run
        // late). A clock further behind was idle: `pacing_burst` of credit.
        // Packets' time at the rate the clock ran at: a sender that was fast,
        // idle a while, and is now held to a lower hint was not late (the
        // compliance suite's 6 packets at a 2 Mbit/s hint took 13 ms of 28).
        let late_limit = core::mem::replace(&mut self.pace_interval_ns, interval);
        let behind = now.as_nanos().saturating_sub(self.next_send_at.as_nanos());
        let base = if behind <= late_limit.saturating_mul(2).max(self.cfg.pacing_burst_ns) {
            self.next_send_at
        } else {
            Instant::from_nanos(now.as_nanos().saturating_sub(self.cfg.pacing_burst_ns))
        };
        self.next_send_at = base.add_nanos(interval);
    }

    /// The oldest lost packet whose data still needs to be sent; frees lost
    /// slots whose data no longer does.
    //= Documentation/metaroce/spec.rst#retransmission
    fn next_lost(&mut self, now: Instant) -> Option<Chunk> {
        for pi in 0..self.paths.len() {
            while let Some(p) = self.paths.get(pi).filter(|p| p.inflight.lost > 0) {
                let (mut psn, end) = p.inflight.range();
                let mut found = None;
                while psn != end {
                    if let Some(s) = p.inflight.slot(psn) {
                        if s.state == crate::path::inflight::SlotState::Lost {
                            match self.chunk_status(&s.chunk, now) {
                                ChunkStatus::Needed => {
                                    found = Some((psn, s.chunk, true));
                                    break;
                                }
                                ChunkStatus::Done => {
                                    found = Some((psn, s.chunk, false));
                                    break;
                                }
                                ChunkStatus::Wait => {}
                            }
                        }
                    }
                    psn = psn.wrapping_add(1);
                }
                let Some((psn, chunk, needed)) = found else {
                    break;
                };
                if let Some(p) = self.paths.get_mut(pi) {
                    p.inflight.release_lost(psn);
                    if needed && p.lost_by_timeout(psn) {
                        self.undo.on_resent();
                    }
                }
                if needed {
                    return Some(chunk);
                }
            }
        }
        None
    }

    fn chunk_status(&self, c: &Chunk, now: Instant) -> ChunkStatus {
        let Some(q) = self.qps.qp(usize::from(c.qp)) else {
            return ChunkStatus::Done;
        };
        if q.state != QpState::Active {
            return ChunkStatus::Done;
        }
        if c.resp {
            if q.resp_acked.get(c.ssn) != Some(false) || q.response(c.msn).is_none() {
                return ChunkStatus::Done;
            }
            return ChunkStatus::Needed;
        }
        if q.error.is_some() || q.req_acked.get(c.ssn) != Some(false) {
            return ChunkStatus::Done;
        }
        match q.sq_slot(c.msn) {
            None => ChunkStatus::Done,
            Some(w) if w.status.is_some() => ChunkStatus::Done,
            Some(w) if w.rnr_until.is_some_and(|t| now < t) => ChunkStatus::Wait,
            Some(_) => ChunkStatus::Needed,
        }
    }

    /// A request stream that has more to send but may not ([MR-PLC-2]: its next
    /// segment is [`REASM_WINDOW`] beyond its oldest unacknowledged one): the QP and
    /// that oldest SSN.
    pub(crate) fn blocked_stream(&self) -> Option<(u16, u32)> {
        (0..self.qps.len()).find_map(|qi| {
            let q = self.qps.qp(qi)?;
            let (_, ssn) = q.next_request()?;
            let base = q.req_acked.base();
            (seq_diff(ssn, base) >= REASM_WINDOW as i32).then_some((qi as u16, base))
        })
    }

    /// Gives the packet that blocks a stream ([`blocked_stream`](Self::blocked_stream))
    /// a probe deadline on its path, probe timeouts on or off ([MR-RTX-16]): when it
    /// passes, [`on_probe_timeout`](Self::on_probe_timeout) declares that path's
    /// overdue packets lost. Without it a stream whose oldest segment went into a dead
    /// route waits for that path's RTO, having sent all its window allows.
    //= Documentation/metaroce/spec.rst#probe-timeout
    fn probe_blocking_segment(&mut self) {
        let Some((qp, ssn)) = self.blocked_stream() else {
            return;
        };
        if self.block_probed == Some((qp, ssn)) {
            return;
        }
        self.block_probed = Some((qp, ssn));
        // Its oldest copy in flight (a copy sent again is a new packet).
        let carries = |s: &&Sent| {
            s.state == SlotState::InFlight
                && s.chunk.qp == qp
                && !s.chunk.resp
                && s.chunk.ssn == ssn
        };
        let oldest = self
            .paths
            .iter()
            .enumerate()
            .take(usize::from(self.cfg.paths))
            .flat_map(|(i, p)| {
                let (una, next) = p.inflight.range();
                (0..next.wrapping_sub(una)).filter_map(move |k| {
                    let s = p.inflight.get(una.wrapping_add(k)).filter(carries)?;
                    Some((i, s.sent_at))
                })
            })
            .min_by_key(|&(_, sent_at)| sent_at);
        let Some((i, sent_at)) = oldest else {
            return;
        };
        let hold = self.cfg.ack_hold_ns();
        let conn_rtt = &self.conn_rtt;
        let Some(p) = self.paths.get_mut(i) else {
            return;
        };
        let Some(pto) = p.probe_timeout(hold, conn_rtt) else {
            return;
        };
        let at = sent_at.add_nanos(pto);
        p.probe_deadline = Some(p.probe_deadline.map_or(at, |d| d.min(at)));
    }

    /// The next never-sent segment: responses first, then requests round robin.
    fn next_new(&self) -> Option<Chunk> {
        let n = self.qps.len().max(1);
        for k in 0..n {
            let qi = self.next_qp.wrapping_add(k) % n;
            let Some(q) = self.qps.qp(qi) else { continue };
            if q.state != QpState::Active {
                continue;
            }
            let mut i = q.resp_head;
            while i != q.resp_tail {
                if let Some(r) = q.responses.get(i as usize % MAX_RESPONSES) {
                    if r.sent_segs < r.nsegs {
                        let ssn = r.ssn_first.wrapping_add(r.sent_segs);
                        if seq_diff(ssn, q.resp_acked.base()) < REASM_WINDOW as i32 {
                            return Some(Chunk {
                                qp: qi as u16,
                                resp: true,
                                msn: r.msn,
                                ssn,
                            });
                        }
                        break;
                    }
                }
                i = i.wrapping_add(1);
            }
        }
        let n = self.qps.len().max(1);
        for k in 0..n {
            let qi = self.next_qp.wrapping_add(k) % n;
            let Some(q) = self.qps.qp(qi) else { continue };
            let Some((w, ssn)) = q.next_request() else {
                continue;
            };
            if w.wr.opcode.has_response() && !q.rd_atomic_room() {
                continue;
            }
            if seq_diff(ssn, q.req_acked.base()) < REASM_WINDOW as i32 {
                return Some(Chunk {
                    qp: qi as u16,
                    resp: false,
                    msn: w.msn,
                    ssn,
                });
            }
        }
        None
    }

    fn advance_cursor(&mut self, c: Chunk, retx: bool) {
        if retx {
            return;
        }
        let Some(q) = self.qps.qp_mut(usize::from(c.qp)) else {
            return;
        };
        if c.resp {
            let mut i = q.resp_head;
            while i != q.resp_tail {
                if let Some(r) = q.responses.get_mut(i as usize % MAX_RESPONSES) {
                    if r.msn == c.msn {
                        r.sent_segs = r.sent_segs.saturating_add(1);
                        break;
                    }
                }
                i = i.wrapping_add(1);
            }
        } else {
            let (nsegs, response) =
                q.sq.get(q.send_msn as usize % MAX_SEND_WR)
                    .map_or((1, false), |w| (w.nsegs, w.wr.opcode.has_response()));
            q.send_seg = q.send_seg.saturating_add(1);
            if q.send_seg >= nsegs {
                if response {
                    q.rd_atomic_sent(q.send_msn);
                }
                q.send_seg = 0;
                q.send_msn = q.send_msn.wrapping_add(1);
            }
            self.next_qp = usize::from(c.qp).wrapping_add(1) % self.qps.len().max(1);
        }
    }

    /// Writes the headers for `c` (PSN left 0; patched by the caller).
    fn build(
        &self,
        c: Chunk,
        path: usize,
        ack_req: bool,
        buf: &mut [u8],
    ) -> Option<(usize, Option<Payload>)> {
        let mtu = self.cfg.mtu;
        let qi = usize::from(c.qp);
        let q = self.qps.qp(qi)?;
        let qp = QpId(qi as u16);
        let mut flags = 0u8;
        if self.peer_conn == 0 {
            flags |= Flags::OPEN;
        }
        if ack_req {
            flags |= Flags::ACK_REQ;
        }
        let (stream, ext, payload) = if c.resp {
            let (_, r) = q.response(c.msn)?;
            let seg = c.ssn.wrapping_sub(r.ssn_first);
            let offset = seg.saturating_mul(mtu);
            if seg == 0 {
                flags |= Flags::FIRST;
            }
            if seg.saturating_add(1) >= r.nsegs {
                flags |= Flags::LAST;
                // The responder frees a response only when it is acknowledged:
                // ask once three quarters of the slots are held.
                if q.responses_in_use().saturating_mul(4) >= MAX_RESPONSES.saturating_mul(3) {
                    flags |= Flags::ACK_REQ;
                }
            }
            let stream = StreamHeader {
                qpn: q.remote_qpn,
                msn: r.msn,
                ssn: c.ssn,
                offset,
            };
            if r.atomic {
                (
                    stream,
                    DataExt::AtomicResp {
                        orig: r.orig,
                        status: r.status,
                    },
                    None,
                )
            } else {
                let len = r.len.saturating_sub(offset).min(mtu);
                let payload =
                    (r.status == crate::wire::Status::Ok && len > 0).then_some(Payload::Mr {
                        qp,
                        msn: r.msn,
                        rkey: r.rkey,
                        va: r.va.wrapping_add(u64::from(offset)),
                        len,
                    });
                (
                    stream,
                    DataExt::ReadResp {
                        total_len: r.len,
                        status: r.status,
                    },
                    payload,
                )
            }
        } else {
            let w = q.sq_slot(c.msn)?;
            let seg = c.ssn.wrapping_sub(w.ssn_first);
            let offset = seg.saturating_mul(mtu);
            if seg == 0 {
                flags |= Flags::FIRST;
            }
            if seg.saturating_add(1) >= w.nsegs {
                flags |= Flags::LAST;
                if w.wr.solicited {
                    flags |= Flags::SOLICITED;
                }
                if w.wr.ack_req {
                    flags |= Flags::ACK_REQ;
                }
            }
            let wr = &w.wr;
            let len = wr.len.saturating_sub(offset).min(mtu);
            let data = Payload::Wr {
                qp,
                wr_id: wr.wr_id,
                offset,
                len,
            };
            let data = (len > 0).then_some(data);
            let stream = StreamHeader {
                qpn: q.remote_qpn,
                msn: w.msn,
                ssn: c.ssn,
                offset,
            };
            let (ext, payload) = match wr.opcode {
                Opcode::Send => (
                    DataExt::Send {
                        rsn: w.rsn,
                        total_len: wr.len,
                        imm: None,
                    },
                    data,
                ),
                Opcode::SendImm => (
                    DataExt::Send {
                        rsn: w.rsn,
                        total_len: wr.len,
                        imm: Some(wr.imm),
                    },
                    data,
                ),
                Opcode::Write => (
                    DataExt::Write {
                        rkey: wr.rkey,
                        va: wr.remote_addr,
                        total_len: wr.len,
                        imm: None,
                    },
                    data,
                ),
                Opcode::WriteImm => (
                    DataExt::Write {
                        rkey: wr.rkey,
                        va: wr.remote_addr,
                        total_len: wr.len,
                        imm: Some((w.rsn, wr.imm)),
                    },
                    data,
                ),
                Opcode::Read => (
                    DataExt::ReadReq {
                        rkey: wr.rkey,
                        va: wr.remote_addr,
                        len: wr.len,
                    },
                    None,
                ),
                Opcode::CompareSwap => (
                    DataExt::Atomic {
                        rkey: wr.rkey,
                        va: wr.remote_addr,
                        compare_add: wr.compare_add,
                        swap: Some(wr.swap),
                    },
                    None,
                ),
                Opcode::FetchAdd => (
                    DataExt::Atomic {
                        rkey: wr.rkey,
                        va: wr.remote_addr,
                        compare_add: wr.compare_add,
                        swap: None,
                    },
                    None,
                ),
            };
            (stream, ext, payload)
        };
        let header = Header {
            ty: ext.packet_type() as u8,
            flags: Flags(flags),
            path: path as u8,
            dst_conn: self.peer_conn,
            src_conn: self.cfg.local_conn_id,
            psn: 0,
        };
        let len = PacketRepr::Data {
            header,
            stream,
            ext,
        }
        .emit(buf)
        .ok()?;
        Some((len, payload))
    }
}

enum ChunkStatus {
    Needed,
    Done,
    Wait,
}
