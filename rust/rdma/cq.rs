// SPDX-License-Identifier: GPL-2.0

//! Completion queues (`struct ib_cq`) on the rxe user ring.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h); ABI:
//! [`include/uapi/rdma/rdma_user_rxe.h`](srctree/include/uapi/rdma/rdma_user_rxe.h).
//!
//! A CQ is a ring of `struct ib_uverbs_wc` that user space polls without entering the
//! kernel. The driver adds completions with [`Cq::push`]; the CQ calls the consumer's
//! completion handler when it was armed by `ibv_req_notify_cq` and raises
//! `IB_EVENT_CQ_ERR` when the ring overflows.
//!
//! The shared state is an [`Arc<Cq>`] that QPs hold, so a completion can be pushed from
//! any context while the CQ exists. Destroying the CQ detaches it: the ring is unmapped
//! and later pushes fail with `ENODEV`.
//!
//! A CQ created by a kernel consumer (`ib_alloc_cq`, no user data) keeps `struct ib_wc`
//! entries in a kernel ring instead, which the consumer drains with `ib_poll_cq`.

use crate::{
    bindings,
    mmap::MmapInfo,
    object::Object,
    queue::{Direction, Queue},
    quota::Quota,
    udata::UData,
};
use core::ptr;
use kernel::{
    error::from_result,
    new_spinlock_irq,
    prelude::*,
    sync::{Arc, SpinLockIrq},
    transmute::AsBytes,
};

/// Status of a work completion (`enum ib_wc_status`, the same values as `ibv_wc_status`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
pub enum WcStatus {
    /// The work request completed.
    Success = bindings::ib_wc_status_IB_WC_SUCCESS,
    /// Local length error.
    LocLenErr = bindings::ib_wc_status_IB_WC_LOC_LEN_ERR,
    /// Local QP operation error (e.g. a malformed WQE).
    LocQpOpErr = bindings::ib_wc_status_IB_WC_LOC_QP_OP_ERR,
    /// Local protection error (bad lkey, missing access right).
    LocProtErr = bindings::ib_wc_status_IB_WC_LOC_PROT_ERR,
    /// Flushed: the QP is in the error state.
    WrFlushErr = bindings::ib_wc_status_IB_WC_WR_FLUSH_ERR,
    /// Bad response from the responder.
    BadRespErr = bindings::ib_wc_status_IB_WC_BAD_RESP_ERR,
    /// Local access error.
    LocAccessErr = bindings::ib_wc_status_IB_WC_LOC_ACCESS_ERR,
    /// The responder found the request invalid.
    RemInvReqErr = bindings::ib_wc_status_IB_WC_REM_INV_REQ_ERR,
    /// Remote access error (bad rkey, bounds, missing access right).
    RemAccessErr = bindings::ib_wc_status_IB_WC_REM_ACCESS_ERR,
    /// Remote operation error.
    RemOpErr = bindings::ib_wc_status_IB_WC_REM_OP_ERR,
    /// Transport retries exhausted.
    RetryExcErr = bindings::ib_wc_status_IB_WC_RETRY_EXC_ERR,
    /// RNR retries exhausted.
    RnrRetryExcErr = bindings::ib_wc_status_IB_WC_RNR_RETRY_EXC_ERR,
    /// Fatal error.
    FatalErr = bindings::ib_wc_status_IB_WC_FATAL_ERR,
    /// General error.
    GeneralErr = bindings::ib_wc_status_IB_WC_GENERAL_ERR,
}

/// Opcode of a work completion (`enum ib_wc_opcode`, the values of `ibv_wc_opcode`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
pub enum WcOpcode {
    /// SEND (with or without immediate).
    Send = bindings::ib_wc_opcode_IB_WC_SEND,
    /// RDMA WRITE (with or without immediate).
    RdmaWrite = bindings::ib_wc_opcode_IB_WC_RDMA_WRITE,
    /// RDMA READ.
    RdmaRead = bindings::ib_wc_opcode_IB_WC_RDMA_READ,
    /// Atomic compare and swap.
    CompSwap = bindings::ib_wc_opcode_IB_WC_COMP_SWAP,
    /// Atomic fetch and add.
    FetchAdd = bindings::ib_wc_opcode_IB_WC_FETCH_ADD,
    /// Memory window bind.
    BindMw = bindings::ib_wc_opcode_IB_WC_BIND_MW,
    /// Local invalidate.
    LocalInv = bindings::ib_wc_opcode_IB_WC_LOCAL_INV,
    /// A receive consumed by a SEND.
    Recv = bindings::ib_wc_opcode_IB_WC_RECV,
    /// A receive consumed by an RDMA WRITE with immediate.
    RecvRdmaWithImm = bindings::ib_wc_opcode_IB_WC_RECV_RDMA_WITH_IMM,
}

