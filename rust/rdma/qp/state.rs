// SPDX-License-Identifier: GPL-2.0

//! The QP state machine: `modify_qp` requests, their checks and the transitions.

use super::{
    attr::{mask, QpAttributes, QpCaps},
    verbs::QpObject,
    Qp,
};
use crate::{av::AddressVector, bindings, mr::Access, mtu::Mtu};
use kernel::{prelude::*, sync::Arc};

/// A QP state (`enum ib_qp_state`).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
#[repr(u32)]
pub enum QpState {
    /// Reset.
    Reset = bindings::ib_qp_state_IB_QPS_RESET,
    /// Initialised: receives may be posted.
    Init = bindings::ib_qp_state_IB_QPS_INIT,
    /// Ready to receive.
    Rtr = bindings::ib_qp_state_IB_QPS_RTR,
    /// Ready to send.
    Rts = bindings::ib_qp_state_IB_QPS_RTS,
    /// Send queue drained.
    Sqd = bindings::ib_qp_state_IB_QPS_SQD,
    /// Send queue error.
    Sqe = bindings::ib_qp_state_IB_QPS_SQE,
    /// Error: every work request is flushed.
    Err = bindings::ib_qp_state_IB_QPS_ERR,
}

impl QpState {
    fn from_raw(v: u32) -> Result<Self> {
        Ok(match v {
            bindings::ib_qp_state_IB_QPS_RESET => Self::Reset,
            bindings::ib_qp_state_IB_QPS_INIT => Self::Init,
            bindings::ib_qp_state_IB_QPS_RTR => Self::Rtr,
            bindings::ib_qp_state_IB_QPS_RTS => Self::Rts,
            bindings::ib_qp_state_IB_QPS_SQD => Self::Sqd,
            bindings::ib_qp_state_IB_QPS_SQE => Self::Sqe,
            bindings::ib_qp_state_IB_QPS_ERR => Self::Err,
            _ => return Err(EINVAL),
        })
    }
}

/// A `modify_qp` request: `mask` tells which fields of `attrs` are set.
#[derive(Clone, Copy, Debug)]
pub struct ModifyQp {
    /// `mask::*` bits.
    pub mask: u32,
    /// State before the transition.
    pub cur_state: QpState,
    /// State after it.
    pub new_state: QpState,
    /// The requested values (only those in `mask` are meaningful).
    pub attrs: QpAttributes,
    /// Requested capacities (`mask::CAP`).
    pub caps: QpCaps,
}

impl ModifyQp {
    /// Returns `true` when `bit` (a `mask::*` constant) is set.
    pub fn has(&self, bit: u32) -> bool {
        self.mask & bit != 0
    }

    fn apply(&self, to: &mut QpAttributes) {
        let a = &self.attrs;
        to.state = self.new_state;
        if self.has(mask::EN_SQD_ASYNC_NOTIFY) {
            to.en_sqd_async_notify = a.en_sqd_async_notify;
        }
        if self.has(mask::ACCESS_FLAGS) {
            to.access = a.access;
        }
        if self.has(mask::PKEY_INDEX) {
            to.pkey_index = a.pkey_index;
        }
        if self.has(mask::PORT) {
            to.port_num = a.port_num;
        }
        if self.has(mask::QKEY) {
            to.qkey = a.qkey;
        }
        if self.has(mask::AV) {
            to.av = a.av;
        }
        if self.has(mask::PATH_MTU) {
            to.path_mtu = a.path_mtu;
        }
        if self.has(mask::TIMEOUT) {
            to.timeout = a.timeout;
        }
        if self.has(mask::RETRY_CNT) {
            to.retry_cnt = a.retry_cnt;
        }
        if self.has(mask::RNR_RETRY) {
            to.rnr_retry = a.rnr_retry;
        }
        if self.has(mask::RQ_PSN) {
            to.rq_psn = a.rq_psn & 0xff_ffff;
        }
        if self.has(mask::SQ_PSN) {
            to.sq_psn = a.sq_psn & 0xff_ffff;
        }
        if self.has(mask::MAX_QP_RD_ATOMIC) {
            to.max_rd_atomic = a.max_rd_atomic;
        }
        if self.has(mask::MAX_DEST_RD_ATOMIC) {
            to.max_dest_rd_atomic = a.max_dest_rd_atomic;
        }
        if self.has(mask::MIN_RNR_TIMER) {
            to.min_rnr_timer = a.min_rnr_timer;
        }
        if self.has(mask::DEST_QPN) {
            to.dest_qp_num = a.dest_qp_num & 0xff_ffff;
        }
    }
}

