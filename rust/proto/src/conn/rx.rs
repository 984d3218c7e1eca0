// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Receive path: validation, placement, in-order delivery, ACK bookkeeping.
//!
//! Validation order (every step before any byte lands):
//! header bounds and version, connection ids, packet type, path id and PSN
//! window, QP, stream window (duplicates are acknowledged but not placed),
//! message window, then per-type checks and the [`Memory`] call.
//!
//= Documentation/metaroce/spec.rst#receive-validation

use super::qp::{FirstRequest, Qp, QpState, Response, RxKind, RxMsg};
use super::store::{QpStore, QpStoreExt};
use super::{ConnState, Connection, PendingDelivery, QpId};
use crate::cc::CongestionControl;
use crate::constants::{
    MAX_MSG_LEN, MAX_PATHS, MAX_RECV_WR, MAX_RESPONSES, MAX_RX_MSGS, PSN_ACCEPT_WINDOW,
    PSN_BEHIND_WINDOW, SRQ_CLAIM_WINDOW,
};
use crate::event::{Event, WcOpcode, WcStatus};
use crate::memory::{AtomicOp, Dest, MemError, Memory, RxPayload};
use crate::psn::seq_diff;
use crate::sack::Mark;
use crate::timer::Instant;
use crate::wire::{
    ControlCode, DataExt, Flags, Header, Nak, NakCode, Packet, PacketType, Status, StreamHeader,
};

/// Why a datagram was dropped without effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxDrop {
    /// Malformed or unsupported header.
    Malformed(crate::wire::Error),
    /// Not addressed to this connection.
    WrongConnection,
    /// The connection is closed.
    Closed,
    /// Path id or PSN outside the accepted window: a data packet's, an ACK
    /// block's that reports PSNs never sent, or a `PATH_FLOOR`'s too far ahead.
    OutOfWindow,
    /// Protocol violation by the peer (inconsistent fields).
    Invalid,
    /// No QP is bound for the packet's QPN, or the QP is in the error state
    /// (a requester that got ahead of its peer's RTR just retries).
    NoQp,
}

/// Outcome of processing one data packet's segment.
enum Seg {
    /// Placed (or otherwise taken): acknowledge.
    Accepted,
    /// Already had it: acknowledge, do nothing else.
    Duplicate,
    /// A response to a request this QP never made: acknowledge, so that its
    /// sender stops sending it, and do nothing else ([MR-PLC-6]).
    Unsolicited,
    /// Refused with a NAK: do not acknowledge.
    Nak(NakCode),
    /// Silently refused (resources, window): do not acknowledge.
    Drop,
}

/// Whether `psn` lies PSN_ACCEPT_WINDOW or more beyond a receive path's cumulative
/// PSN `base`: no data packet can be there, nor a floor a sender has sent
/// ([MR-SACK-23]).
//= Documentation/metaroce/spec.rst#sack
fn beyond_accept_window(psn: u32, base: u32) -> bool {
    let d = seq_diff(psn, base);
    d >= 0 && d as u32 >= PSN_ACCEPT_WINDOW
}

fn nak_of(e: MemError) -> NakCode {
    match e {
        MemError::Access => NakCode::AccessError,
        MemError::Invalid => NakCode::InvalidRequest,
        MemError::Operation => NakCode::RemoteOpError,
    }
}

fn status_of(e: MemError) -> Status {
    match e {
        MemError::Access => Status::AccessError,
        MemError::Invalid => Status::InvalidRequest,
        MemError::Operation => Status::RemoteOpError,
    }
}

/// The responder error a NAK code reports; `None` for RNR, which fails nothing.
fn status_of_nak(code: NakCode) -> Option<Status> {
    match code {
        NakCode::Rnr => None,
        NakCode::AccessError => Some(Status::AccessError),
        NakCode::InvalidRequest => Some(Status::InvalidRequest),
        NakCode::RemoteOpError => Some(Status::RemoteOpError),
    }
}