/// `wc_flags`: the completion carries immediate data.
pub const WC_WITH_IMM: u32 = bindings::ib_wc_flags_IB_WC_WITH_IMM;
/// `wc_flags`: the first 40 bytes of the receive buffer hold the GRH (UD receives).
pub const WC_GRH: u32 = bindings::ib_wc_flags_IB_WC_GRH;
/// `wc_flags`: the completion carries an invalidated rkey.
pub const WC_WITH_INVALIDATE: u32 = bindings::ib_wc_flags_IB_WC_WITH_INVALIDATE;

/// A work completion, as user space reads it (`struct ib_uverbs_wc`).
#[derive(Clone, Copy, Debug)]
pub struct WorkCompletion {
    /// The work request's id.
    pub wr_id: u64,
    /// Its status.
    pub status: WcStatus,
    /// What completed.
    pub opcode: WcOpcode,
    /// Bytes received (receives) or transferred.
    pub byte_len: u32,
    /// Immediate data (network order, as on the wire) or invalidated rkey.
    pub ex: u32,
    /// The local QP number.
    pub qp_num: u32,
    /// The source QP (UD receives).
    pub src_qp: u32,
    /// `WC_*` flags.
    pub wc_flags: u32,
    /// P_Key index (UD/GSI receives).
    pub pkey_index: u16,
    /// Port number.
    pub port_num: u8,
    /// `RDMA_NETWORK_IPV4`/`IPV6` of a UD receive with a GRH (kernel consumers).
    pub network_hdr_type: u8,
}

impl WorkCompletion {
    /// A flushed completion of work request `wr_id` on QP `qp_num`.
    pub fn flushed(wr_id: u64, opcode: WcOpcode, qp_num: u32) -> Self {
        Self {
            wr_id,
            status: WcStatus::WrFlushErr,
            opcode,
            byte_len: 0,
            ex: 0,
            qp_num,
            src_qp: 0,
            wc_flags: 0,
            pkey_index: 0,
            port_num: 1,
            network_hdr_type: 0,
        }
    }
}

/// `struct ib_uverbs_wc`, byte for byte.
#[repr(C)]
struct UverbsWc {
    wr_id: u64,
    status: u32,
    opcode: u32,
    vendor_err: u32,
    byte_len: u32,
    ex: u32,
    qp_num: u32,
    src_qp: u32,
    wc_flags: u32,
    pkey_index: u16,
    slid: u16,
    sl: u8,
    dlid_path_bits: u8,
    port_num: u8,
    reserved: u8,
}

// SAFETY: `repr(C)`, integers only, laid out without padding (checked below).
unsafe impl AsBytes for UverbsWc {}
const _: () = assert!(size_of::<UverbsWc>() == size_of::<bindings::ib_uverbs_wc>());
const _: () = assert!(size_of::<UverbsWc>() == 48);

/// `struct rxe_create_cq_resp` and `struct rxe_resize_cq_resp`.
#[repr(C)]
struct CqResp {
    mi: MmapInfo,
}

// SAFETY: `repr(C)` over an `AsBytes` struct.
unsafe impl AsBytes for CqResp {}

/// Completions of a kernel consumer's CQ, oldest first.
struct KernelRing {
    wcs: KVec<bindings::ib_wc>,
    head: usize,
    len: usize,
}

impl KernelRing {
    fn capacity(&self) -> usize {
        self.wcs.len()
    }

    fn push(&mut self, wc: bindings::ib_wc) -> Result {
        if self.len == self.capacity() {
            return Err(ENOSPC);
        }
        let i = (self.head + self.len) % self.capacity();
        *self.wcs.get_mut(i).ok_or(EINVAL)? = wc;
        self.len += 1;
        Ok(())
    }

