// SPDX-License-Identifier: GPL-2.0

//! Queue pairs (`struct ib_qp`) with the rxe user ABI: send and receive rings shared with
//! user space, the RC state machine and the stored attributes.
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h),
//! [`include/uapi/rdma/rdma_user_rxe.h`](srctree/include/uapi/rdma/rdma_user_rxe.h).
//!
//! User space writes `struct rxe_send_wqe` into the send ring and `struct rxe_recv_wqe`
//! into the receive ring itself, then rings the send doorbell (`ibv_post_send` issues a
//! POST_SEND with no work request), which reaches [`Driver::send_doorbell`]. The driver
//! reads the rings with [`Qp::sq_peek`]/[`Qp::sq_advance`] and
//! [`Qp::rq_peek`]/[`Qp::rq_advance`]: each parses a snapshot of the element and
//! bounds-checks whatever user space wrote (opcode, number of SGEs, inline length).
//!
//! `modify_qp` checks the transition and the attribute mask with `ib_modify_qp_is_ok`
//! and the values against the device, lets the driver check more
//! ([`Driver::check_modify_qp`]), stores the attributes and reports the transition
//! ([`Driver::qp_modified`]). [`Qp::flush_send_queue`] and [`Qp::flush_recv_queue`]
//! complete every waiting work request with `IBV_WC_WR_FLUSH_ERR`.
//!
//! uverbs runs `modify_qp` under a shared lock of the QP's object, so two threads may
//! modify one QP at once. Each QP's `modify` mutex serializes a transition with the
//! driver's reaction to it ([`Driver::qp_modified`]), and both with
//! [`Driver::qp_destroying`]: the driver sees the transitions one by one, in the order
//! they were made, as its bindings need.
//!
//! The code is split by concept: [`attr`] (capacities, stored attributes, `query_qp`),
//! [`state`] (the state machine, `modify_qp`), [`user_ring`] (reading the rings shared
//! with the rxe provider; their layout is `crate::ring`'s and work requests as parsed
//! [`crate::wqe`]'s), [`kernel_queue`] (a kernel consumer's queues) and [`verbs`]
//! (create, destroy, post and the core's object). The verbs layer (`verbs/qp.rs`) adds
//! the device's limits, quota and driver hooks; a QP knows only the driver's data for
//! it (`Qp<D>`), never the driver.

mod attr;
mod kernel_queue;
mod state;
mod user_ring;
mod verbs;

pub use crate::wqe::{
    walk_sges, BadWqe, RecvWqe, SendData, SendOpcode, SendWqe, Sge, SgeList, UdDest, WqeAddress,
    MAX_INLINE, MAX_SGE, SEND_FENCE, SEND_INLINE, SEND_SIGNALED, SEND_SOLICITED,
};
pub(crate) use attr::query_qp;
pub use attr::{mask, QpAttributes, QpCaps, QpInit, QpType};
pub use kernel_queue::{KernelBuffers, KernelRecv, KernelSend, GSI_QPN, KERNEL_MAX_SGE};
pub(crate) use state::modify;
pub use state::{ModifyQp, QpState};
pub(crate) use verbs::{
    create, destroy, post_recv, post_send, QpLimits, QpObject, QPN_MAX, QPN_MIN,
};

use crate::{
    bindings,
    cq::{Cq, WcOpcode, WorkCompletion},
    mr::PdId,
    ring::WorkQueue,
    srq::Srq,
};
use core::ptr::NonNull;
use kernel::{
    prelude::*,
    sync::{Arc, Mutex, SpinLockIrq},
};
use kernel_queue::KernelQueues;

/// Asynchronous QP events the driver raises (`enum ib_event_type`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
pub enum QpEvent {
    /// The QP went to the error state on its own.
    Fatal = bindings::ib_event_type_IB_EVENT_QP_FATAL,
    /// Invalid request received.
    ReqErr = bindings::ib_event_type_IB_EVENT_QP_REQ_ERR,
    /// Access violation at the responder.
    AccessErr = bindings::ib_event_type_IB_EVENT_QP_ACCESS_ERR,
    /// First packet received in RTR.
    CommEst = bindings::ib_event_type_IB_EVENT_COMM_EST,
    /// The send queue is drained (SQD).
    SqDrained = bindings::ib_event_type_IB_EVENT_SQ_DRAINED,
    /// Last WQE reached (SRQ).
    LastWqeReached = bindings::ib_event_type_IB_EVENT_QP_LAST_WQE_REACHED,
}