impl<C: CongestionControl, S: QpStore> Connection<C, S> {
    /// Processes one received datagram (the UDP payload).
    ///
    /// `ecn_ce` is the IP header's ECN-CE mark. Payloads are placed through
    /// `mem`, which validates before writing. Drops are counted in
    /// [`stats`](Self::stats) and also returned.
    pub fn handle_datagram<M: Memory>(
        &mut self,
        now: Instant,
        ecn_ce: bool,
        datagram: &[u8],
        mem: &mut M,
    ) -> Result<(), RxDrop> {
        self.handle_datagram_split(now, ecn_ce, datagram, 0, mem)
    }

    /// Processes one received datagram of which only the first part, `head`, is in
    /// one buffer: the payload of a data packet continues with `tail` more bytes the
    /// driver holds (a socket buffer's pages), which reach memory through
    /// [`Memory::place_split`]. The headers must lie inside `head`; a datagram that is
    /// not a data packet is parsed from `head` alone.
    pub fn handle_datagram_split<M: Memory>(
        &mut self,
        now: Instant,
        ecn_ce: bool,
        head: &[u8],
        tail: u32,
        mem: &mut M,
    ) -> Result<(), RxDrop> {
        self.stats.rx_packets = self.stats.rx_packets.saturating_add(1);
        let r = self.dispatch(now, ecn_ce, head, tail, mem);
        if let Err(e) = r {
            let s = &mut self.stats;
            s.rx_dropped = s.rx_dropped.saturating_add(1);
            match e {
                RxDrop::OutOfWindow => s.rx_out_of_window = s.rx_out_of_window.saturating_add(1),
                RxDrop::NoQp => s.rx_no_qp = s.rx_no_qp.saturating_add(1),
                RxDrop::WrongConnection => s.rx_wrong_conn = s.rx_wrong_conn.saturating_add(1),
                _ => {}
            }
        }
        // Deliver where a message completed or a response slot freed up.
        match core::mem::take(&mut self.deliver) {
            PendingDelivery::None => {}
            PendingDelivery::One(i) => self.deliver(i, mem),
            PendingDelivery::Many => {
                for i in 0..self.qps.len() {
                    self.deliver(i, mem);
                }
            }
        }
        r
    }

    fn dispatch<M: Memory>(
        &mut self,
        now: Instant,
        ecn_ce: bool,
        buf: &[u8],
        tail: u32,
        mem: &mut M,
    ) -> Result<(), RxDrop> {
        let pkt = Packet::new_checked(buf).map_err(RxDrop::Malformed)?;
        let h = *pkt.header();
        // `dst_conn` 0 with OPEN only until the peer has shown that it knows
        // our id: from then on a spoofer needs both ids.
        //= Documentation/metaroce/spec.rst#connection-ids
        let to_us = h.dst_conn == self.cfg.local_conn_id;
        let opening = h.dst_conn == 0 && h.flags.has(Flags::OPEN) && !self.peer_knows_us;
        if !to_us && !opening {
            return Err(RxDrop::WrongConnection);
        }
        if self.peer_conn == 0 {
            self.learn_peer(h.src_conn);
        } else if h.src_conn != self.peer_conn {
            return Err(RxDrop::WrongConnection);
        }
        self.peer_knows_us |= to_us;
        if self.state == ConnState::Closed {
            return Err(RxDrop::Closed);
        }
        match pkt.packet_type() {
            PacketType::Ack => self.on_ack(now, &pkt),
            PacketType::Nak => {
                let nak = pkt.nak().map_err(RxDrop::Malformed)?;
                self.on_nak(now, &nak);
                Ok(())
            }
            PacketType::Control => {
                let c = pkt.control().map_err(RxDrop::Malformed)?;
                match c.code {
                    ControlCode::Open => {
                        self.ack_now = true;
                        self.ack_pending = self.ack_pending.max(1);
                    }
                    ControlCode::PathFloor => {
                        // The peer resolved every PSN of its path before
                        // `value`: skip the holes there and say so. A floor as
                        // far ahead as a data packet could not be is forged or
                        // corrupt; one behind the cumulative PSN changes nothing.
                        //= Documentation/metaroce/spec.rst#path-floor
                        let rp = self
                            .rx_paths
                            .get_mut(usize::from(c.path))
                            .ok_or(RxDrop::OutOfWindow)?;
                        if beyond_accept_window(c.value, rp.window.base()) {
                            return Err(RxDrop::OutOfWindow);
                        }
                        rp.report = if rp.window.advance_to(c.value) {
                            2
                        } else {
                            rp.report.max(1)
                        };
                        self.ack_now = true;
                        self.ack_pending = self.ack_pending.max(1);
                    }
                    ControlCode::Close => {
                        if self.state != ConnState::Closed {
                            self.state = ConnState::Closed;
                            self.fail_all(WcStatus::WrFlushErr);
                            self.push_event(Event::Closed { reason: c.value });
                        }
                    }
                }
                Ok(())
            }
            _ => self.on_data(now, ecn_ce, &h, &pkt, tail, mem),
        }
    }