    fn pop(&mut self) -> Option<bindings::ib_wc> {
        if self.len == 0 {
            return None;
        }
        let wc = *self.wcs.get(self.head)?;
        self.head = (self.head + 1) % self.capacity();
        self.len -= 1;
        Some(wc)
    }
}

/// Where completions go.
enum Ring {
    /// Mapped by user space.
    User(Queue),
    /// Polled by a kernel consumer.
    Kernel(KernelRing),
}

impl Ring {
    fn count(&self) -> u32 {
        match self {
            Ring::User(q) => q.count(),
            Ring::Kernel(k) => k.len as u32,
        }
    }
}

/// The `ib_cq` while it exists.
struct Attached {
    queue: Ring,
    ib: ptr::NonNull<bindings::ib_cq>,
}

// SAFETY: `ib` is only used under the CQ's lock, while the core's `ib_cq` is live (it is
// detached in `destroy_cq` before the core frees it).
unsafe impl Send for Attached {}

struct Inner {
    attached: Option<Attached>,
    /// `IB_CQ_SOLICITED`/`IB_CQ_NEXT_COMP` while armed.
    notify: u32,
    /// Completions dropped because the ring was full.
    overflows: u64,
}

/// A completion queue.
#[pin_data]
pub struct Cq {
    #[pin]
    inner: SpinLockIrq<Inner>,
}

impl Cq {
    /// Adds a completion; `solicited` is the solicited-event bit of the message that
    /// caused it (receives only).
    ///
    /// Calls the completion handler when the CQ is armed for it. When the ring is full the
    /// completion is dropped, `IB_EVENT_CQ_ERR` is raised and `ENOSPC` returned (the
    /// consumer must treat the CQ as broken, as the IB spec says). `ENODEV` after the CQ
    /// was destroyed.
    pub fn push(&self, wc: &WorkCompletion, solicited: bool) -> Result {
        self.push_for(wc, ptr::null_mut(), solicited)
    }

    /// [`Cq::push`] for a completion of QP `qp` (the `ib_qp` a kernel consumer finds in
    /// `wc->qp`; NULL when unknown).
    pub(crate) fn push_for(
        &self,
        wc: &WorkCompletion,
        qp: *mut bindings::ib_qp,
        solicited: bool,
    ) -> Result {
        let uwc = UverbsWc {
            wr_id: wc.wr_id,
            status: wc.status as u32,
            opcode: wc.opcode as u32,
            vendor_err: 0,
            byte_len: wc.byte_len,
            ex: wc.ex,
            qp_num: wc.qp_num,
            src_qp: wc.src_qp,
            wc_flags: wc.wc_flags,
            pkey_index: wc.pkey_index,
            slid: 0,
            sl: 0,
            dlid_path_bits: 0,
            port_num: wc.port_num,
            reserved: 0,
        };
        let mut inner = self.inner.lock();
        let inner = &mut *inner;
        let at = inner.attached.as_mut().ok_or(ENODEV)?;
        let ib = at.ib.as_ptr();
        let pushed = match &mut at.queue {
            Ring::User(q) => q.push(uwc.as_bytes()),
            Ring::Kernel(k) => {
                let mut kwc = bindings::ib_wc {
                    status: wc.status as u32,
                    opcode: wc.opcode as u32,
                    byte_len: wc.byte_len,
                    qp,
                    src_qp: wc.src_qp,
                    wc_flags: wc.wc_flags as i32,
                    pkey_index: wc.pkey_index,
                    port_num: wc.port_num.into(),
                    ..Default::default()
                };
                // `wr_id` shares its union with `wr_cqe`: the consumer's value back.
                kwc.__bindgen_anon_1.wr_id = wc.wr_id;
                kwc.ex.imm_data = wc.ex;
                if wc.wc_flags & WC_GRH != 0 {
                    kwc.wc_flags |= bindings::ib_wc_flags_IB_WC_WITH_NETWORK_HDR_TYPE as i32;
                    kwc.network_hdr_type = wc.network_hdr_type;
                }
                k.push(kwc)
            }
        };
        if let Err(e) = pushed {
            inner.overflows += 1;
            // SAFETY: The `ib_cq` is live while attached; we hold the lock that
            // `destroy_cq` takes to detach it. The handler may not sleep (it runs in
            // the contexts completions are generated in, like rdma_rxe's).
            unsafe {
                if let Some(handler) = (*ib).event_handler {
                    let mut ev = bindings::ib_event {
                        device: (*ib).device,
                        event: bindings::ib_event_type_IB_EVENT_CQ_ERR,
                        ..Default::default()
                    };
                    ev.element.cq = ib;
                    handler(&mut ev, (*ib).cq_context);
                }
            }
            return Err(e);
        }
        let fire = inner.notify & bindings::ib_cq_notify_flags_IB_CQ_NEXT_COMP != 0
            || (inner.notify & bindings::ib_cq_notify_flags_IB_CQ_SOLICITED != 0 && solicited);
        if fire {
            inner.notify = 0;
            // SAFETY: As above.
            unsafe {
                if let Some(handler) = (*ib).comp_handler {
                    handler(ib, (*ib).cq_context);
                }
            }
        }
        Ok(())
    }

