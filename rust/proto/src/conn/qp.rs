// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Per-QP state: one ordered stream pair carried by a connection.
//!
//! Each QP has a request stream (requester to responder: SEND, WRITE, READ
//! request, atomics) and a response stream (READ responses, atomic responses).
//! Every segment of a stream has a stream segment number (SSN); SSNs of a
//! stream are contiguous across messages, so a reassembly window over SSNs gives
//! exact duplicate suppression and in-order completion: message `m` is complete
//! with everything before it once the receiver's cumulative SSN passes `m`'s
//! last segment.
//!
//= Documentation/metaroce/spec.rst#streams

use super::config::Config;
use crate::constants::{MAX_RECV_WR, MAX_RESPONSES, MAX_RX_MSGS, MAX_SEND_WR};
use crate::event::{ResponderError, WcOpcode, WcStatus};
use crate::psn::seq_diff;
use crate::sack::ReasmWindow;
use crate::timer::Instant;
use crate::wire::Status;
use crate::wr::{Opcode, WorkRequest};
use pin_init::{init, init_array_from_fn, Init};

/// QP slot state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum QpState {
    /// Unused slot.
    #[default]
    Free,
    /// Bound and running.
    Active,
    /// Unbound, keeping only the record of the request segments it received, to
    /// acknowledge the peer's retransmissions of them ([`Qp::close`]).
    Closed,
}

/// A posted send work request and its progress.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SendWr {
    pub(crate) wr: WorkRequest,
    pub(crate) msn: u32,
    pub(crate) ssn_first: u32,
    pub(crate) nsegs: u32,
    pub(crate) rsn: u32,
    pub(crate) rnr_until: Option<Instant>,
    /// When the current RNR episode began (the NAK that counted).
    pub(crate) rnr_since: Option<Instant>,
    pub(crate) rnr_count: u8,
    pub(crate) status: Option<WcStatus>,
    pub(crate) resp_last_ssn: Option<u32>,
}

impl SendWr {
    /// Last SSN of the request in the request stream.
    pub(crate) fn last_ssn(&self) -> u32 {
        self.ssn_first.wrapping_add(self.nsegs.saturating_sub(1))
    }

    pub(crate) fn wc_opcode(&self) -> WcOpcode {
        match self.wr.opcode {
            Opcode::Send | Opcode::SendImm => WcOpcode::Send,
            Opcode::Write | Opcode::WriteImm => WcOpcode::RdmaWrite,
            Opcode::Read => WcOpcode::RdmaRead,
            Opcode::CompareSwap => WcOpcode::CompSwap,
            Opcode::FetchAdd => WcOpcode::FetchAdd,
        }
    }
}

/// A posted receive work request.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RecvWqe {
    pub(crate) wr_id: u64,
    pub(crate) len: u32,
    /// Filled in when the consuming message is delivered in order.
    pub(crate) done: Option<(WcOpcode, u32, Option<u32>, bool)>,
}

/// Kind of an incoming message, as recorded from its last segment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum RxKind {
    /// No message recorded.
    #[default]
    None,
    /// SEND (with optional immediate).
    Send,
    /// WRITE without immediate.
    Write,
    /// WRITE with immediate.
    WriteImm,
    /// READ request.
    Read,
    /// Atomic request.
    Atomic,
}

/// Responder record of an incoming message, written when its last segment arrives.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RxMsg {
    pub(crate) kind: RxKind,
    pub(crate) msn: u32,
    pub(crate) last_ssn: u32,
    pub(crate) rsn: u32,
    pub(crate) imm: Option<u32>,
    /// The last segment carried `SOLICITED`.
    pub(crate) solicited: bool,
    pub(crate) len: u32,
    pub(crate) rkey: u32,
    pub(crate) va: u64,
    pub(crate) compare_add: u64,
    pub(crate) swap: Option<u64>,
}

/// A READ or atomic response held until the requester acknowledges it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Response {
    pub(crate) atomic: bool,
    pub(crate) msn: u32,
    pub(crate) ssn_first: u32,
    pub(crate) nsegs: u32,
    pub(crate) sent_segs: u32,
    pub(crate) rkey: u32,
    pub(crate) va: u64,
    pub(crate) len: u32,
    pub(crate) orig: u64,
    pub(crate) status: Status,
}

impl Response {
    pub(crate) fn last_ssn(&self) -> u32 {
        self.ssn_first.wrapping_add(self.nsegs.saturating_sub(1))
    }
}

