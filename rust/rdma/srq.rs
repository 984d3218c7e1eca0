// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues (`struct ib_srq`) on the rxe user ring.
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h),
//! [`include/uapi/rdma/rdma_user_rxe.h`](srctree/include/uapi/rdma/rdma_user_rxe.h)
//! (`struct rxe_create_srq_resp`).
//!
//! User space writes `struct rxe_recv_wqe` into the SRQ's ring, as into a QP's receive
//! ring. The transport takes one with [`Srq::take`] when a message needs it: the WQE is
//! copied out and its slot released at once, because QPs sharing the queue complete
//! their receives in their own orders. When fewer WQEs than the armed limit remain,
//! `IB_EVENT_SRQ_LIMIT_REACHED` is raised once and the limit disarmed, as the IB spec
//! says.
//!
//! Resizing (`IBV_SRQ_MAX_WR`) works as rdma_rxe's: a new ring takes the waiting WQEs,
//! and its mmap information goes to the address in `struct rxe_modify_srq_cmd`, where
//! rdma-core reads it to map the new ring (it holds the queue's lock meanwhile). Only
//! basic SRQs exist (no XRC or tag matching).

use crate::{
    bindings,
    mmap::MmapInfo,
    mr::PdId,
    object::Object,
    queue::{Direction, Queue},
    quota::Quota,
    ring::{parse_recv, WorkQueue, RECV_WQE_HDR, SGE_SIZE},
    table::Table,
    udata::UData,
    wqe::{RecvWqe, MAX_SGE},
};
use core::ptr::NonNull;
use kernel::{
    error::from_result,
    new_spinlock_irq,
    prelude::*,
    sync::{Arc, SpinLockIrq},
    transmute::{AsBytes, FromBytes},
};

/// `struct rxe_create_srq_resp`.
#[repr(C)]
struct CreateSrqResp {
    mi: MmapInfo,
    srq_num: u32,
    reserved: u32,
}

// SAFETY: `repr(C)` of `AsBytes` fields without padding (24 bytes, checked below).
unsafe impl AsBytes for CreateSrqResp {}
const _: () = assert!(size_of::<CreateSrqResp>() == size_of::<bindings::rxe_create_srq_resp>());

/// `struct rxe_modify_srq_cmd`: where the new ring's mmap information goes.
#[repr(C)]
struct ModifySrqCmd {
    mmap_info_addr: u64,
}

// SAFETY: `repr(C)` of one integer: any bytes are a valid value.
unsafe impl FromBytes for ModifySrqCmd {}
const _: () = assert!(size_of::<ModifySrqCmd>() == size_of::<bindings::rxe_modify_srq_cmd>());

struct Inner {
    /// The ring, until `destroy_srq`.
    wq: Option<WorkQueue>,
    /// `srq_limit`: 0 when disarmed.
    limit: u32,
    /// The core's SRQ until `destroy_srq`.
    ib: Option<NonNull<bindings::ib_srq>>,
}

// SAFETY: `ib` is only used under the lock while the core's SRQ is live.
unsafe impl Send for Inner {}

/// A shared receive queue.
#[pin_data]
pub struct Srq {
    num: u32,
    pd: PdId,
    max_sge: u32,
    #[pin]
    inner: SpinLockIrq<Inner>,
}

impl Srq {
    /// The SRQ number (`srq_num`).
    pub fn num(&self) -> u32 {
        self.num
    }

    /// The protection domain.
    pub fn pd(&self) -> PdId {
        self.pd
    }

    /// Takes the WQE at the head of the ring, consuming it; `None` when the ring is
    /// empty or the SRQ destroyed. Raises the limit event when it applies.
    pub fn take(&self) -> Option<RecvWqe> {
        let mut inner = self.inner.lock();
        let inner = &mut *inner;
        let wq = inner.wq.as_mut()?;
        let wqe = parse_recv(wq, 0)?;
        wq.queue.advance_consumer();
        if inner.limit != 0 && wq.queue.count() < inner.limit {
            inner.limit = 0;
            if let Some(ib) = inner.ib {
                let ib = ib.as_ptr();
                // SAFETY: The core's SRQ is live while set (cleared under this lock in
                // `destroy_srq`); the handler does not sleep (uverbs queues the event).
                unsafe {
                    if let Some(handler) = (*ib).event_handler {
                        let mut ev = bindings::ib_event {
                            device: (*ib).device,
                            event: bindings::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED,
                            ..Default::default()
                        };
                        ev.element.srq = ib;
                        handler(&mut ev, (*ib).srq_context);
                    }
                }
            }
        }
        Some(wqe)
    }