    /// The number of completions user space has not polled yet.
    pub fn count(&self) -> u32 {
        self.inner
            .lock()
            .attached
            .as_ref()
            .map_or(0, |a| a.queue.count())
    }

    /// The number of completions dropped on overflow.
    pub fn overflows(&self) -> u64 {
        self.inner.lock().overflows
    }
}

/// The core's `ib_cq` followed by ours.
pub(crate) type CqObject = Object<bindings::ib_cq, Cq>;

fn slot_count(cqe: u32) -> Result<u32> {
    cqe.checked_add(1).ok_or(EINVAL)?;
    Ok(cqe)
}

/// `create_cq` for a device whose CQs hold at most `max_cqe` entries.
///
/// # Safety
///
/// `ibcq` is a live CQ of one of our devices whose driver part the core zeroed; `attr`
/// and `attrs` are the verb's valid arguments.
pub(crate) unsafe fn create(
    ibcq: *mut bindings::ib_cq,
    attr: *const bindings::ib_cq_init_attr,
    attrs: *mut bindings::uverbs_attr_bundle,
    max_cqe: u32,
) -> Result {
    // SAFETY: Valid arguments (the function's contract).
    let attr = unsafe { &*attr };
    // SAFETY: `attrs` is NULL or a valid bundle with its driver udata.
    let udata = unsafe {
        if attrs.is_null() {
            None
        } else {
            UData::from_raw(&raw const (*attrs).__bindgen_anon_1.hdr.driver_udata)
        }
    };
    if attr.flags != 0 {
        return Err(EOPNOTSUPP);
    }
    if attr.cqe == 0 || attr.cqe > max_cqe {
        return Err(EINVAL);
    }
    let (queue, cqe) = match udata {
        Some(udata) => {
            if udata.outlen() < size_of::<CqResp>() {
                return Err(EINVAL);
            }
            let uctx = udata.ucontext();
            // SAFETY: The user context is live during the verb.
            let queue = unsafe {
                Queue::new(
                    uctx,
                    slot_count(attr.cqe)?,
                    size_of::<UverbsWc>(),
                    Direction::ToClient,
                )?
            };
            udata.write(&CqResp { mi: queue.info() })?;
            let cqe = queue.capacity();
            (Ring::User(queue), cqe)
        }
        // A kernel consumer (the MAD layer on QP1, ULPs).
        None => {
            let n = attr.cqe as usize;
            let mut wcs = KVec::with_capacity(n, GFP_KERNEL)?;
            wcs.resize(n, bindings::ib_wc::default(), GFP_KERNEL)?;
            (
                Ring::Kernel(KernelRing {
                    wcs,
                    head: 0,
                    len: 0,
                }),
                attr.cqe,
            )
        }
    };
    let cq = Arc::pin_init(
        pin_init!(Cq {
            inner <- new_spinlock_irq!(Inner {
                attached: Some(Attached {
                    queue,
                    // SAFETY: Not NULL: the core passed it.
                    ib: unsafe { ptr::NonNull::new_unchecked(ibcq) },
                }),
                notify: 0,
                overflows: 0,
            }, "metaroce_cq"),
        }),
        GFP_KERNEL,
    )?;
    // SAFETY: The core zeroed our part and the CQ is not visible to anyone yet.
    let obj = unsafe { CqObject::from_raw_mut(ibcq) };
    obj.obj = Some(cq);
    // SAFETY: As above; the core reports `cqe` back to user space.
    unsafe { (*ibcq).cqe = cqe as i32 };
    Ok(())
}

