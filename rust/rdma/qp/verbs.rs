// SPDX-License-Identifier: GPL-2.0

//! The QP verbs past the device's part (create, destroy, post) and the object the core
//! allocates for a QP; the device's limits, quota and driver hooks are the verbs
//! layer's (`verbs/qp.rs`).

use super::{
    attr::{QpCaps, QpInit, QpType},
    kernel_queue::{create_kernel_qp, post_kernel_sends, KernelBuffers, KernelQueues, KernelRecv},
    state::QpState,
    Inner, Qp, QpAttributes,
};
use crate::object::Object;
use crate::{
    bindings,
    cq::{Cq, CqObject},
    mmap::MmapInfo,
    mr::PdId,
    queue::{Direction, Queue},
    quota::Quota,
    ring::{WorkQueue, RECV_WQE_HDR, SEND_WQE_HDR, SGE_SIZE},
    srq::{Srq, SrqObject},
    table::Table,
    udata::UData,
    wqe::{MAX_INLINE, MAX_SGE},
};
use core::ptr::NonNull;
use kernel::{
    error::from_result, new_mutex, new_spinlock_irq, prelude::*, sync::Arc, transmute::AsBytes,
};

/// `struct rxe_create_qp_resp`.
#[repr(C)]
struct CreateQpResp {
    rq_mi: MmapInfo,
    sq_mi: MmapInfo,
}

// SAFETY: `repr(C)` of `AsBytes` structs without padding.
unsafe impl AsBytes for CreateQpResp {}

/// The core's `ib_qp` followed by ours.
pub(crate) type QpObject<D> = Object<bindings::ib_qp, Qp<D>>;

/// The device's limits on a QP's work queues.
pub(crate) struct QpLimits {
    /// Most work requests per queue.
    pub(crate) max_qp_wr: u32,
    /// Most SGEs per send work request.
    pub(crate) max_send_sge: u32,
    /// Most SGEs per receive work request.
    pub(crate) max_recv_sge: u32,
}

/// QP numbers: 0 and 1 are the special QPs, rdma_rxe starts its pool at 16 too.
pub(crate) const QPN_MIN: u32 = 16;
pub(crate) const QPN_MAX: u32 = (1 << 24) - 1;