struct Inner {
    attrs: QpAttributes,
    /// The core's QP until `destroy_qp`.
    ib: Option<NonNull<bindings::ib_qp>>,
}

// SAFETY: `ib` is only used under the lock while the core's QP is live.
unsafe impl Send for Inner {}

/// A queue pair, with the driver's data `D` for it.
#[pin_data]
pub struct Qp<D> {
    qpn: u32,
    qp_type: QpType,
    pd: PdId,
    send_cq: Arc<Cq>,
    recv_cq: Arc<Cq>,
    caps: QpCaps,
    sq_sig_all: bool,
    /// The shared receive queue receives come from instead of `rq`.
    srq: Option<Arc<Srq>>,
    /// A kernel consumer's work queues (instead of `sq` and `rq`).
    #[pin]
    kq: SpinLockIrq<Option<KernelQueues>>,
    kernel: bool,
    #[pin]
    sq: SpinLockIrq<Option<WorkQueue>>,
    #[pin]
    rq: SpinLockIrq<Option<WorkQueue>>,
    #[pin]
    inner: SpinLockIrq<Inner>,
    /// Held across a `modify_qp` (the transition and [`Driver::qp_modified`]) and
    /// across [`Driver::qp_destroying`].
    #[pin]
    modify: Mutex<()>,
    data: D,
}
impl<D> Qp<D> {
    /// The QP number.
    pub fn qpn(&self) -> u32 {
        self.qpn
    }

    /// The protection domain.
    pub fn pd(&self) -> PdId {
        self.pd
    }

    /// The transport service.
    pub fn qp_type(&self) -> QpType {
        self.qp_type
    }

    /// Whether a kernel consumer owns the QP (its work requests come through
    /// [`Qp::kernel_send_pop`] and [`Qp::kernel_recv_pop`]).
    pub fn is_kernel(&self) -> bool {
        self.kernel
    }

    /// Adds a completion to the send CQ.
    pub fn push_send(&self, wc: &WorkCompletion) -> Result {
        let ib = self
            .inner
            .lock()
            .ib
            .map_or(core::ptr::null_mut(), NonNull::as_ptr);
        self.send_cq.push_for(wc, ib, false)
    }

    /// Adds a completion to the receive CQ; `solicited` as for [`Cq::push`].
    pub fn push_recv(&self, wc: &WorkCompletion, solicited: bool) -> Result {
        let ib = self
            .inner
            .lock()
            .ib
            .map_or(core::ptr::null_mut(), NonNull::as_ptr);
        self.recv_cq.push_for(wc, ib, solicited)
    }

    /// The shared receive queue, if the QP was created with one.
    pub fn srq(&self) -> Option<&Arc<Srq>> {
        self.srq.as_ref()
    }

    /// The completion queue of send work requests.
    pub fn send_cq(&self) -> &Arc<Cq> {
        &self.send_cq
    }

    /// The completion queue of receive work requests.
    pub fn recv_cq(&self) -> &Arc<Cq> {
        &self.recv_cq
    }

    /// The capacities.
    pub fn caps(&self) -> QpCaps {
        self.caps
    }

    /// Every send work request generates a completion (`sq_sig_all`).
    pub fn sq_sig_all(&self) -> bool {
        self.sq_sig_all
    }

    /// The driver's data.
    pub fn data(&self) -> &D {
        &self.data
    }

    /// A snapshot of the attributes.
    pub fn attributes(&self) -> QpAttributes {
        self.inner.lock().attrs
    }

    /// The current state.
    pub fn state(&self) -> QpState {
        self.inner.lock().attrs.state
    }