/// One QP.
#[derive(Clone, Debug)]
pub(crate) struct Qp {
    pub(crate) state: QpState,
    pub(crate) local_qpn: u32,
    pub(crate) remote_qpn: u32,
    pub(crate) error: Option<WcStatus>,
    /// The status of the first receive flushed after a responder error (a SEND longer
    /// than its receive buffer: `LocLenErr`).
    pub(crate) resp_err: Option<WcStatus>,
    /// RNR retries per work request (verbs `rnr_retry`, 7 = unlimited).
    pub(crate) rnr_retry: u8,
    /// Verbs `retry_cnt` ([`Qp::request_lost`]).
    pub(crate) retry_limit: u8,
    /// Loss detections that found a request packet of this QP lost since one
    /// was last acknowledged.
    pub(crate) lost_in_a_row: u32,
    /// The loss detection counted last in [`Qp::lost_in_a_row`].
    pub(crate) last_loss_detection: u32,
    /// When the run counted in [`Qp::lost_in_a_row`] began.
    pub(crate) loss_run_since: Instant,
    /// READ and ATOMIC requests that may be outstanding at once (verbs
    /// `max_rd_atomic`; 0 = no limit).
    pub(crate) rd_atomic_limit: u8,
    /// READ and ATOMIC requests sent whose responses are not yet complete.
    pub(crate) rd_atomic_out: u32,
    /// MSN of the oldest of them (or of a later work request) while there are any.
    pub(crate) rd_atomic_msn: u32,
    pub(crate) error_reported: bool,
    /// A send work request completed with an error: every later one completes
    /// with `WrFlushErr`, whatever became of it.
    pub(crate) sq_flushing: bool,
    /// The request whose refusal failed the QP, until reported as
    /// [`Event::ResponderError`](crate::Event::ResponderError).
    pub(crate) responder_error: Option<ResponderError>,
    /// Whether a request of the peer has reached the responder, and been reported
    /// as [`Event::FirstRequest`](crate::Event::FirstRequest).
    pub(crate) first_request: FirstRequest,

    // Requester.
    pub(crate) sq: [SendWr; MAX_SEND_WR],
    /// Oldest WR not yet completed to the driver.
    pub(crate) sq_head: u32,
    /// MSN of the next WR to post.
    pub(crate) next_msn: u32,
    /// Next new segment to send: WR MSN and segment index.
    pub(crate) send_msn: u32,
    pub(crate) send_seg: u32,
    pub(crate) next_ssn: u32,
    pub(crate) next_rsn: u32,
    /// Acknowledged request SSNs (base: oldest unacknowledged).
    pub(crate) req_acked: ReasmWindow,
    /// Received response SSNs.
    pub(crate) resp_rx: ReasmWindow,

    // Responder.
    pub(crate) rq: [RecvWqe; MAX_RECV_WR],
    /// RSN of the oldest receive not yet completed to the driver.
    pub(crate) rq_head: u32,
    /// RSN the next posted receive gets.
    pub(crate) rq_tail: u32,
    /// Received request SSNs.
    pub(crate) req_rx: ReasmWindow,
    pub(crate) msgs: [RxMsg; MAX_RX_MSGS],
    /// Next MSN to deliver in order.
    pub(crate) deliver_msn: u32,
    pub(crate) responses: [Response; MAX_RESPONSES],
    pub(crate) resp_head: u32,
    pub(crate) resp_tail: u32,
    pub(crate) next_resp_ssn: u32,
    /// Acknowledged response SSNs.
    pub(crate) resp_acked: ReasmWindow,
}

impl Qp {
    /// Whether a READ or ATOMIC request may be sent now ([`Qp::rd_atomic_limit`]).
    pub(crate) fn rd_atomic_room(&self) -> bool {
        self.rd_atomic_limit == 0 || self.rd_atomic_out < u32::from(self.rd_atomic_limit)
    }

    /// Counts the READ or ATOMIC request of the work request `msn` as outstanding
    /// (at its first transmission).
    pub(crate) fn rd_atomic_sent(&mut self, msn: u32) {
        if self.rd_atomic_out == 0 {
            self.rd_atomic_msn = msn;
        }
        self.rd_atomic_out = self.rd_atomic_out.saturating_add(1);
    }

    /// Releases the outstanding READ and ATOMIC requests whose responses are
    /// complete, oldest first (responses complete in request order: their SSNs
    /// follow it).
    //= Documentation/metaroce/spec.rst#read-and-atomic-limits
    pub(crate) fn release_rd_atomic(&mut self) {
        while self.rd_atomic_out > 0 && seq_diff(self.send_msn, self.rd_atomic_msn) > 0 {
            let Some(w) = self.sq_slot(self.rd_atomic_msn) else {
                break;
            };
            if w.wr.opcode.has_response() {
                if w.resp_last_ssn
                    .is_none_or(|l| seq_diff(self.resp_rx.base(), l) <= 0)
                {
                    break;
                }
                self.rd_atomic_out -= 1;
            }
            self.rd_atomic_msn = self.rd_atomic_msn.wrapping_add(1);
        }
    }