    fn on_data<M: Memory>(
        &mut self,
        now: Instant,
        ecn_ce: bool,
        h: &Header,
        pkt: &Packet<'_>,
        tail: u32,
        mem: &mut M,
    ) -> Result<(), RxDrop> {
        let path = usize::from(h.path);
        if path >= MAX_PATHS {
            return Err(RxDrop::OutOfWindow);
        }
        let base = self
            .rx_paths
            .get(path)
            .map(|p| p.window.base())
            .ok_or(RxDrop::OutOfWindow)?;
        // Forward: at most PSN_ACCEPT_WINDOW beyond the cumulative PSN.
        // Backward: at most SACK_BITS before it (a late packet whose data
        // may be new); anything older is stale.
        //= Documentation/metaroce/spec.rst#sack
        let d = seq_diff(h.psn, base);
        if beyond_accept_window(h.psn, base) || (d < 0 && d.unsigned_abs() > PSN_BEHIND_WINDOW) {
            return Err(RxDrop::OutOfWindow);
        }
        let stream = pkt.stream().map_err(RxDrop::Malformed)?;
        let ext = pkt.data_ext().map_err(RxDrop::Malformed)?;
        let payload = RxPayload {
            head: pkt.payload(),
            tail,
        };
        // A datagram is far shorter than 4 GiB: a longer payload is a driver bug.
        if u32::try_from(payload.len()).is_err() {
            return Err(RxDrop::Malformed(crate::wire::Error::Malformed));
        }
        let ty = pkt.packet_type();
        //= Documentation/metaroce/spec.rst#streams
        let seg = match self.qp_by_qpn(stream.qpn) {
            None if !ty.is_response() && self.closed_qp_received(stream.qpn, stream.ssn) => {
                self.stats.rx_closed_qp_acked = self.stats.rx_closed_qp_acked.saturating_add(1);
                Seg::Duplicate
            }
            None => return Err(RxDrop::NoQp),
            Some(qi) if ty.is_response() => self.on_response(qi, h, &stream, &ext, payload, mem),
            Some(qi) if self.qps.qp(qi).is_some_and(|q| q.error.is_some()) => {
                return Err(RxDrop::NoQp)
            }
            Some(qi) => self.on_request(qi, h, &stream, &ext, payload, mem),
        };
        match seg {
            Seg::Accepted | Seg::Duplicate | Seg::Unsolicited => {
                match seg {
                    Seg::Duplicate => {
                        self.stats.rx_duplicates = self.stats.rx_duplicates.saturating_add(1)
                    }
                    Seg::Accepted => {
                        self.stats.rx_bytes = self.stats.rx_bytes.saturating_add(payload.len())
                    }
                    _ => {}
                }
                self.note_received(now, path, h, ecn_ce, matches!(seg, Seg::Duplicate));
                Ok(())
            }
            Seg::Nak(code) => {
                self.stats.rx_naked = self.stats.rx_naked.saturating_add(1);
                // Every refusal but RNR moves the responder QP to the error
                // state, the structural ones (no LAST, a payload, a length
                // above MAX_MSG_LEN) as well as the memory ones ([MR-CMP-8]).
                //= Documentation/metaroce/spec.rst#responder-errors
                if let Some(status) = status_of_nak(code) {
                    if let Some(q) = self
                        .qp_by_qpn(stream.qpn)
                        .and_then(|qi| self.qps.qp_mut(qi))
                    {
                        q.fail_responder(status);
                    }
                }
                let nak = Nak {
                    path: h.path,
                    code,
                    rnr_timer: self.cfg.rnr_timer,
                    psn: h.psn,
                    qpn: stream.qpn,
                    msn: stream.msn,
                    ssn: stream.ssn,
                };
                self.queue_nak(nak);
                Ok(())
            }
            Seg::Drop => Err(RxDrop::Invalid),
        }
    }

