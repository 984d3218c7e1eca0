// SPDX-License-Identifier: GPL-2.0

//! The QP verbs of `ib_device_ops` (create, destroy, post, driver attributes) and the
//! object the core allocates for a QP.

use super::{
    attr::{QpCaps, QpInit, QpType},
    kernel_queue::{create_kernel_qp, post_kernel_sends, KernelBuffers, KernelQueues, KernelRecv},
    state::QpState,
    user_ring::{WorkQueue, RECV_WQE_HDR, SEND_WQE_HDR, SGE_SIZE},
    Inner, Qp, QpAttributes, MAX_INLINE, MAX_SGE,
};
use crate::object::Object;
use crate::{
    bindings,
    cq::{Cq, CqObject},
    device::{Device, Driver},
    mmap::MmapInfo,
    mr::PdId,
    queue::{Direction, Queue},
    srq::{Srq, SrqObject},
    udata::UData,
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
pub(crate) type QpObject<T> = Object<bindings::ib_qp, Qp<T>>;

/// QP numbers: 0 and 1 are the special QPs, rdma_rxe starts its pool at 16 too.
pub(crate) const QPN_MIN: u32 = 16;
pub(crate) const QPN_MAX: u32 = (1 << 24) - 1;

pub(crate) unsafe extern "C" fn create_qp<T: Driver>(
    ibqp: *mut bindings::ib_qp,
    init: *mut bindings::ib_qp_init_attr,
    udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: The core passes a live QP of one of our devices and valid arguments.
        let (dev, init, udata) = unsafe {
            (
                Device::<T>::from_raw((*ibqp).device),
                &mut *init,
                UData::from_raw(udata),
            )
        };
        if init.create_flags != 0 || !init.xrcd.is_null() || !init.rwq_ind_tbl.is_null() {
            return Err(EOPNOTSUPP);
        }
        let qp_type = match init.qp_type {
            bindings::ib_qp_type_IB_QPT_RC => QpType::Rc,
            bindings::ib_qp_type_IB_QPT_UD => QpType::Ud,
            bindings::ib_qp_type_IB_QPT_GSI => QpType::Gsi,
            _ => return Err(EOPNOTSUPP),
        };
        let taken = dev
            .objects()
            .quotas
            .qp
            .take(T::device_attributes(dev).max_qp)?;
        let Some(udata) = udata else {
            // SAFETY: As above.
            let created = unsafe { create_kernel_qp::<T>(ibqp, dev, init, qp_type) }?;
            taken.keep();
            return Ok(created);
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
        let lim = T::device_attributes(dev);
        let cap = &mut init.cap;
        if cap.max_send_wr > lim.max_qp_wr
            || cap.max_recv_wr > lim.max_qp_wr
            || cap.max_send_sge > lim.max_send_sge.min(MAX_SGE as u32)
            || cap.max_recv_sge > lim.max_recv_sge.min(MAX_SGE as u32)
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
        let qpn = dev
            .objects()
            .qps
            .insert_with(|qpn| parts.take().ok_or(EINVAL)?.build(dev, qpn))?;
        let qp = dev.objects().qps.get(qpn).ok_or(EINVAL)?;
        cap.max_send_wr = caps.max_send_wr;
        cap.max_recv_wr = caps.max_recv_wr;
        cap.max_send_sge = caps.max_send_sge;
        cap.max_recv_sge = caps.max_recv_sge;
        cap.max_inline_data = caps.max_inline_data;
        // SAFETY: The core zeroed our part; nobody else sees the QP yet.
        unsafe {
            (*ibqp).qp_num = qpn;
            QpObject::<T>::from_raw_mut(ibqp).obj = Some(qp);
        }
        taken.keep();
        Ok(0)
    })
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
    /// The QP numbered `qpn`, with the driver's data.
    pub(super) fn build<T: Driver>(self, dev: &Device<T>, qpn: u32) -> Result<Arc<Qp<T>>> {
        let (caps, sq_sig_all, qp_type) = (self.caps, self.sq_sig_all, self.qp_type);
        let data = T::new_qp(
            dev,
            &QpInit {
                qpn,
                caps,
                sq_sig_all,
                qp_type,
            },
        )?;
        let kernel = self.kq.is_some();
        // SAFETY: Not NULL: the core passed it to `create_qp`.
        let ib = unsafe { NonNull::new_unchecked(self.ibqp) };
        Arc::pin_init(
            pin_init!(Qp::<T> {
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

pub(crate) unsafe extern "C" fn post_recv<T: Driver>(
    ibqp: *mut bindings::ib_qp,
    mut wr: *const bindings::ib_recv_wr,
    bad_wr: *mut *const bindings::ib_recv_wr,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: Live QP of our device.
        let (dev, qp) = unsafe {
            (
                Device::<T>::from_raw((*ibqp).device),
                QpObject::<T>::get(ibqp)?,
            )
        };
        // SAFETY: The device is live.
        let lkey = unsafe { (*dev.as_raw()).local_dma_lkey };
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

/// `fill_res_qp_entry`: the driver's attributes of a QP for `rdma -dd resource show qp`.
pub(crate) unsafe extern "C" fn fill_res_qp_entry<T: Driver>(
    msg: *mut bindings::sk_buff,
    ibqp: *mut bindings::ib_qp,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: ib_core passes a live QP of ours (it holds a restrack reference).
        let (dev, qp) = unsafe {
            (
                Device::<T>::from_raw((*ibqp).device),
                QpObject::<T>::get(ibqp)?,
            )
        };
        // SAFETY: `msg` is the message being built, which only this callback writes
        // meanwhile.
        unsafe {
            crate::restrack::ResourceAttrs::fill(msg, |attrs| T::qp_resource(dev, &qp, attrs))
        }?;
        Ok(0)
    })
}

pub(crate) unsafe extern "C" fn destroy_qp<T: Driver>(
    ibqp: *mut bindings::ib_qp,
    _udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    // SAFETY: The core destroys a live QP of ours once, when no other verb runs on it.
    let (dev, obj) = unsafe {
        (
            Device::<T>::from_raw((*ibqp).device),
            QpObject::<T>::from_raw_mut(ibqp),
        )
    };
    let Some(qp) = obj.obj.take() else {
        return 0;
    };
    dev.objects().quotas.qp.put();
    dev.objects().qps.remove(qp.qpn);
    // The driver stops its work on the QP; it may still hold references afterwards.
    // Not during a transition: the driver's reaction to it has finished.
    {
        let _modify = qp.modify.lock();
        T::qp_destroying(dev, &qp);
    }
    qp.inner.lock().ib = None;
    // Unmap the rings now, in process context, while the user context is live.
    let sq = qp.sq.lock().take();
    let rq = qp.rq.lock().take();
    let kq = qp.kq.lock().take();
    drop((sq, rq, kq));
    0
}

pub(crate) unsafe extern "C" fn post_send<T: Driver>(
    ibqp: *mut bindings::ib_qp,
    wr: *const bindings::ib_send_wr,
    bad_wr: *mut *const bindings::ib_send_wr,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: Live QP of our device.
        let (dev, qp) = unsafe {
            (
                Device::<T>::from_raw((*ibqp).device),
                QpObject::<T>::get(ibqp)?,
            )
        };
        if qp.state() < QpState::Rts {
            if !bad_wr.is_null() {
                // SAFETY: `bad_wr` is valid for writes when not NULL.
                unsafe { *bad_wr = wr };
            }
            return Err(EINVAL);
        }
        if qp.kernel {
            // SAFETY: A kernel consumer's chain of UD work requests.
            unsafe { post_kernel_sends(dev, &qp, wr, bad_wr)? };
        }
        // User QPs post through the ring; the verb only rings the doorbell.
        T::send_doorbell(dev, &qp)?;
        Ok(0)
    })
}