    /// The next never-sent request segment: its work request and SSN, if the QP is
    /// active, has no error and has one.
    pub(crate) fn next_request(&self) -> Option<(&SendWr, u32)> {
        if self.state != QpState::Active || self.error.is_some() || self.send_msn == self.next_msn {
            return None;
        }
        let w = self.sq.get(self.send_msn as usize % MAX_SEND_WR)?;
        Some((w, w.ssn_first.wrapping_add(self.send_seg)))
    }

    pub(crate) fn sq_slot(&self, msn: u32) -> Option<&SendWr> {
        self.sq
            .get(msn as usize % MAX_SEND_WR)
            .filter(|w| w.msn == msn && self.sq_outstanding(msn))
    }

    pub(crate) fn sq_slot_mut(&mut self, msn: u32) -> Option<&mut SendWr> {
        if !self.sq_outstanding(msn) {
            return None;
        }
        self.sq
            .get_mut(msn as usize % MAX_SEND_WR)
            .filter(|w| w.msn == msn)
    }

    /// Whether `msn` is posted and not yet completed.
    pub(crate) fn sq_outstanding(&self, msn: u32) -> bool {
        let d = msn.wrapping_sub(self.sq_head);
        d < self.next_msn.wrapping_sub(self.sq_head)
    }

    pub(crate) fn response(&self, msn: u32) -> Option<(u32, &Response)> {
        let mut i = self.resp_head;
        while i != self.resp_tail {
            let r = self.responses.get(i as usize % MAX_RESPONSES)?;
            if r.msn == msn {
                return Some((i, r));
            }
            i = i.wrapping_add(1);
        }
        None
    }

    pub(crate) fn responses_full(&self) -> bool {
        self.responses_in_use() >= MAX_RESPONSES
    }

    /// Responses held until the requester acknowledges them.
    pub(crate) fn responses_in_use(&self) -> usize {
        self.resp_tail.wrapping_sub(self.resp_head) as usize
    }

    /// Frees responses whose every segment the requester acknowledged.
    pub(crate) fn reclaim_responses(&mut self) {
        while self.resp_head != self.resp_tail {
            let Some(r) = self.responses.get(self.resp_head as usize % MAX_RESPONSES) else {
                break;
            };
            if r.sent_segs < r.nsegs
                || crate::psn::seq_diff(self.resp_acked.base(), r.last_ssn()) <= 0
            {
                break;
            }
            self.resp_head = self.resp_head.wrapping_add(1);
        }
    }

    /// Puts the QP in the error state (first error wins).
    pub(crate) fn fail(&mut self, status: WcStatus) {
        if self.error.is_none() {
            self.error = Some(status);
        }
    }

    /// Fails the QP with `status` if it has send work: the oldest request
    /// completes with it and the rest are flushed ([MR-CMP-6]). Returns
    /// whether it had any.
    pub(crate) fn fail_oldest(&mut self, status: WcStatus) -> bool {
        let head = self.sq_head;
        if head == self.next_msn {
            return false;
        }
        if let Some(w) = self.sq_slot_mut(head) {
            w.status.get_or_insert(status);
        }
        self.fail(status);
        true
    }

    /// Loss detection `detection` (a path timeout, or an ACK block's SACK gap)
    /// found one of this QP's request packets lost. Counted once per detection;
    /// a run of them with none of the QP's request packets acknowledged in
    /// between that exhausts the QP's `retry_limit` ([`Config::retries_exhausted`])
    /// fails the QP with `RetryExcErr`, however well the connection's other QPs
    /// fare: the peer drops what this one sends.
    //= Documentation/metaroce/spec.rst#qp-retry-limit
    pub(crate) fn request_lost(&mut self, detection: u32, now: Instant, cfg: &Config) {
        if self.state != QpState::Active
            || (self.lost_in_a_row > 0 && self.last_loss_detection == detection)
        {
            return;
        }
        if self.lost_in_a_row == 0 {
            self.loss_run_since = now;
        }
        self.last_loss_detection = detection;
        self.lost_in_a_row = self.lost_in_a_row.saturating_add(1);
        if cfg.retries_exhausted(
            self.retry_limit,
            self.lost_in_a_row,
            self.loss_run_since,
            now,
        ) {
            self.fail_oldest(WcStatus::RetryExcErr);
        }
    }