    /// Whether a closed QP numbered `qpn` received request segment `ssn` ([MR-QP-8]).
    //= Documentation/metaroce/spec.rst#streams
    fn closed_qp_received(&self, qpn: u32, ssn: u32) -> bool {
        (0..self.qps.len()).any(|i| {
            self.qps
                .qp(i)
                .is_some_and(|q| q.closed_and_received(qpn, ssn))
        })
    }

    /// Records an acknowledged PSN and decides when to send the ACK.
    //= Documentation/metaroce/spec.rst#ack-policy
    fn note_received(&mut self, now: Instant, path: usize, h: &Header, ecn_ce: bool, dup: bool) {
        let Some(rp) = self.rx_paths.get_mut(path) else {
            return;
        };
        rp.window.insert_sliding(h.psn);
        if ecn_ce {
            rp.ce_count = rp.ce_count.wrapping_add(1);
        }
        if dup {
            rp.dup_count = rp.dup_count.wrapping_add(1);
        }
        rp.report = 2;
        // A hole (a later PSN arrived first) or a duplicate: tell the sender now.
        let hole = rp.window.words().iter().any(|w| *w != 0);
        if self.ack_pending == 0 {
            self.ack_deadline = Some(now.add_nanos(self.cfg.ack_hold_ns()));
        }
        self.last_recorded = Some(now);
        self.ack_pending = self.ack_pending.saturating_add(1);
        if hole
            || dup
            || ecn_ce
            || h.flags.has(Flags::ACK_REQ)
            || self.ack_pending >= self.cfg.ack_every
        {
            self.ack_now = true;
        }
    }

    fn queue_nak(&mut self, nak: Nak) {
        match self.naks.iter_mut().find(|n| n.is_none()) {
            Some(s) => *s = Some(nak),
            None => self.stats.naks_dropped = self.stats.naks_dropped.saturating_add(1),
        }
    }