    /// The number of WQEs waiting.
    pub fn count(&self) -> u32 {
        self.inner.lock().wq.as_ref().map_or(0, |w| w.queue.count())
    }
}

/// The core's `ib_srq` followed by ours.
pub(crate) type SrqObject = Object<bindings::ib_srq, Srq>;

/// SRQ numbers, as rdma_rxe's pool gives them.
pub(crate) const SRQ_NUM_MIN: u32 = 1;
pub(crate) const SRQ_NUM_MAX: u32 = (1 << 24) - 1;

/// The device's limits on an SRQ.
pub(crate) struct SrqLimits {
    /// Most work requests.
    pub(crate) max_wr: u32,
    /// Most SGEs per work request.
    pub(crate) max_sge: u32,
    /// Most SRQs.
    pub(crate) max_srq: u32,
}

/// `create_srq` with the device's `limits`: the ring, the SRQ entered in `srqs`, the
/// response to user space, one of the device's `quota` taken.
///
/// # Safety
///
/// `ibsrq` is a live SRQ of one of our devices whose driver part the core zeroed;
/// `init` and `udata` are the verb's valid arguments.
pub(crate) unsafe fn create(
    ibsrq: *mut bindings::ib_srq,
    init: *mut bindings::ib_srq_init_attr,
    udata: *mut bindings::ib_udata,
    limits: SrqLimits,
    quota: &Quota,
    srqs: &Table<Srq>,
) -> Result {
    // SAFETY: Valid arguments of the verb (the function's contract).
    let (init, udata) = unsafe { (&mut *init, UData::from_raw(udata)) };
    // Only user SRQs: no kernel consumer of this device uses one.
    let udata = udata.ok_or(EOPNOTSUPP)?;
    if init.srq_type != bindings::ib_srq_type_IB_SRQT_BASIC {
        return Err(EOPNOTSUPP);
    }
    if udata.outlen() < size_of::<CreateSrqResp>() {
        return Err(EINVAL);
    }
    let a = &mut init.attr;
    if a.max_wr == 0
        || a.max_wr > limits.max_wr
        || a.max_sge > limits.max_sge.min(MAX_SGE as u32)
        || a.srq_limit > a.max_wr
    {
        return Err(EINVAL);
    }
    let taken = quota.take(limits.max_srq)?;
    let max_sge = a.max_sge.max(1);
    // SAFETY: The user context is live during the verb.
    let queue = unsafe {
        Queue::new(
            udata.ucontext(),
            a.max_wr,
            RECV_WQE_HDR + max_sge as usize * SGE_SIZE,
            Direction::FromClient,
        )?
    };
    let mi = queue.info();
    let max_wr = queue.capacity();
    // SAFETY: The SRQ's PD is live.
    let pd = PdId::from_raw(unsafe { (*ibsrq).pd });
    let limit = a.srq_limit;
    let sge_room = max_sge as usize;
    let mut ring = Some(queue);
    let num = srqs.insert_with(|num| {
        let queue = ring.take().ok_or(EINVAL)?;
        Arc::pin_init(
            pin_init!(Srq {
                num,
                pd,
                max_sge,
                inner <- new_spinlock_irq!(Inner {
                    wq: Some(WorkQueue { queue, max_sge: sge_room, max_inline: 0 }),
                    limit,
                    // SAFETY: Not NULL: the core passed it.
                    ib: Some(unsafe { NonNull::new_unchecked(ibsrq) }),
                }, "metaroce_srq"),
            }),
            GFP_KERNEL,
        )
    })?;
    if let Err(e) = udata.write(&CreateSrqResp {
        mi,
        srq_num: num,
        reserved: 0,
    }) {
        srqs.remove(num);
        return Err(e);
    }
    let srq = srqs.get(num).ok_or(EINVAL)?;
    a.max_wr = max_wr;
    a.max_sge = max_sge;
    // SAFETY: The core zeroed our part; nobody else sees the SRQ yet.
    unsafe { SrqObject::from_raw_mut(ibsrq).obj = Some(srq) };
    taken.keep();
    Ok(())
}

