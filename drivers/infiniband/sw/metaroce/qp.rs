// SPDX-License-Identifier: GPL-2.0

//! Queue pairs: the driver's checks, the error-state flush and the send doorbell.
//!
//! The rxe ring mechanics, the state machine tables (`ib_modify_qp_is_ok`) and attribute
//! storage live in `rdma::qp`; this is the driver's policy on top. The transport will
//! hang its per-connection state off [`MetaRoceQp`] and take over [`on_send_doorbell`].

use crate::device::{MetaRoceDriver, MAX_RD_ATOMIC};
use kernel::{
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc,
    },
};
use rdma::{
    device::{Device, Mtu},
    qp::{mask, ModifyQp, Qp, QpAttributes, QpInit, QpState},
};

/// The driver's state of one QP.
pub(crate) struct MetaRoceQp {
    /// Send doorbells rung (a counter until the transport consumes the ring).
    doorbells: Atomic<u64>,
}

impl MetaRoceQp {
    pub(crate) fn new(_init: &QpInit) -> Self {
        Self {
            doorbells: Atomic::new(0),
        }
    }

    /// Send doorbells rung so far.
    #[expect(dead_code)]
    pub(crate) fn doorbells(&self) -> u64 {
        self.doorbells.load(Relaxed)
    }
}

/// Checks the values of a `modify_qp` request against the device's limits.
pub(crate) fn check_modify(cur: &QpAttributes, req: &ModifyQp) -> Result {
    let a = &req.attrs;
    if req.has(mask::MAX_QP_RD_ATOMIC) && u32::from(a.max_rd_atomic) > MAX_RD_ATOMIC {
        return Err(EINVAL);
    }
    if req.has(mask::MAX_DEST_RD_ATOMIC) && u32::from(a.max_dest_rd_atomic) > MAX_RD_ATOMIC {
        return Err(EINVAL);
    }
    // `Mtu` only has the IB MTUs, all of which the port supports (max 4096).
    if req.has(mask::PATH_MTU) && a.path_mtu.bytes() > Mtu::Mtu4096.bytes() {
        return Err(EINVAL);
    }
    // A connected QP needs its peer before it can receive.
    if cur.state == QpState::Init && req.new_state == QpState::Rtr {
        let av = if req.has(mask::AV) { a.av } else { cur.av };
        if av.is_none() {
            return Err(EINVAL);
        }
    }
    Ok(())
}

/// After a transition: entering the error state completes every outstanding work
/// request with `IBV_WC_WR_FLUSH_ERR`, receives first, as rdma_rxe does.
pub(crate) fn on_modified(qp: &Arc<Qp<MetaRoceDriver>>, _from: QpState, to: QpState) {
    if to == QpState::Err {
        qp.flush_recv_queue();
        qp.flush_send_queue();
    }
}

/// The send doorbell: the QP is in RTS or later. In the error state new WQEs are
/// flushed; otherwise they wait in the ring for the transport.
pub(crate) fn on_send_doorbell(_dev: &Device<MetaRoceDriver>, qp: &Arc<Qp<MetaRoceDriver>>) -> Result {
    qp.data().doorbells.fetch_add(1, Relaxed);
    if qp.state() == QpState::Err {
        qp.flush_send_queue();
    }
    Ok(())
}