    /// Moves the QP to the error state on the transport's behalf (not a user request);
    /// returns the previous state. The caller then flushes and raises events.
    pub fn set_error(&self) -> QpState {
        let mut inner = self.inner.lock();
        let old = inner.attrs.state;
        inner.attrs.state = QpState::Err;
        inner.attrs.sq_draining = false;
        old
    }

    /// The send queue has drained in SQD (what was started before it completed):
    /// clears `sq_draining` and raises `IB_EVENT_SQ_DRAINED` if the transition to
    /// SQD asked for it (`en_sqd_async_notify`). Nothing if the QP was not draining.
    pub fn sq_drained(&self) {
        let notify = {
            let mut inner = self.inner.lock();
            if !inner.attrs.sq_draining {
                return;
            }
            inner.attrs.sq_draining = false;
            inner.attrs.en_sqd_async_notify
        };
        if notify {
            self.raise_event(QpEvent::SqDrained);
        }
    }

    /// Raises an asynchronous event to the QP's owner; nothing after `destroy_qp`.
    pub fn raise_event(&self, event: QpEvent) {
        let inner = self.inner.lock();
        let Some(ib) = inner.ib else {
            return;
        };
        let ib = ib.as_ptr();
        // SAFETY: The core's QP is live while set (cleared under this lock in
        // `destroy_qp`); the handler does not sleep (uverbs queues the event).
        unsafe {
            if let Some(handler) = (*ib).event_handler {
                let mut ev = bindings::ib_event {
                    device: (*ib).device,
                    event: event as u32,
                    ..Default::default()
                };
                ev.element.qp = ib;
                handler(&mut ev, (*ib).qp_context);
            }
        }
    }

    /// Completes every waiting send WQE with `IBV_WC_WR_FLUSH_ERR`; returns how many.
    /// Stops early when the CQ overflows (it raised its error event).
    pub fn flush_send_queue(&self) -> usize {
        let mut n = 0;
        while let Some(w) = self.kernel_send_pop() {
            if self
                .push_send(&WorkCompletion::flushed(w.wr_id, WcOpcode::Send, self.qpn))
                .is_err()
            {
                break;
            }
            n += 1;
        }
        let mut sq = self.sq.lock();
        let Some(wq) = Option::as_mut(&mut *sq) else {
            return 0;
        };
        let mut raw = [0u8; 16];
        while let Ok(true) = wq.queue.read_head(0, &mut raw) {
            // `wr_id` at 0, `opcode` at 12 of `struct rxe_send_wr`.
            let wr_id = u64::from_ne_bytes([
                raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7],
            ]);
            let op = u32::from_ne_bytes([raw[12], raw[13], raw[14], raw[15]]);
            let opcode = SendOpcode::from_raw(op).map_or(WcOpcode::Send, SendOpcode::wc_opcode);
            if self
                .push_send(&WorkCompletion::flushed(wr_id, opcode, self.qpn))
                .is_err()
            {
                break;
            }
            wq.queue.advance_consumer();
            n += 1;
        }
        n
    }

    /// Completes every waiting receive WQE with `IBV_WC_WR_FLUSH_ERR`; returns how many.
    pub fn flush_recv_queue(&self) -> usize {
        let mut n = 0;
        while let Some(w) = self.kernel_recv_pop() {
            if self
                .push_recv(
                    &WorkCompletion::flushed(w.wr_id, WcOpcode::Recv, self.qpn),
                    false,
                )
                .is_err()
            {
                break;
            }
            n += 1;
        }
        let mut rq = self.rq.lock();
        let Some(wq) = Option::as_mut(&mut *rq) else {
            return 0;
        };
        let mut raw = [0u8; 8];
        while let Ok(true) = wq.queue.read_head(0, &mut raw) {
            let wr_id = u64::from_ne_bytes(raw);
            let wc = WorkCompletion::flushed(wr_id, WcOpcode::Recv, self.qpn);
            if self.push_recv(&wc, false).is_err() {
                break;
            }
            wq.queue.advance_consumer();
            n += 1;
        }
        n
    }
}