/// `destroy_cq`: detaches the CQ and gives back its `quota`.
///
/// # Safety
///
/// The core destroys `ibcq`, a live CQ of ours, once, with no QP using it any more.
pub(crate) unsafe fn destroy(ibcq: *mut bindings::ib_cq, quota: &Quota) {
    // SAFETY: Per the function's contract.
    let obj = unsafe { CqObject::from_raw_mut(ibcq) };
    if let Some(cq) = obj.obj.take() {
        quota.put();
        // Detach under the lock: no handler runs on the `ib_cq` after this; the ring is
        // unmapped here, in process context, while the user context is still live.
        let attached = cq.inner.lock().attached.take();
        drop(attached);
    }
}

/// `resize_user_cq` for a device whose CQs hold at most `max_cqe` entries.
///
/// # Safety
///
/// `ibcq` is a live CQ of ours; `udata` is valid or NULL.
pub(crate) unsafe fn resize(
    ibcq: *mut bindings::ib_cq,
    cqe: kernel::ffi::c_uint,
    udata: *mut bindings::ib_udata,
    max_cqe: u32,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: Per the function's contract.
        let (udata, cq) = unsafe { (UData::from_raw(udata), CqObject::get(ibcq)?) };
        let udata = udata.ok_or(EOPNOTSUPP)?;
        if udata.outlen() < size_of::<CqResp>() {
            return Err(EINVAL);
        }
        if cqe == 0 || cqe > max_cqe {
            return Err(EINVAL);
        }
        if cqe < cq.count() {
            return Err(EINVAL);
        }
        let uctx = udata.ucontext();
        // SAFETY: The user context is live during the verb.
        let mut new = unsafe {
            Queue::new(
                uctx,
                slot_count(cqe)?,
                size_of::<UverbsWc>(),
                Direction::ToClient,
            )?
        };
        let old = {
            let mut inner = cq.inner.lock();
            let at = inner.attached.as_mut().ok_or(EINVAL)?;
            let Ring::User(queue) = &mut at.queue else {
                return Err(EOPNOTSUPP);
            };
            // Fails, changing nothing, when more completions arrived than fit.
            queue.move_into(&mut new)?;
            core::mem::replace(queue, new)
        };
        let (info, capacity) = {
            let inner = cq.inner.lock();
            match inner.attached.as_ref().map(|a| &a.queue) {
                Some(Ring::User(q)) => (q.info(), q.capacity()),
                _ => return Err(EINVAL),
            }
        };
        // rdma-core maps the new ring right after this returns. Should the copy fail,
        // the old ring is gone anyway: report it as rxe does.
        drop(old);
        udata.write(&CqResp { mi: info })?;
        // SAFETY: Live CQ; the core reports `cqe` back.
        unsafe { (*ibcq).cqe = capacity as i32 };
        Ok(0)
    })
}

pub(crate) unsafe extern "C" fn req_notify_cq(
    ibcq: *mut bindings::ib_cq,
    flags: bindings::ib_cq_notify_flags,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: Live CQ of ours.
        let cq = unsafe { CqObject::get(ibcq)? };
        let mut inner = cq.inner.lock();
        inner.notify |= flags & bindings::ib_cq_notify_flags_IB_CQ_SOLICITED_MASK;
        let pending = inner.attached.as_ref().is_some_and(|a| a.queue.count() > 0);
        Ok(i32::from(
            flags & bindings::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS != 0 && pending,
        ))
    })
}

pub(crate) unsafe extern "C" fn poll_cq(
    ibcq: *mut bindings::ib_cq,
    num_entries: kernel::ffi::c_int,
    wc: *mut bindings::ib_wc,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: Live CQ of ours (a kernel consumer's: only they call `poll_cq`).
        let cq = unsafe { CqObject::get(ibcq)? };
        let mut inner = cq.inner.lock();
        let Some(Attached {
            queue: Ring::Kernel(k),
            ..
        }) = inner.attached.as_mut()
        else {
            return Err(EINVAL);
        };
        let mut n = 0;
        while n < num_entries.max(0) as usize {
            let Some(w) = k.pop() else { break };
            // SAFETY: The consumer passes room for `num_entries` completions.
            unsafe { wc.add(n).write(w) };
            n += 1;
        }
        Ok(n as i32)
    })
}