/// `create_qp` within the device's `limits`: the work queues (rings shared with user
/// space, or a kernel consumer's queues), the QP entered in `qps` with the driver's
/// data from `new`.
///
/// # Safety
///
/// `ibqp` is a live QP of one of our devices whose driver part the core zeroed; `init`
/// and `udata` are the verb's valid arguments.
pub(crate) unsafe fn create<D: Send + Sync>(
    ibqp: *mut bindings::ib_qp,
    init: *mut bindings::ib_qp_init_attr,
    udata: *mut bindings::ib_udata,
    limits: &QpLimits,
    qps: &Table<Qp<D>>,
    new: impl FnOnce(&QpInit) -> Result<D>,
) -> Result {
    // SAFETY: Valid arguments of the verb (the function's contract).
    let (init, udata) = unsafe { (&mut *init, UData::from_raw(udata)) };
    if init.create_flags != 0 || !init.xrcd.is_null() || !init.rwq_ind_tbl.is_null() {
        return Err(EOPNOTSUPP);
    }
    let qp_type = match init.qp_type {
        bindings::ib_qp_type_IB_QPT_RC => QpType::Rc,
        bindings::ib_qp_type_IB_QPT_UD => QpType::Ud,
        bindings::ib_qp_type_IB_QPT_GSI => QpType::Gsi,
        _ => return Err(EOPNOTSUPP),
    };
    let Some(udata) = udata else {
        // SAFETY: As above.
        return unsafe { create_kernel_qp(ibqp, init, qp_type, limits, qps, new) };
    };
    if qp_type == QpType::Gsi {
        return Err(EINVAL);
    }
    if udata.inlen() != 0 || udata.outlen() < size_of::<CreateQpResp>() {
        return Err(EINVAL);
    }
    if init.send_cq.is_null() || init.recv_cq.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: CQs of our device, held by the core for the QP's life.
    let (send_cq, recv_cq) =
        unsafe { (CqObject::get(init.send_cq)?, CqObject::get(init.recv_cq)?) };
    let srq = if init.srq.is_null() {
        None
    } else {
        // SAFETY: An SRQ of our device, held by the core for the QP's life.
        Some(unsafe { SrqObject::get(init.srq)? })
    };
    if srq.is_some() {
        // The receive ring attributes are ignored with an SRQ (IB spec 11.2.4.1).
        init.cap.max_recv_wr = 0;
        init.cap.max_recv_sge = 0;
    }
    let cap = &mut init.cap;
    if cap.max_send_wr > limits.max_qp_wr
        || cap.max_recv_wr > limits.max_qp_wr
        || cap.max_send_sge > limits.max_send_sge.min(MAX_SGE as u32)
        || cap.max_recv_sge > limits.max_recv_sge.min(MAX_SGE as u32)
        || cap.max_inline_data as usize > MAX_INLINE
    {
        return Err(EINVAL);
    }
    let uctx = udata.ucontext();
    // The send ring, sized like rdma_rxe's: the larger of the SGEs and the inline data.
    let room = (cap.max_send_sge as usize * SGE_SIZE).max(cap.max_inline_data as usize);
    // SAFETY: The user context is live during the verb.
    let sq = unsafe {
        Queue::new(
            uctx,
            cap.max_send_wr,
            SEND_WQE_HDR + room,
            Direction::FromClient,
        )?
    };
    let rq_elem = RECV_WQE_HDR + cap.max_recv_sge as usize * SGE_SIZE;
    let rq = match srq {
        Some(_) => None,
        None => {
            // SAFETY: As above.
            Some(unsafe { Queue::new(uctx, cap.max_recv_wr, rq_elem, Direction::FromClient)? })
        }
    };
    let caps = QpCaps {
        max_send_wr: sq.capacity(),
        max_recv_wr: rq.as_ref().map_or(0, Queue::capacity),
        max_send_sge: (room / SGE_SIZE) as u32,
        max_recv_sge: cap.max_recv_sge,
        max_inline_data: room as u32,
    };
    udata.write(&CreateQpResp {
        rq_mi: rq.as_ref().map(Queue::info).unwrap_or_default(),
        sq_mi: sq.info(),
    })?;
    let sq_sig_all = init.sq_sig_type == bindings::ib_sig_type_IB_SIGNAL_ALL_WR;
    // SAFETY: The QP's PD is live.
    let pd = PdId::from_raw(unsafe { (*ibqp).pd });
    let mut parts = Some(QpParts {
        ibqp,
        qp_type,
        pd,
        send_cq,
        recv_cq,
        caps,
        sq_sig_all,
        srq,
        sq: Some(WorkQueue {
            queue: sq,
            max_sge: caps.max_send_sge as usize,
            max_inline: caps.max_inline_data as usize,
        }),
        rq: rq.map(|queue| WorkQueue {
            queue,
            max_sge: caps.max_recv_sge as usize,
            max_inline: 0,
        }),
        kq: None,
    });
    let qpn = qps.insert_with(|qpn| parts.take().ok_or(EINVAL)?.build(qpn, new))?;
    let qp = qps.get(qpn).ok_or(EINVAL)?;
    cap.max_send_wr = caps.max_send_wr;
    cap.max_recv_wr = caps.max_recv_wr;
    cap.max_send_sge = caps.max_send_sge;
    cap.max_recv_sge = caps.max_recv_sge;
    cap.max_inline_data = caps.max_inline_data;
    // SAFETY: The core zeroed our part; nobody else sees the QP yet.
    unsafe {
        (*ibqp).qp_num = qpn;
        QpObject::<D>::from_raw_mut(ibqp).obj = Some(qp);
    }
    Ok(())
}

/// What a new QP is made of: its work queues (rings mapped by user space, or a kernel
/// consumer's queues) and attributes.
pub(super) struct QpParts {
    pub(super) ibqp: *mut bindings::ib_qp,
    pub(super) qp_type: QpType,
    pub(super) pd: PdId,
    pub(super) send_cq: Arc<Cq>,
    pub(super) recv_cq: Arc<Cq>,
    pub(super) caps: QpCaps,
    pub(super) sq_sig_all: bool,
    pub(super) srq: Option<Arc<Srq>>,
    pub(super) sq: Option<WorkQueue>,
    pub(super) rq: Option<WorkQueue>,
    pub(super) kq: Option<KernelQueues>,
}

impl QpParts {
    /// The QP numbered `qpn`, with the driver's data from `new`.
    pub(super) fn build<D>(
        self,
        qpn: u32,
        new: impl FnOnce(&QpInit) -> Result<D>,
    ) -> Result<Arc<Qp<D>>> {
        let (caps, sq_sig_all, qp_type) = (self.caps, self.sq_sig_all, self.qp_type);
        let data = new(&QpInit {
            qpn,
            caps,
            sq_sig_all,
            qp_type,
        })?;
        let kernel = self.kq.is_some();
        // SAFETY: Not NULL: the core passed it to `create_qp`.
        let ib = unsafe { NonNull::new_unchecked(self.ibqp) };
        Arc::pin_init(
            pin_init!(Qp::<D> {
                qpn,
                qp_type,
                pd: self.pd,
                send_cq: self.send_cq,
                recv_cq: self.recv_cq,
                caps,
                sq_sig_all,
                srq: self.srq,
                kq <- new_spinlock_irq!(self.kq, "metaroce_kq"),
                kernel,
                sq <- new_spinlock_irq!(self.sq, "metaroce_sq"),
                rq <- new_spinlock_irq!(self.rq, "metaroce_rq"),
                inner <- new_spinlock_irq!(Inner {
                    attrs: QpAttributes::default(),
                    ib: Some(ib),
                }, "metaroce_qp"),
                modify <- new_mutex!((), "metaroce_qp_modify"),
                data,
            }),
            GFP_KERNEL,
        )
    }
}