    /// The responder refused a request: the QP fails ([MR-CMP-8]) and, if this
    /// failed it, reports why ([MR-CMP-10]). A status that refuses nothing changes
    /// nothing.
    pub(crate) fn fail_responder(&mut self, status: Status) {
        let error = match status {
            Status::Ok => return,
            Status::AccessError => Some(ResponderError::Access),
            Status::InvalidRequest => Some(ResponderError::InvalidRequest),
            // The responder's own failure, not the request's: the QP error says it.
            Status::RemoteOpError => None,
        };
        if self.error.is_none() {
            self.responder_error = error;
        }
        self.fail(WcStatus::RemAccessErr);
    }
}

/// The peer's first request to a QP's responder ([`Qp::first_request`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum FirstRequest {
    /// None has come yet.
    Awaited,
    /// One came; not reported yet.
    Arrived,
    /// Reported.
    Reported,
}

impl Qp {
    /// A free slot, built in place (a QP is about 20 KiB).
    pub(crate) fn init() -> impl Init<Self> {
        init!(Qp {
            state: QpState::Free,
            local_qpn: 0,
            remote_qpn: 0,
            error: None,
            resp_err: None,
            rnr_retry: 7,
            retry_limit: 7,
            lost_in_a_row: 0,
            last_loss_detection: 0,
            loss_run_since: Instant::ZERO,
            rd_atomic_limit: 0,
            rd_atomic_out: 0,
            rd_atomic_msn: 0,
            error_reported: false,
            sq_flushing: false,
            responder_error: None,
            first_request: FirstRequest::Awaited,
            sq <- init_array_from_fn(|_| SendWr::default()),
            sq_head: 0,
            next_msn: 0,
            send_msn: 0,
            send_seg: 0,
            next_ssn: 0,
            next_rsn: 0,
            req_acked: ReasmWindow::default(),
            resp_rx: ReasmWindow::default(),
            rq <- init_array_from_fn(|_| RecvWqe::default()),
            rq_head: 0,
            rq_tail: 0,
            req_rx: ReasmWindow::default(),
            msgs <- init_array_from_fn(|_| RxMsg::default()),
            deliver_msn: 0,
            responses <- init_array_from_fn(|_| Response::default()),
            resp_head: 0,
            resp_tail: 0,
            next_resp_ssn: 0,
            resp_acked: ReasmWindow::default(),
        })
    }

    /// Unbinds the QP ([MR-QP-3]). One that received requests keeps their record
    /// (and its QPN) as a closed QP: the peer's retransmissions of what it received
    /// are then acknowledged, not dropped ([MR-QP-8]), so that a last ACK lost
    /// after the application destroyed its QP does not fail the peer's request.
    /// Anything else is freed.
    //= Documentation/metaroce/spec.rst#streams
    pub(crate) fn close(&mut self) {
        if self.state != QpState::Active || self.first_request == FirstRequest::Awaited {
            self.reset();
            return;
        }
        let (qpn, received) = (self.local_qpn, self.req_rx.clone());
        self.reset();
        self.state = QpState::Closed;
        self.local_qpn = qpn;
        self.req_rx = received;
    }

    /// Whether this is a closed QP ([`Qp::close`]) numbered `qpn` that received
    /// request segment `ssn`.
    pub(crate) fn closed_and_received(&self, qpn: u32, ssn: u32) -> bool {
        self.state == QpState::Closed && self.local_qpn == qpn && self.req_rx.get(ssn) == Some(true)
    }

    /// Makes this a free slot (as [`Qp::init`]) in place.
    pub(crate) fn reset(&mut self) {
        self.state = QpState::Free;
        self.local_qpn = 0;
        self.remote_qpn = 0;
        self.error = None;
        self.resp_err = None;
        self.rnr_retry = 7;
        self.retry_limit = 7;
        self.lost_in_a_row = 0;
        self.last_loss_detection = 0;
        self.loss_run_since = Instant::ZERO;
        self.rd_atomic_limit = 0;
        self.rd_atomic_out = 0;
        self.rd_atomic_msn = 0;
        self.error_reported = false;
        self.sq_flushing = false;
        self.responder_error = None;
        self.first_request = FirstRequest::Awaited;
        self.sq.iter_mut().for_each(|w| *w = SendWr::default());
        self.sq_head = 0;
        self.next_msn = 0;
        self.send_msn = 0;
        self.send_seg = 0;
        self.next_ssn = 0;
        self.next_rsn = 0;
        self.req_acked.reset(0);
        self.resp_rx.reset(0);
        self.rq.iter_mut().for_each(|w| *w = RecvWqe::default());
        self.rq_head = 0;
        self.rq_tail = 0;
        self.req_rx.reset(0);
        self.msgs.iter_mut().for_each(|m| *m = RxMsg::default());
        self.deliver_msn = 0;
        self.responses
            .iter_mut()
            .for_each(|r| *r = Response::default());
        self.resp_head = 0;
        self.resp_tail = 0;
        self.next_resp_ssn = 0;
        self.resp_acked.reset(0);
    }
}
