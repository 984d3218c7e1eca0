// SPDX-License-Identifier: GPL-2.0

//! The attributes of a QP: the capacities it was created with, what `modify_qp`
//! stores and `query_qp` reports, and the `ib_qp_attr_mask` bits.

use super::{verbs::QpObject, QpState};
use crate::{av::AddressVector, bindings, mr::Access, mtu::Mtu};
use kernel::error::from_result;

/// `ib_qp_attr_mask` bits of a modify request.
pub mod mask {
    use crate::bindings;
    /// `qp_state`.
    pub const STATE: u32 = bindings::ib_qp_attr_mask_IB_QP_STATE;
    /// `cur_qp_state`.
    pub const CUR_STATE: u32 = bindings::ib_qp_attr_mask_IB_QP_CUR_STATE;
    /// `en_sqd_async_notify`.
    pub const EN_SQD_ASYNC_NOTIFY: u32 = bindings::ib_qp_attr_mask_IB_QP_EN_SQD_ASYNC_NOTIFY;
    /// `qp_access_flags`.
    pub const ACCESS_FLAGS: u32 = bindings::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS;
    /// `pkey_index`.
    pub const PKEY_INDEX: u32 = bindings::ib_qp_attr_mask_IB_QP_PKEY_INDEX;
    /// `port_num`.
    pub const PORT: u32 = bindings::ib_qp_attr_mask_IB_QP_PORT;
    /// `qkey`.
    pub const QKEY: u32 = bindings::ib_qp_attr_mask_IB_QP_QKEY;
    /// `ah_attr`.
    pub const AV: u32 = bindings::ib_qp_attr_mask_IB_QP_AV;
    /// `path_mtu`.
    pub const PATH_MTU: u32 = bindings::ib_qp_attr_mask_IB_QP_PATH_MTU;
    /// `timeout`.
    pub const TIMEOUT: u32 = bindings::ib_qp_attr_mask_IB_QP_TIMEOUT;
    /// `retry_cnt`.
    pub const RETRY_CNT: u32 = bindings::ib_qp_attr_mask_IB_QP_RETRY_CNT;
    /// `rnr_retry`.
    pub const RNR_RETRY: u32 = bindings::ib_qp_attr_mask_IB_QP_RNR_RETRY;
    /// `rq_psn`.
    pub const RQ_PSN: u32 = bindings::ib_qp_attr_mask_IB_QP_RQ_PSN;
    /// `max_rd_atomic`.
    pub const MAX_QP_RD_ATOMIC: u32 = bindings::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC;
    /// `alt_ah_attr` and friends.
    pub const ALT_PATH: u32 = bindings::ib_qp_attr_mask_IB_QP_ALT_PATH;
    /// `min_rnr_timer`.
    pub const MIN_RNR_TIMER: u32 = bindings::ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER;
    /// `sq_psn`.
    pub const SQ_PSN: u32 = bindings::ib_qp_attr_mask_IB_QP_SQ_PSN;
    /// `max_dest_rd_atomic`.
    pub const MAX_DEST_RD_ATOMIC: u32 = bindings::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC;
    /// `path_mig_state`.
    pub const PATH_MIG_STATE: u32 = bindings::ib_qp_attr_mask_IB_QP_PATH_MIG_STATE;
    /// `cap`.
    pub const CAP: u32 = bindings::ib_qp_attr_mask_IB_QP_CAP;
    /// `dest_qp_num`.
    pub const DEST_QPN: u32 = bindings::ib_qp_attr_mask_IB_QP_DEST_QPN;
    /// Every standard bit.
    pub const STANDARD: u32 = bindings::ib_qp_attr_mask_IB_QP_ATTR_STANDARD_BITS;
}

/// The capacities of a QP as created (what `ibv_query_qp` reports in `cap`).
#[derive(Clone, Copy, Debug, Default)]
pub struct QpCaps {
    /// Send ring capacity.
    pub max_send_wr: u32,
    /// Receive ring capacity (0 with an SRQ).
    pub max_recv_wr: u32,
    /// SGEs per send work request.
    pub max_send_sge: u32,
    /// SGEs per receive work request.
    pub max_recv_sge: u32,
    /// Inline bytes per send work request.
    pub max_inline_data: u32,
}

/// The attributes `modify_qp` stores and `query_qp` reports.
#[derive(Clone, Copy, Debug)]
pub struct QpAttributes {
    /// Current state.
    pub state: QpState,
    /// Asynchronous notification on entering SQD.
    pub en_sqd_async_notify: bool,
    /// SQD was entered from RTS and work started before it is not complete yet
    /// (set by `modify_qp`, cleared by [`Qp::sq_drained`]).
    pub sq_draining: bool,
    /// Access rights granted to remote peers.
    pub access: Access,
    /// P_Key index.
    pub pkey_index: u16,
    /// Port.
    pub port_num: u32,
    /// Q_Key (UD).
    pub qkey: u32,
    /// Path MTU.
    pub path_mtu: Mtu,
    /// Local ACK timeout (4.096 us * 2^timeout; 0 is infinite).
    pub timeout: u8,
    /// Transport retries.
    pub retry_cnt: u8,
    /// RNR retries (7 is infinite).
    pub rnr_retry: u8,
    /// Expected PSN of the next request received.
    pub rq_psn: u32,
    /// PSN of the next request sent.
    pub sq_psn: u32,
    /// Outstanding READ/atomic requests as requester.
    pub max_rd_atomic: u8,
    /// Outstanding READ/atomic requests as responder.
    pub max_dest_rd_atomic: u8,
    /// Minimum RNR NAK timer (encoded).
    pub min_rnr_timer: u8,
    /// Destination QP number.
    pub dest_qp_num: u32,
    /// Primary path.
    pub av: Option<AddressVector>,
}