    /// Responder side: a request-stream segment.
    //= Documentation/metaroce/spec.rst#placement
    fn on_request<M: Memory>(
        &mut self,
        qi: usize,
        h: &Header,
        s: &StreamHeader,
        ext: &DataExt,
        payload: RxPayload<'_>,
        mem: &mut M,
    ) -> Seg {
        let qp = QpId(qi as u16);
        let Some(q) = self.qps.qp_mut(qi) else {
            return Seg::Drop;
        };
        match q.req_rx.get(s.ssn) {
            Some(true) => return Seg::Duplicate,
            None => return Seg::Drop,
            Some(false) => {}
        }
        // Accepted or refused below, a new request reached the responder.
        if q.first_request == FirstRequest::Awaited {
            q.first_request = FirstRequest::Arrived;
            self.first_requests = true;
        }
        let last = h.flags.has(Flags::LAST);
        let md = seq_diff(s.msn, q.deliver_msn);
        if md < 0 || md as usize >= MAX_RX_MSGS {
            return Seg::Drop;
        }
        let plen = payload.len() as u32;
        let in_msg = |total: u32| {
            s.offset.checked_add(plen).is_some_and(|end| end <= total) && total <= MAX_MSG_LEN
        };
        let mut msg = RxMsg {
            msn: s.msn,
            last_ssn: s.ssn,
            ..Default::default()
        };
        match *ext {
            DataExt::Send {
                rsn,
                total_len,
                imm,
            } => {
                let Some(wqe) = claim_recv(q, qp, rsn, mem) else {
                    return Seg::Nak(NakCode::Rnr);
                };
                if !in_msg(total_len) {
                    return Seg::Nak(NakCode::InvalidRequest);
                }
                // The receive is consumed with a length error and the responder QP
                // fails (IB: IBV_WC_LOC_LEN_ERR here, REM_INV_REQ at the requester).
                //= Documentation/metaroce/spec.rst#responder-errors
                if total_len > wqe.len {
                    q.resp_err = Some(WcStatus::LocLenErr);
                    q.fail(WcStatus::LocLenErr);
                    return Seg::Nak(NakCode::InvalidRequest);
                }
                let dest = Dest::Recv {
                    wr_id: wqe.wr_id,
                    offset: s.offset,
                };
                if !payload.is_empty() {
                    if let Err(e) = mem.place_split(qp, dest, payload) {
                        q.fail(WcStatus::LocProtErr);
                        return Seg::Nak(nak_of(e));
                    }
                }
                msg = RxMsg {
                    kind: RxKind::Send,
                    rsn,
                    imm,
                    len: total_len,
                    ..msg
                };
            }
            DataExt::Write {
                rkey,
                va,
                total_len,
                imm,
            } => {
                if !in_msg(total_len) {
                    return Seg::Nak(NakCode::InvalidRequest);
                }
                if let Some((rsn, _)) = imm {
                    if last && claim_recv(q, qp, rsn, mem).is_none() {
                        return Seg::Nak(NakCode::Rnr);
                    }
                }
                if !payload.is_empty() {
                    let dest = Dest::Remote {
                        rkey,
                        va: va.wrapping_add(u64::from(s.offset)),
                    };
                    if let Err(e) = mem.place_split(qp, dest, payload) {
                        // The responder QP fails too.
                        //= Documentation/metaroce/spec.rst#responder-errors
                        q.fail_responder(status_of(e));
                        return Seg::Nak(nak_of(e));
                    }
                }
                msg = match imm {
                    Some((rsn, imm)) => RxMsg {
                        kind: RxKind::WriteImm,
                        rsn,
                        imm: Some(imm),
                        len: total_len,
                        ..msg
                    },
                    None => RxMsg {
                        kind: RxKind::Write,
                        len: total_len,
                        ..msg
                    },
                };
            }
            DataExt::ReadReq { rkey, va, len } => {
                if !payload.is_empty() || !last || len > MAX_MSG_LEN {
                    return Seg::Nak(NakCode::InvalidRequest);
                }
                msg = RxMsg {
                    kind: RxKind::Read,
                    rkey,
                    va,
                    len,
                    ..msg
                };
            }
            DataExt::Atomic {
                rkey,
                va,
                compare_add,
                swap,
            } => {
                if !payload.is_empty() || !last {
                    return Seg::Nak(NakCode::InvalidRequest);
                }
                msg = RxMsg {
                    kind: RxKind::Atomic,
                    rkey,
                    va,
                    compare_add,
                    swap,
                    len: 8,
                    ..msg
                };
            }
            DataExt::ReadResp { .. } | DataExt::AtomicResp { .. } => return Seg::Drop,
        }
        if q.req_rx.insert(s.ssn) != Mark::New {
            return Seg::Drop;
        }
        //= Documentation/metaroce/spec.rst#in-order-delivery
        msg.solicited = h.flags.has(Flags::SOLICITED);
        if last {
            if let Some(slot) = q.msgs.get_mut(s.msn as usize % MAX_RX_MSGS) {
                *slot = msg;
            }
        }
        self.deliver.add(qi);
        Seg::Accepted
    }

