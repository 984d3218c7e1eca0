// SPDX-License-Identifier: GPL-2.0

//! The work queues of a kernel consumer's QP (UD and GSI; no rings shared with user
//! space): its buffers, work requests and posting.

use super::{
    attr::{QpCaps, QpInit, QpType},
    verbs::{QpLimits, QpObject, QpParts},
    Qp,
};
use crate::{
    bindings,
    cq::CqObject,
    mr::PdId,
    table::Table,
    wqe::{walk_sges, Sge, WqeAddress},
};
use kernel::prelude::*;

/// The most SGEs of a kernel consumer's UD work request.
pub const KERNEL_MAX_SGE: usize = 4;

/// Up to [`KERNEL_MAX_SGE`] kernel buffers of one work request.
///
/// # Invariants
///
/// Each buffer is `length` bytes of kernel memory at `addr` that the consumer keeps
/// for the device until the work request completes (`ib_post_send`/`ib_post_recv`
/// contract), and only the device touches it meanwhile.
#[derive(Clone, Copy, Debug, Default)]
pub struct KernelBuffers {
    n: usize,
    /// Kernel virtual addresses (the device uses virtual DMA: `ib_dma_map_*` returns
    /// the address itself) under the PD's local DMA key.
    sges: [Sge; KERNEL_MAX_SGE],
}

impl KernelBuffers {
    /// Reads an `ib_sge` list.
    ///
    /// # Safety
    ///
    /// `list` points to `n` valid `ib_sge` (or `n` is 0); their buffers satisfy the type
    /// invariant until the work request completes.
    pub(super) unsafe fn from_raw(
        list: *const bindings::ib_sge,
        n: i32,
        local_dma_lkey: u32,
    ) -> Result<Self> {
        let n = usize::try_from(n).map_err(|_| EINVAL)?;
        if n > KERNEL_MAX_SGE {
            return Err(EINVAL);
        }
        let mut b = Self {
            n,
            ..Default::default()
        };
        for (i, slot) in b.sges[..n].iter_mut().enumerate() {
            // SAFETY: Per the function's contract.
            let sge = unsafe { *list.add(i) };
            // Kernel consumers of a virtual-DMA device use the PD's local DMA key.
            if sge.lkey != local_dma_lkey {
                return Err(EINVAL);
            }
            *slot = Sge {
                addr: sge.addr,
                length: sge.length,
                lkey: sge.lkey,
            };
        }
        Ok(b)
    }

    /// The total length.
    pub fn len(&self) -> u64 {
        self.sges[..self.n]
            .iter()
            .map(|s| u64::from(s.length))
            .sum()
    }

    /// Whether the buffers hold no byte.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies bytes `offset..offset + out.len()` of the buffers into `out`.
    pub fn read(&self, offset: u64, out: &mut [u8]) -> Result {
        walk_sges(
            &self.sges[..self.n],
            offset,
            out.len(),
            |_, addr, pos, n| {
                // SAFETY: `addr..addr + n` lies inside one buffer (`walk_sges` keeps each piece
                // inside its SGE), which is valid kernel memory by the type invariant;
                // `out[pos..pos + n]` is ours.
                unsafe {
                    core::ptr::copy_nonoverlapping(addr as *const u8, out.as_mut_ptr().add(pos), n)
                };
                Ok(())
            },
        )
    }

    /// Copies `data` into the buffers at `offset`.
    pub fn write(&self, offset: u64, data: &[u8]) -> Result {
        walk_sges(
            &self.sges[..self.n],
            offset,
            data.len(),
            |_, addr, pos, n| {
                // SAFETY: As in `read`; the consumer lent the buffer to the device for writing.
                unsafe {
                    core::ptr::copy_nonoverlapping(data.as_ptr().add(pos), addr as *mut u8, n)
                };
                Ok(())
            },
        )
    }
}

/// A kernel consumer's UD send work request, copied at `ib_post_send`.
#[derive(Clone, Copy, Debug)]
pub struct KernelSend {
    /// `wr_id` (or `wr_cqe`), given back in the completion.
    pub wr_id: u64,
    /// With immediate data (network order, as posted).
    pub imm: Option<u32>,
    /// A completion is wanted (or the QP signals all).
    pub signaled: bool,
    /// Solicited event.
    pub solicited: bool,
    /// Destination QP.
    pub remote_qpn: u32,
    /// Q_Key to present (the QP's own when the high bit is set).
    pub remote_qkey: u32,
    /// The address of the work request's AH.
    pub dest: WqeAddress,
    /// The payload.
    pub buffers: KernelBuffers,
}