impl Default for QpAttributes {
    fn default() -> Self {
        Self {
            state: QpState::Reset,
            en_sqd_async_notify: false,
            sq_draining: false,
            access: Access::default(),
            pkey_index: 0,
            port_num: 1,
            qkey: 0,
            path_mtu: Mtu::Mtu1024,
            timeout: 0,
            retry_cnt: 0,
            rnr_retry: 0,
            rq_psn: 0,
            sq_psn: 0,
            max_rd_atomic: 0,
            max_dest_rd_atomic: 0,
            min_rnr_timer: 0,
            dest_qp_num: 0,
            av: None,
        }
    }
}

/// What `create_qp` asked for, after validation and rounding.
#[derive(Clone, Copy, Debug)]
pub struct QpInit {
    /// The QP number allocated.
    pub qpn: u32,
    /// The capacities.
    pub caps: QpCaps,
    /// Every send work request generates a completion.
    pub sq_sig_all: bool,
    /// The transport service.
    pub qp_type: QpType,
}

/// The transport service of a QP (`enum ib_qp_type`): the ones the driver supports.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
pub enum QpType {
    /// Reliable connected.
    Rc = bindings::ib_qp_type_IB_QPT_RC,
    /// Unreliable datagram.
    Ud = bindings::ib_qp_type_IB_QPT_UD,
    /// The general services QP (QP1) of the RDMA core's MAD layer: a UD QP.
    Gsi = bindings::ib_qp_type_IB_QPT_GSI,
}

impl QpType {
    /// Whether the QP sends datagrams (UD or GSI).
    pub fn is_datagram(self) -> bool {
        matches!(self, Self::Ud | Self::Gsi)
    }
}

pub(crate) unsafe extern "C" fn query_qp<D>(
    ibqp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_qp_attr,
    _attr_mask: kernel::ffi::c_int,
    init: *mut bindings::ib_qp_init_attr,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: Live QP of ours; the outputs are valid for writes.
        let (qp, attr, init, ib) =
            unsafe { (QpObject::<D>::get(ibqp)?, &mut *attr, &mut *init, &*ibqp) };
        let a = qp.attributes();
        let c = qp.caps;
        let cap = bindings::ib_qp_cap {
            max_send_wr: c.max_send_wr,
            max_recv_wr: c.max_recv_wr,
            max_send_sge: c.max_send_sge,
            max_recv_sge: c.max_recv_sge,
            max_inline_data: c.max_inline_data,
            max_rdma_ctxs: 0,
        };
        attr.qp_state = a.state as u32;
        attr.cur_qp_state = a.state as u32;
        attr.path_mtu = a.path_mtu as u32;
        attr.path_mig_state = bindings::ib_mig_state_IB_MIG_MIGRATED;
        attr.qkey = a.qkey;
        attr.rq_psn = a.rq_psn;
        attr.sq_psn = a.sq_psn;
        attr.dest_qp_num = a.dest_qp_num;
        attr.qp_access_flags = a.access.bits() as i32;
        attr.cap = cap;
        if let Some(av) = &a.av {
            av.to_raw(&mut attr.ah_attr);
        }
        attr.pkey_index = a.pkey_index;
        attr.en_sqd_async_notify = a.en_sqd_async_notify.into();
        attr.sq_draining = a.sq_draining.into();
        attr.max_rd_atomic = a.max_rd_atomic;
        attr.max_dest_rd_atomic = a.max_dest_rd_atomic;
        attr.min_rnr_timer = a.min_rnr_timer;
        attr.port_num = a.port_num;
        attr.timeout = a.timeout;
        attr.retry_cnt = a.retry_cnt;
        attr.rnr_retry = a.rnr_retry;
        init.event_handler = ib.event_handler;
        init.qp_context = ib.qp_context;
        init.send_cq = ib.send_cq;
        init.recv_cq = ib.recv_cq;
        init.srq = ib.srq;
        init.cap = cap;
        init.sq_sig_type = if qp.sq_sig_all {
            bindings::ib_sig_type_IB_SIGNAL_ALL_WR
        } else {
            bindings::ib_sig_type_IB_SIGNAL_REQ_WR
        };
        init.qp_type = ib.qp_type;
        init.port_num = 1;
        Ok(0)
    })
}