    /// Requester side: a response-stream segment (READ or atomic response).
    ///
    /// A QP in the error state still acknowledges new response segments,
    /// without placing them, so that the responder's response slot frees.
    fn on_response<M: Memory>(
        &mut self,
        qi: usize,
        h: &Header,
        s: &StreamHeader,
        ext: &DataExt,
        payload: RxPayload<'_>,
        mem: &mut M,
    ) -> Seg {
        let qp = QpId(qi as u16);
        let Some(q) = self.qps.qp_mut(qi) else {
            return Seg::Drop;
        };
        match q.resp_rx.get(s.ssn) {
            Some(true) => return Seg::Duplicate,
            None => return Seg::Drop,
            Some(false) => {}
        }
        if q.error.is_some() {
            //= Documentation/metaroce/spec.rst#completion-ordering
            return if q.resp_rx.insert(s.ssn) == Mark::New {
                Seg::Accepted
            } else {
                Seg::Drop
            };
        }
        // A response to no outstanding request, or of another type than the
        // request (the peer answered a forged request): nothing here, but it is
        // acknowledged, or the peer sends it again until its retries run out.
        //= Documentation/metaroce/spec.rst#placement
        let Some(w) = q.sq_slot(s.msn).copied() else {
            return Seg::Unsolicited;
        };
        let mut local_err = false;
        let status = match (*ext, w.wr.opcode) {
            (DataExt::ReadResp { total_len, status }, crate::wr::Opcode::Read) => {
                let plen = payload.len() as u32;
                let fits = s.offset.checked_add(plen).is_some_and(|e| e <= w.wr.len);
                if total_len != w.wr.len || !fits {
                    return Seg::Drop;
                }
                if status == Status::Ok && !payload.is_empty() {
                    let dest = Dest::Local {
                        wr_id: w.wr.wr_id,
                        offset: s.offset,
                    };
                    local_err = mem.place_split(qp, dest, payload).is_err();
                }
                status
            }
            (DataExt::AtomicResp { orig, status }, op) if op.is_atomic() => {
                if status == Status::Ok {
                    let dest = Dest::Local {
                        wr_id: w.wr.wr_id,
                        offset: 0,
                    };
                    local_err = mem.place(qp, dest, &orig.to_ne_bytes()).is_err();
                }
                status
            }
            (DataExt::ReadResp { .. } | DataExt::AtomicResp { .. }, _) => return Seg::Unsolicited,
            _ => return Seg::Drop,
        };
        if q.resp_rx.insert(s.ssn) != Mark::New {
            return Seg::Drop;
        }
        if let Some(w) = q.sq_slot_mut(s.msn) {
            if h.flags.has(Flags::LAST) {
                w.resp_last_ssn = Some(s.ssn);
            }
            let err = match status {
                _ if local_err => Some(WcStatus::LocProtErr),
                Status::Ok => None,
                Status::AccessError => Some(WcStatus::RemAccessErr),
                Status::InvalidRequest => Some(WcStatus::RemInvReqErr),
                Status::RemoteOpError => Some(WcStatus::RemOpErr),
            };
            if let Some(e) = err {
                w.status.get_or_insert(e);
            }
        }
        if local_err {
            // As verbs: a local protection error moves the QP to the error state.
            q.fail(WcStatus::LocProtErr);
        }
        q.release_rd_atomic();
        Seg::Accepted
    }

