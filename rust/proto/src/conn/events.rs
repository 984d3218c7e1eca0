// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Completions are produced lazily: the state says what is complete, and
//! `poll_event` walks each QP's queues in order. Nothing is queued, so no
//! completion can be lost to a full queue.
//!
//= Documentation/metaroce/spec.rst#completion-ordering

use super::qp::{FirstRequest, QpState};
use super::store::{QpStore, QpStoreExt};
use super::{Connection, QpId};
use crate::cc::CongestionControl;
use crate::constants::{MAX_PENDING_EVENTS, MAX_RECV_WR};
use crate::event::{Completion, Event, WcOpcode, WcStatus};
use crate::psn::seq_diff;

impl<C: CongestionControl, S: QpStore> Connection<C, S> {
    /// Returns the next event: the QPs' first requests of the peer, connection
    /// events, then completions.
    ///
    /// A send work request completes once every segment is acknowledged (and
    /// for READ/atomics the whole response received) and every earlier one on
    /// its QP has completed. A receive completes once its message and every
    /// earlier message of the QP are placed.
    pub fn poll_event(&mut self) -> Option<Event> {
        if let Some(qp) = self.next_first_request() {
            return Some(Event::FirstRequest { qp });
        }
        self.report_qp_errors();
        if self.ev_len > 0 {
            let e = self.events.get_mut(self.ev_head).and_then(|e| e.take());
            self.ev_head = self.ev_head.wrapping_add(1) % MAX_PENDING_EVENTS;
            self.ev_len = self.ev_len.saturating_sub(1);
            if e.is_some() {
                return e;
            }
        }
        for i in 0..self.qps.len() {
            if let Some(c) = self.next_completion(i) {
                return Some(Event::Completion(c));
            }
        }
        None
    }

    /// A QP whose peer's first request is not reported yet; it is reported now.
    fn next_first_request(&mut self) -> Option<QpId> {
        if !self.first_requests {
            return None;
        }
        for i in 0..self.qps.len() {
            if let Some(q) = self.qps.qp_mut(i) {
                if q.first_request == FirstRequest::Arrived {
                    q.first_request = FirstRequest::Reported;
                    return Some(QpId(i as u16));
                }
            }
        }
        self.first_requests = false;
        None
    }

    fn next_completion(&mut self, qi: usize) -> Option<Completion> {
        let q = self.qps.qp_mut(qi)?;
        if q.state != QpState::Active {
            return None;
        }
        let qp = QpId(qi as u16);
        // Requester: the oldest outstanding send WR.
        if q.sq_head != q.next_msn {
            let head = q.sq_head;
            let w = *q.sq_slot(head)?;
            let acked = seq_diff(q.req_acked.base(), w.last_ssn()) > 0;
            let responded = !w.wr.opcode.has_response()
                || w.resp_last_ssn
                    .is_some_and(|l| seq_diff(q.resp_rx.base(), l) > 0);
            // After the first error completion the rest are flushed, even those
            // whose own response carried an error too ([MR-CMP-6]).
            //= Documentation/metaroce/spec.rst#completion-ordering
            let status = if q.sq_flushing {
                Some(WcStatus::WrFlushErr)
            } else if acked && responded {
                Some(w.status.unwrap_or(WcStatus::Success))
            } else {
                q.error.map(|_| w.status.unwrap_or(WcStatus::WrFlushErr))
            };
            if let Some(status) = status {
                if status != WcStatus::Success {
                    q.fail(status);
                    q.sq_flushing = true;
                }
                q.sq_head = head.wrapping_add(1);
                if seq_diff(q.send_msn, q.sq_head) < 0 {
                    q.send_msn = q.sq_head;
                    q.send_seg = 0;
                }
                return Some(Completion {
                    qp,
                    wr_id: w.wr.wr_id,
                    status,
                    opcode: w.wc_opcode(),
                    byte_len: if status == WcStatus::Success {
                        w.wr.len
                    } else {
                        0
                    },
                    imm: None,
                    solicited: false,
                });
            }
        }
        // Responder: the oldest posted receive.
        if q.rq_head != q.rq_tail {
            let r = *q.rq.get(q.rq_head as usize % MAX_RECV_WR)?;
            let done = match (r.done, q.error) {
                (Some((op, len, imm, sol)), _) => Some((WcStatus::Success, op, len, imm, sol)),
                (None, Some(_)) => Some((
                    q.resp_err.take().unwrap_or(WcStatus::WrFlushErr),
                    WcOpcode::Recv,
                    0,
                    None,
                    false,
                )),
                (None, None) => None,
            };
            if let Some((status, opcode, byte_len, imm, solicited)) = done {
                if let Some(slot) = q.rq.get_mut(q.rq_head as usize % MAX_RECV_WR) {
                    slot.done = None;
                }
                q.rq_head = q.rq_head.wrapping_add(1);
                return Some(Completion {
                    qp,
                    wr_id: r.wr_id,
                    status,
                    opcode,
                    byte_len,
                    imm,
                    solicited,
                });
            }
        }
        None
    }
}