pub(crate) unsafe extern "C" fn post_recv<D>(
    ibqp: *mut bindings::ib_qp,
    mut wr: *const bindings::ib_recv_wr,
    bad_wr: *mut *const bindings::ib_recv_wr,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: Live QP of our live device.
        let (qp, lkey) = unsafe { (QpObject::<D>::get(ibqp)?, (*(*ibqp).device).local_dma_lkey) };
        while !wr.is_null() {
            let r = if !qp.kernel || qp.state() == QpState::Reset {
                Err(EINVAL)
            } else {
                // SAFETY: The consumer's valid chain; buffers kept until completion.
                unsafe { KernelBuffers::from_raw((*wr).sg_list, (*wr).num_sge, lkey) }.and_then(
                    |buffers| {
                        // SAFETY: Integer union member.
                        let wr_id = unsafe { (*wr).__bindgen_anon_1.wr_id };
                        Option::as_mut(&mut *qp.kq.lock())
                            .ok_or(EINVAL)?
                            .rq
                            .push(KernelRecv { wr_id, buffers })
                    },
                )
            };
            if let Err(e) = r {
                if !bad_wr.is_null() {
                    // SAFETY: Valid for writes (checked).
                    unsafe { *bad_wr = wr };
                }
                return Err(e);
            }
            // SAFETY: A valid element of the chain.
            wr = unsafe { (*wr).next };
        }
        if qp.state() == QpState::Err {
            qp.flush_recv_queue();
        }
        Ok(0)
    })
}

/// `destroy_qp`: takes the QP out of `qps`, gives back its `quota`, lets the driver
/// stop its work on it (`destroying`; it may still hold references afterwards) and
/// unmaps its rings.
///
/// # Safety
///
/// The core destroys `ibqp`, a live QP of ours, once, when no other verb runs on it.
pub(crate) unsafe fn destroy<D: Send + Sync>(
    ibqp: *mut bindings::ib_qp,
    quota: &Quota,
    qps: &Table<Qp<D>>,
    destroying: impl FnOnce(&Arc<Qp<D>>),
) {
    // SAFETY: Per the function's contract.
    let obj = unsafe { QpObject::<D>::from_raw_mut(ibqp) };
    let Some(qp) = obj.obj.take() else {
        return;
    };
    quota.put();
    qps.remove(qp.qpn);
    // Not during a transition: the driver's reaction to it has finished.
    {
        let _modify = qp.modify.lock();
        destroying(&qp);
    }
    qp.inner.lock().ib = None;
    // Unmap the rings now, in process context, while the user context is live.
    let sq = qp.sq.lock().take();
    let rq = qp.rq.lock().take();
    let kq = qp.kq.lock().take();
    drop((sq, rq, kq));
}

/// `post_send`: a kernel consumer's work requests go into its send queue (user space
/// writes its ring itself), then `doorbell` tells the driver.
///
/// # Safety
///
/// `ibqp` is a live QP of our live device; `wr` is the consumer's valid chain, whose
/// buffers stay valid until each completes; `bad_wr` is valid for writes or NULL.
pub(crate) unsafe fn post_send<D>(
    ibqp: *mut bindings::ib_qp,
    wr: *const bindings::ib_send_wr,
    bad_wr: *mut *const bindings::ib_send_wr,
    doorbell: impl FnOnce(&Arc<Qp<D>>) -> Result,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: Per the function's contract.
        let (qp, lkey) = unsafe { (QpObject::<D>::get(ibqp)?, (*(*ibqp).device).local_dma_lkey) };
        if qp.state() < QpState::Rts {
            if !bad_wr.is_null() {
                // SAFETY: `bad_wr` is valid for writes when not NULL.
                unsafe { *bad_wr = wr };
            }
            return Err(EINVAL);
        }
        if qp.kernel {
            // SAFETY: A kernel consumer's chain of UD work requests.
            unsafe { post_kernel_sends(lkey, &qp, wr, bad_wr)? };
        }
        // User QPs post through the ring; the verb only rings the doorbell.
        doorbell(&qp)?;
        Ok(0)
    })
}