    /// Delivers complete messages of QP `qi` in MSN order: executes READs and
    /// atomics (exactly once: an SSN is accepted once, and the result is kept
    /// until the requester acknowledges the response) and completes receives.
    //= Documentation/metaroce/spec.rst#in-order-delivery
    pub(crate) fn deliver<M: Memory>(&mut self, qi: usize, mem: &mut M) {
        let mtu = self.cfg.mtu;
        let qp = QpId(qi as u16);
        let Some(q) = self.qps.qp_mut(qi) else { return };
        if q.state != QpState::Active {
            return;
        }
        q.reclaim_responses();
        loop {
            let Some(m) = q.msgs.get(q.deliver_msn as usize % MAX_RX_MSGS).copied() else {
                return;
            };
            if m.kind == RxKind::None
                || m.msn != q.deliver_msn
                || seq_diff(q.req_rx.base(), m.last_ssn) <= 0
            {
                return;
            }
            match m.kind {
                RxKind::None | RxKind::Write => {}
                RxKind::Send | RxKind::WriteImm => {
                    let op = if m.kind == RxKind::Send {
                        WcOpcode::Recv
                    } else {
                        WcOpcode::RecvRdmaWithImm
                    };
                    if let Some(w) = q.rq.get_mut(m.rsn as usize % MAX_RECV_WR) {
                        w.done = Some((op, m.len, m.imm, m.solicited));
                    }
                }
                RxKind::Read | RxKind::Atomic => {
                    if q.responses_full() {
                        // Retried when the requester acknowledges a response.
                        return;
                    }
                    let mut r = Response {
                        atomic: m.kind == RxKind::Atomic,
                        msn: m.msn,
                        ssn_first: q.next_resp_ssn,
                        nsegs: 1,
                        rkey: m.rkey,
                        va: m.va,
                        len: m.len,
                        ..Default::default()
                    };
                    if r.atomic {
                        let op = match m.swap {
                            Some(swap) => AtomicOp::CompareSwap {
                                compare: m.compare_add,
                                swap,
                            },
                            None => AtomicOp::FetchAdd { add: m.compare_add },
                        };
                        match mem.atomic(qp, m.rkey, m.va, op) {
                            Ok(v) => r.orig = v,
                            Err(e) => r.status = status_of(e),
                        }
                    } else {
                        match mem.check_read(qp, m.rkey, m.va, m.len) {
                            Ok(()) => r.nsegs = super::segments(m.len, mtu),
                            Err(e) => r.status = status_of(e),
                        }
                    }
                    // The error response still goes out (responses are sent in any
                    // state); the responder QP fails.
                    //= Documentation/metaroce/spec.rst#responder-errors
                    q.fail_responder(r.status);
                    q.next_resp_ssn = q.next_resp_ssn.wrapping_add(r.nsegs);
                    if let Some(slot) = q.responses.get_mut(q.resp_tail as usize % MAX_RESPONSES) {
                        *slot = r;
                    }
                    q.resp_tail = q.resp_tail.wrapping_add(1);
                }
            }
            if let Some(slot) = q.msgs.get_mut(q.deliver_msn as usize % MAX_RX_MSGS) {
                slot.kind = RxKind::None;
            }
            q.deliver_msn = q.deliver_msn.wrapping_add(1);
        }
    }
}

/// The receive WQE for `rsn`: posted to the QP, or else taken from its shared receive
/// queue, in RSN order, for every RSN up to `rsn` (receives are bound to messages as
/// they arrive, in any order, and complete in message order).
//= Documentation/metaroce/spec.rst#shared-receive-queues
fn claim_recv<M: Memory>(
    q: &mut Qp,
    qp: QpId,
    rsn: u32,
    mem: &mut M,
) -> Option<super::qp::RecvWqe> {
    if let Some(w) = recv_wqe(q, rsn) {
        return Some(w);
    }
    let want = rsn.wrapping_sub(q.rq_head);
    // Posted receives were found above: from here on only the SRQ's, bound no further
    // ahead than the window (an RNR NAK, and nothing bound, beyond it).
    //= Documentation/metaroce/spec.rst#shared-receive-queues
    if want as usize >= MAX_RECV_WR.min(SRQ_CLAIM_WINDOW) {
        return None;
    }
    while q.rq_tail.wrapping_sub(q.rq_head) <= want {
        let (wr_id, len) = mem.take_shared_recv(qp)?;
        let slot = q.rq.get_mut(q.rq_tail as usize % MAX_RECV_WR)?;
        *slot = super::qp::RecvWqe {
            wr_id,
            len,
            done: None,
        };
        q.rq_tail = q.rq_tail.wrapping_add(1);
    }
    recv_wqe(q, rsn)
}

/// The posted receive WQE for `rsn`, if posted and not yet consumed.
fn recv_wqe(q: &Qp, rsn: u32) -> Option<super::qp::RecvWqe> {
    let d = rsn.wrapping_sub(q.rq_head);
    if d >= q.rq_tail.wrapping_sub(q.rq_head) {
        return None;
    }
    q.rq.get(rsn as usize % MAX_RECV_WR).copied()
}