/// A kernel consumer's receive work request.
#[derive(Clone, Copy, Debug)]
pub struct KernelRecv {
    /// `wr_id` (or `wr_cqe`), given back in the completion.
    pub wr_id: u64,
    /// Where the GRH area and the payload go.
    pub buffers: KernelBuffers,
}

/// A bounded FIFO of work requests.
pub(super) struct Fifo<W> {
    slots: KVec<Option<W>>,
    head: usize,
    len: usize,
}

impl<W> Fifo<W> {
    pub(super) fn new(cap: usize) -> Result<Self> {
        let mut slots = KVec::with_capacity(cap.max(1), GFP_KERNEL)?;
        for _ in 0..cap.max(1) {
            slots.push(None, GFP_KERNEL)?;
        }
        Ok(Self {
            slots,
            head: 0,
            len: 0,
        })
    }

    /// Slot `head + k` for `k` below the capacity, wrapped once (no arithmetic that
    /// could panic).
    fn slot_after_head(&self, k: usize) -> usize {
        let i = self.head.wrapping_add(k);
        i.checked_sub(self.slots.len()).unwrap_or(i)
    }

    pub(super) fn push(&mut self, w: W) -> Result {
        if self.len >= self.slots.len() {
            return Err(ENOMEM);
        }
        let tail = self.slot_after_head(self.len);
        *self.slots.get_mut(tail).ok_or(EINVAL)? = Some(w);
        self.len = self.len.wrapping_add(1);
        Ok(())
    }

    pub(super) fn pop(&mut self) -> Option<W> {
        if self.len == 0 {
            return None;
        }
        let w = self.slots.get_mut(self.head)?.take();
        self.head = self.slot_after_head(1);
        self.len = self.len.wrapping_sub(1);
        w
    }
}

/// The work queues of a kernel consumer's QP (no rings shared with user space).
pub(super) struct KernelQueues {
    pub(super) sq: Fifo<KernelSend>,
    pub(super) rq: Fifo<KernelRecv>,
}

impl<D> Qp<D> {
    /// Takes the oldest send work request a kernel consumer posted.
    pub fn kernel_send_pop(&self) -> Option<KernelSend> {
        Option::as_mut(&mut *self.kq.lock())?.sq.pop()
    }

    /// Takes the oldest receive work request a kernel consumer posted.
    pub fn kernel_recv_pop(&self) -> Option<KernelRecv> {
        Option::as_mut(&mut *self.kq.lock())?.rq.pop()
    }
}