/// Reads a `modify_qp` request; checks what needs no QP state.
///
/// # Safety
///
/// `attr` is valid, with held GID attributes when `mask` has `AV` (the core's contract).
unsafe fn parse_modify(attr: &bindings::ib_qp_attr, m: u32) -> Result<ModifyQp> {
    let mut a = QpAttributes::default();
    if m & mask::AV != 0 {
        // SAFETY: Per the function's contract.
        a.av = Some(unsafe { AddressVector::from_raw(&attr.ah_attr)? });
    }
    if m & mask::PATH_MTU != 0 {
        a.path_mtu = Mtu::from_raw(attr.path_mtu).ok_or(EINVAL)?;
    }
    if m & mask::STATE != 0 {
        a.state = QpState::from_raw(attr.qp_state)?;
    }
    a.en_sqd_async_notify = attr.en_sqd_async_notify != 0;
    a.access = Access::from_bits(attr.qp_access_flags as u32);
    a.pkey_index = attr.pkey_index;
    a.port_num = attr.port_num;
    a.qkey = attr.qkey;
    a.timeout = attr.timeout;
    a.retry_cnt = attr.retry_cnt;
    a.rnr_retry = attr.rnr_retry;
    a.rq_psn = attr.rq_psn;
    a.sq_psn = attr.sq_psn;
    a.max_rd_atomic = attr.max_rd_atomic;
    a.max_dest_rd_atomic = attr.max_dest_rd_atomic;
    a.min_rnr_timer = attr.min_rnr_timer;
    a.dest_qp_num = attr.dest_qp_num;
    let caps = QpCaps {
        max_send_wr: attr.cap.max_send_wr,
        max_recv_wr: attr.cap.max_recv_wr,
        max_send_sge: attr.cap.max_send_sge,
        max_recv_sge: attr.cap.max_recv_sge,
        max_inline_data: attr.cap.max_inline_data,
    };
    let cur = if m & mask::CUR_STATE != 0 {
        QpState::from_raw(attr.cur_qp_state)?
    } else {
        QpState::Reset
    };
    Ok(ModifyQp {
        mask: m,
        cur_state: cur,
        new_state: a.state,
        attrs: a,
        caps,
    })
}

/// The checks of `rxe_qp_chk_attr` that need no driver policy.
fn check_values(req: &ModifyQp, caps: &QpCaps) -> Result {
    let a = &req.attrs;
    if req.has(mask::PORT) && a.port_num != 1 {
        return Err(EINVAL);
    }
    if req.has(mask::PKEY_INDEX) && a.pkey_index != 0 {
        return Err(EINVAL);
    }
    if req.has(mask::ACCESS_FLAGS) && !Access::SUPPORTED_QP.contains(a.access) {
        return Err(EINVAL);
    }
    if req.has(mask::TIMEOUT) && a.timeout > 31 {
        return Err(EINVAL);
    }
    if req.has(mask::RETRY_CNT) && a.retry_cnt > 7 {
        return Err(EINVAL);
    }
    if req.has(mask::RNR_RETRY) && a.rnr_retry > 7 {
        return Err(EINVAL);
    }
    if req.has(mask::MIN_RNR_TIMER) && a.min_rnr_timer > 31 {
        return Err(EINVAL);
    }
    if req.has(mask::AV) && a.av.is_some_and(|av| av.port_num != 1) {
        return Err(EINVAL);
    }
    if req.has(mask::ALT_PATH) || req.has(mask::PATH_MIG_STATE) {
        // No automatic path migration: MetaRoCE does multipath itself.
        return Err(EOPNOTSUPP);
    }
    if req.has(mask::CAP) {
        // The rings cannot be resized; accept only what already fits.
        let c = &req.caps;
        if c.max_send_wr > caps.max_send_wr
            || c.max_recv_wr > caps.max_recv_wr
            || c.max_send_sge > caps.max_send_sge
            || c.max_recv_sge > caps.max_recv_sge
            || c.max_inline_data > caps.max_inline_data
        {
            return Err(EINVAL);
        }
    }
    Ok(())
}

/// `modify_qp`: checks the request, lets the driver check it against the QP's
/// attributes (`check`), makes the transition and lets the driver react to it
/// (`modified`, given the states before and after), the QP's `modify` mutex held
/// throughout, so the driver sees the transitions one by one.
///
/// # Safety
///
/// `ibqp` is a live QP of ours; `attr` is valid for reads, with held GID attributes.
pub(crate) unsafe fn modify<D>(
    ibqp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_qp_attr,
    attr_mask: kernel::ffi::c_int,
    check: impl FnOnce(&Arc<Qp<D>>, &QpAttributes, &ModifyQp) -> Result,
    modified: impl FnOnce(&Arc<Qp<D>>, QpState, QpState),
) -> Result {
    let m = attr_mask as u32;
    if m & !mask::STANDARD != 0 {
        return Err(EOPNOTSUPP);
    }
    // SAFETY: Per the function's contract.
    let (qp, mut req) = unsafe { (QpObject::<D>::get(ibqp)?, parse_modify(&*attr, m)?) };
    check_values(&req, &qp.caps)?;
    // One transition at a time, each followed by the driver's reaction to it
    // before the next one starts.
    let _modify = qp.modify.lock();
    let from = {
        let mut inner = qp.inner.lock();
        let cur = if req.has(mask::CUR_STATE) {
            req.cur_state
        } else {
            inner.attrs.state
        };
        let new = if req.has(mask::STATE) {
            req.new_state
        } else {
            cur
        };
        req.cur_state = cur;
        req.new_state = new;
        // SAFETY: Pure function of its arguments.
        let ok =
            unsafe { bindings::ib_modify_qp_is_ok(cur as u32, new as u32, qp.qp_type as u32, m) };
        if !ok {
            return Err(EINVAL);
        }
        check(&qp, &inner.attrs, &req)?;
        let from = inner.attrs.state;
        req.apply(&mut inner.attrs);
        // RTS -> SQD starts draining the send queue; the driver says when it
        // is done. Leaving SQD ends it.
        inner.attrs.sq_draining = match (from, req.new_state) {
            (QpState::Rts, QpState::Sqd) => true,
            (QpState::Sqd, QpState::Sqd) => inner.attrs.sq_draining,
            _ => false,
        };
        from
    };
    modified(&qp, from, req.new_state);
    Ok(())
}