/// `modify_srq`, with the device's largest SRQ (`max_srq_wr`).
///
/// # Safety
///
/// `ibsrq` is a live SRQ of ours; `attr` is valid for reads; `udata` is valid or NULL.
pub(crate) unsafe fn modify(
    ibsrq: *mut bindings::ib_srq,
    attr: *mut bindings::ib_srq_attr,
    mask: bindings::ib_srq_attr_mask,
    udata: *mut bindings::ib_udata,
    max_srq_wr: u32,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: Per the function's contract.
        let (srq, attr, udata) =
            unsafe { (SrqObject::get(ibsrq)?, &*attr, UData::from_raw(udata)) };
        let (max_wr, limit) = (
            bindings::ib_srq_attr_mask_IB_SRQ_MAX_WR,
            bindings::ib_srq_attr_mask_IB_SRQ_LIMIT,
        );
        if mask & !(max_wr | limit) != 0 {
            return Err(EINVAL);
        }
        let new_limit = (mask & limit != 0).then_some(attr.srq_limit);
        if mask & max_wr == 0 {
            if let Some(l) = new_limit {
                let mut inner = srq.inner.lock();
                if l > inner.wq.as_ref().map_or(0, |w| w.queue.capacity()) {
                    return Err(EINVAL);
                }
                inner.limit = l;
            }
            return Ok(0);
        }
        let udata = udata.ok_or(EOPNOTSUPP)?;
        let cmd = udata.read::<ModifySrqCmd>()?;
        if attr.max_wr == 0 || attr.max_wr > max_srq_wr {
            return Err(EINVAL);
        }
        let elem_size = srq
            .inner
            .lock()
            .wq
            .as_ref()
            .ok_or(EINVAL)?
            .queue
            .elem_size();
        // SAFETY: The user context is live during the verb.
        let mut new = unsafe {
            Queue::new(
                udata.ucontext(),
                attr.max_wr,
                elem_size,
                Direction::FromClient,
            )?
        };
        // As rdma_rxe: the information goes out first, so that a bad address changes
        // nothing; should the move then fail, rdma-core does not map the new ring.
        UData::write_to_user(cmd.mmap_info_addr, &new.info())?;
        let old = {
            let mut guard = srq.inner.lock();
            let inner = &mut *guard;
            // Against the size asked for, as at creation (and as rdma_rxe).
            let l = new_limit.unwrap_or(inner.limit);
            if l > attr.max_wr {
                return Err(EINVAL);
            }
            let wq = inner.wq.as_mut().ok_or(EINVAL)?;
            // Fails, changing nothing, when more WQEs wait than the new ring holds.
            wq.queue.move_into(&mut new)?;
            inner.limit = l;
            core::mem::replace(&mut wq.queue, new)
        };
        // Unmapped outside the lock; rdma-core unmaps its old mapping itself.
        drop(old);
        Ok(0)
    })
}

pub(crate) unsafe extern "C" fn query_srq(
    ibsrq: *mut bindings::ib_srq,
    attr: *mut bindings::ib_srq_attr,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: Live SRQ of ours; `attr` valid for writes.
        let (srq, attr) = unsafe { (SrqObject::get(ibsrq)?, &mut *attr) };
        let inner = srq.inner.lock();
        attr.max_wr = inner.wq.as_ref().map_or(0, |w| w.queue.capacity());
        attr.max_sge = srq.max_sge;
        attr.srq_limit = inner.limit;
        Ok(0)
    })
}

/// `destroy_srq`: takes the SRQ out of `srqs` and gives back its `quota`.
///
/// # Safety
///
/// The core destroys `ibsrq`, a live SRQ of ours, once, with no QP using it any more.
pub(crate) unsafe fn destroy(ibsrq: *mut bindings::ib_srq, quota: &Quota, srqs: &Table<Srq>) {
    // SAFETY: Per the function's contract.
    let obj = unsafe { SrqObject::from_raw_mut(ibsrq) };
    if let Some(srq) = obj.obj.take() {
        quota.put();
        srqs.remove(srq.num);
        // Detach under the lock: no event after this; unmap the ring here, in process
        // context, while the user context is live. QPs that still hold the `Srq`
        // (destroyed but not yet released by the transport) find it empty.
        let wq = {
            let mut inner = srq.inner.lock();
            inner.ib = None;
            inner.wq.take()
        };
        drop(wq);
    }
}