/// `create_qp` for a kernel consumer: a UD or GSI QP (QP number 1) with kernel queues,
/// entered in `qps`, with the driver's data from `new`.
///
/// # Safety
///
/// As for [`create`](super::create).
pub(super) unsafe fn create_kernel_qp<D: Send + Sync>(
    ibqp: *mut bindings::ib_qp,
    init: &mut bindings::ib_qp_init_attr,
    qp_type: QpType,
    limits: &QpLimits,
    qps: &Table<Qp<D>>,
    new: impl FnOnce(&QpInit) -> Result<D>,
) -> Result {
    if !qp_type.is_datagram() || !init.srq.is_null() {
        return Err(EOPNOTSUPP);
    }
    if init.send_cq.is_null() || init.recv_cq.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: CQs of our device, held by the core for the QP's life.
    let (send_cq, recv_cq) =
        unsafe { (CqObject::get(init.send_cq)?, CqObject::get(init.recv_cq)?) };
    let cap = &mut init.cap;
    if cap.max_send_wr == 0
        || cap.max_recv_wr == 0
        || cap.max_send_wr > limits.max_qp_wr
        || cap.max_recv_wr > limits.max_qp_wr
        || cap.max_send_sge as usize > KERNEL_MAX_SGE
        || cap.max_recv_sge as usize > KERNEL_MAX_SGE
    {
        return Err(EINVAL);
    }
    cap.max_send_sge = KERNEL_MAX_SGE as u32;
    cap.max_recv_sge = KERNEL_MAX_SGE as u32;
    cap.max_inline_data = 0;
    let caps = QpCaps {
        max_send_wr: cap.max_send_wr,
        max_recv_wr: cap.max_recv_wr,
        max_send_sge: cap.max_send_sge,
        max_recv_sge: cap.max_recv_sge,
        max_inline_data: 0,
    };
    let kq = KernelQueues {
        sq: Fifo::new(caps.max_send_wr as usize)?,
        rq: Fifo::new(caps.max_recv_wr as usize)?,
    };
    let sq_sig_all = init.sq_sig_type == bindings::ib_sig_type_IB_SIGNAL_ALL_WR;
    // SAFETY: The QP's PD is live.
    let pd = PdId::from_raw(unsafe { (*ibqp).pd });
    let parts = QpParts {
        ibqp,
        qp_type,
        pd,
        send_cq,
        recv_cq,
        caps,
        sq_sig_all,
        srq: None,
        sq: None,
        rq: None,
        kq: Some(kq),
    };
    let qpn = match qp_type {
        QpType::Gsi => {
            qps.insert_at(GSI_QPN, parts.build(GSI_QPN, new)?)?;
            GSI_QPN
        }
        _ => {
            let mut parts = Some(parts);
            qps.insert_with(|qpn| parts.take().ok_or(EINVAL)?.build(qpn, new))?
        }
    };
    let qp = qps.get(qpn).ok_or(EINVAL)?;
    // SAFETY: The core zeroed our part; nobody else sees the QP yet.
    unsafe {
        (*ibqp).qp_num = qpn;
        QpObject::<D>::from_raw_mut(ibqp).obj = Some(qp);
    }
    Ok(())
}

/// The QP number of the GSI QP.
pub const GSI_QPN: u32 = 1;

/// `post_send` of a kernel consumer: copies the UD work requests, their buffers under
/// the device's local DMA key `lkey`, into the send queue.
///
/// # Safety
///
/// `wr` is a valid chain of `ib_ud_wr` (the consumer's contract for UD QPs) whose
/// buffers stay valid until each completes; `bad_wr` is valid for writes or NULL.
pub(super) unsafe fn post_kernel_sends<D>(
    lkey: u32,
    qp: &Qp<D>,
    mut wr: *const bindings::ib_send_wr,
    bad_wr: *mut *const bindings::ib_send_wr,
) -> Result {
    while !wr.is_null() {
        // SAFETY: Per the function's contract.
        let r = unsafe { kernel_send(wr.cast::<bindings::ib_ud_wr>(), lkey, qp.sq_sig_all) }
            .and_then(|w| Option::as_mut(&mut *qp.kq.lock()).ok_or(EINVAL)?.sq.push(w));
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
    Ok(())
}

/// Copies one UD send work request.
///
/// # Safety
///
/// As for `post_kernel_sends`, for the one work request `ud`.
unsafe fn kernel_send(
    ud: *const bindings::ib_ud_wr,
    lkey: u32,
    sig_all: bool,
) -> Result<KernelSend> {
    // SAFETY: Per the function's contract.
    let ud = unsafe { &*ud };
    let imm = match ud.wr.opcode {
        bindings::ib_wr_opcode_IB_WR_SEND => None,
        // SAFETY: Integer union member.
        bindings::ib_wr_opcode_IB_WR_SEND_WITH_IMM => Some(unsafe { ud.wr.ex.imm_data }),
        _ => return Err(EINVAL),
    };
    if ud.ah.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: The consumer's AH of our device, live while the work request is posted.
    let ah = unsafe { crate::ah::AhObject::get(ud.ah)? };
    let flags = ud.wr.send_flags as u32;
    Ok(KernelSend {
        // SAFETY: Integer union member (`wr_cqe` is the same 8 bytes).
        wr_id: unsafe { ud.wr.__bindgen_anon_1.wr_id },
        imm,
        signaled: sig_all || flags & bindings::ib_send_flags_IB_SEND_SIGNALED as u32 != 0,
        solicited: flags & bindings::ib_send_flags_IB_SEND_SOLICITED as u32 != 0,
        remote_qpn: ud.remote_qpn,
        remote_qkey: ud.remote_qkey,
        dest: ah.av().into(),
        // SAFETY: Per the function's contract.
        buffers: unsafe { KernelBuffers::from_raw(ud.wr.sg_list, ud.wr.num_sge, lkey)? },
    })
}
