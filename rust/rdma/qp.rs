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

use crate::{
    av::{AddressVector, IpAddress},
    bindings,
    cq::{Cq, CqObject, WcOpcode, WorkCompletion},
    device::{Device, Driver, Mtu},
    mmap::MmapInfo,
    mr::{Access, PdId},
    queue::{Direction, Queue},
    srq::{Srq, SrqObject},
    udata::UData,
};
use core::{mem::offset_of, ptr::NonNull};
use kernel::{
    error::from_result,
    new_mutex, new_spinlock_irq,
    prelude::*,
    sync::{Arc, Mutex, SpinLockIrq},
    transmute::AsBytes,
    types::Opaque,
};

/// The most SGEs a work request may have (the rings are sized for at most this many).
pub const MAX_SGE: usize = 32;
/// The most inline data a send work request may carry.
pub const MAX_INLINE: usize = MAX_SGE * size_of::<bindings::rxe_sge>();

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

/// A scatter/gather element (`struct rxe_sge`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Sge {
    /// Virtual address.
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// Local key of the MR.
    pub lkey: u32,
}

/// Up to [`MAX_SGE`] SGEs.
#[derive(Clone, Copy, Debug)]
pub struct SgeList {
    len: usize,
    sges: [Sge; MAX_SGE],
}

impl SgeList {
    /// No SGE.
    pub const EMPTY: Self = Self {
        len: 0,
        sges: [Sge {
            addr: 0,
            length: 0,
            lkey: 0,
        }; MAX_SGE],
    };

    /// The SGEs.
    pub fn as_slice(&self) -> &[Sge] {
        &self.sges[..self.len]
    }

    /// The sum of their lengths.
    pub fn total_len(&self) -> u64 {
        self.as_slice().iter().map(|s| u64::from(s.length)).sum()
    }
}

/// The opcode of a send work request (`enum ibv_wr_opcode`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SendOpcode {
    /// RDMA WRITE.
    RdmaWrite,
    /// RDMA WRITE with immediate.
    RdmaWriteWithImm,
    /// SEND.
    Send,
    /// SEND with immediate.
    SendWithImm,
    /// RDMA READ.
    RdmaRead,
    /// Atomic compare and swap.
    AtomicCmpAndSwp,
    /// Atomic fetch and add.
    AtomicFetchAndAdd,
    /// Local invalidate.
    LocalInv,
    /// SEND with invalidate.
    SendWithInv,
}

impl SendOpcode {
    fn from_raw(v: u32) -> Option<Self> {
        Some(match v {
            bindings::ib_wr_opcode_IB_WR_RDMA_WRITE => Self::RdmaWrite,
            bindings::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM => Self::RdmaWriteWithImm,
            bindings::ib_wr_opcode_IB_WR_SEND => Self::Send,
            bindings::ib_wr_opcode_IB_WR_SEND_WITH_IMM => Self::SendWithImm,
            bindings::ib_wr_opcode_IB_WR_RDMA_READ => Self::RdmaRead,
            bindings::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP => Self::AtomicCmpAndSwp,
            bindings::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD => Self::AtomicFetchAndAdd,
            bindings::ib_wr_opcode_IB_WR_LOCAL_INV => Self::LocalInv,
            bindings::ib_wr_opcode_IB_WR_SEND_WITH_INV => Self::SendWithInv,
            _ => return None,
        })
    }

    /// The opcode of this request's completion.
    pub fn wc_opcode(self) -> WcOpcode {
        match self {
            Self::RdmaWrite | Self::RdmaWriteWithImm => WcOpcode::RdmaWrite,
            Self::Send | Self::SendWithImm | Self::SendWithInv => WcOpcode::Send,
            Self::RdmaRead => WcOpcode::RdmaRead,
            Self::AtomicCmpAndSwp => WcOpcode::CompSwap,
            Self::AtomicFetchAndAdd => WcOpcode::FetchAdd,
            Self::LocalInv => WcOpcode::LocalInv,
        }
    }
}

/// `send_flags`: a completion is generated (unless the QP signals all).
pub const SEND_SIGNALED: u32 = 2;
/// `send_flags`: solicited event at the responder.
pub const SEND_SOLICITED: u32 = 4;
/// `send_flags`: the payload is inline in the WQE.
pub const SEND_INLINE: u32 = 8;
/// `send_flags`: wait for earlier READ/atomics.
pub const SEND_FENCE: u32 = 1;

/// The payload of a send work request.
#[derive(Clone, Copy, Debug)]
pub enum Payload {
    /// Gathered from local MRs.
    Sges(SgeList),
    /// Carried in the WQE.
    Inline {
        /// Length.
        len: usize,
        /// Bytes (`len` of them).
        data: [u8; MAX_INLINE],
    },
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

/// The most SGEs of a kernel consumer's UD work request.
pub const KERNEL_MAX_SGE: usize = 4;

/// A scatter/gather element of a kernel consumer: a kernel virtual address (the
/// device uses virtual DMA: `ib_dma_map_*` returns the address itself).
#[derive(Clone, Copy, Debug, Default)]
struct KernelSge {
    addr: u64,
    length: u32,
}

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
    sges: [KernelSge; KERNEL_MAX_SGE],
}

impl KernelBuffers {
    /// Reads an `ib_sge` list.
    ///
    /// # Safety
    ///
    /// `list` points to `n` valid `ib_sge` (or `n` is 0); their buffers satisfy the type
    /// invariant until the work request completes.
    unsafe fn from_raw(list: *const bindings::ib_sge, n: i32, local_dma_lkey: u32) -> Result<Self> {
        let n = usize::try_from(n).map_err(|_| EINVAL)?;
        if n > KERNEL_MAX_SGE {
            return Err(EINVAL);
        }
        let mut b = Self { n, ..Default::default() };
        for (i, slot) in b.sges[..n].iter_mut().enumerate() {
            // SAFETY: Per the function's contract.
            let sge = unsafe { *list.add(i) };
            // Kernel consumers of a virtual-DMA device use the PD's local DMA key.
            if sge.lkey != local_dma_lkey {
                return Err(EINVAL);
            }
            *slot = KernelSge { addr: sge.addr, length: sge.length };
        }
        Ok(b)
    }

    /// The total length.
    pub fn len(&self) -> u64 {
        self.sges[..self.n].iter().map(|s| u64::from(s.length)).sum()
    }

    /// Whether the buffers hold no byte.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies bytes `offset..offset + out.len()` of the buffers into `out`.
    pub fn read(&self, offset: u64, out: &mut [u8]) -> Result {
        self.walk(offset, out.len(), |addr, pos, n| {
            // SAFETY: `addr..addr + n` lies inside one buffer (checked by `walk`), which
            // is valid kernel memory by the type invariant; `out` is ours.
            unsafe { core::ptr::copy_nonoverlapping(addr as *const u8, out.as_mut_ptr().add(pos), n) };
        })
    }

    /// Copies `data` into the buffers at `offset`.
    pub fn write(&self, offset: u64, data: &[u8]) -> Result {
        self.walk(offset, data.len(), |addr, pos, n| {
            // SAFETY: As in `read`; the consumer lent the buffer to the device for writing.
            unsafe { core::ptr::copy_nonoverlapping(data.as_ptr().add(pos), addr as *mut u8, n) };
        })
    }

    /// Calls `f(address, position, count)` for each piece of `offset..offset + len`;
    /// `EMSGSIZE` when the buffers are shorter.
    fn walk(&self, offset: u64, len: usize, mut f: impl FnMut(u64, usize, usize)) -> Result {
        let mut skip = offset;
        let mut pos = 0;
        for sge in &self.sges[..self.n] {
            if pos == len {
                break;
            }
            let l = u64::from(sge.length);
            if skip >= l {
                skip -= l;
                continue;
            }
            let n = (l - skip).min((len - pos) as u64) as usize;
            f(sge.addr.wrapping_add(skip), pos, n);
            pos += n;
            skip = 0;
        }
        if pos == len { Ok(()) } else { Err(EMSGSIZE) }
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
struct Fifo<W> {
    slots: KVec<Option<W>>,
    head: usize,
    len: usize,
}

impl<W> Fifo<W> {
    fn new(cap: usize) -> Result<Self> {
        let mut slots = KVec::with_capacity(cap.max(1), GFP_KERNEL)?;
        for _ in 0..cap.max(1) {
            slots.push(None, GFP_KERNEL)?;
        }
        Ok(Self { slots, head: 0, len: 0 })
    }

    /// Slot `head + k` for `k` below the capacity, wrapped once (no arithmetic that
    /// could panic).
    fn slot_after_head(&self, k: usize) -> usize {
        let i = self.head.wrapping_add(k);
        i.checked_sub(self.slots.len()).unwrap_or(i)
    }

    fn push(&mut self, w: W) -> Result {
        if self.len >= self.slots.len() {
            return Err(ENOMEM);
        }
        let tail = self.slot_after_head(self.len);
        *self.slots.get_mut(tail).ok_or(EINVAL)? = Some(w);
        self.len = self.len.wrapping_add(1);
        Ok(())
    }

    fn pop(&mut self) -> Option<W> {
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
struct KernelQueues {
    sq: Fifo<KernelSend>,
    rq: Fifo<KernelRecv>,
}

/// An address vector as the rxe provider copies it into a UD send WQE
/// (`struct rxe_av`): what the datagram needs of it.
#[derive(Clone, Copy, Debug)]
pub struct WqeAddress {
    /// Source address (`sgid_addr`).
    pub src: IpAddress,
    /// Destination address (from the destination GID).
    pub dst: IpAddress,
    /// Traffic class (DSCP and ECN bits).
    pub traffic_class: u8,
    /// Hop limit (IP TTL).
    pub hop_limit: u8,
}

impl From<&AddressVector> for WqeAddress {
    fn from(av: &AddressVector) -> Self {
        Self { src: av.src, dst: av.dst, traffic_class: av.traffic_class, hop_limit: av.hop_limit }
    }
}

/// Where a UD send goes, from the WQE (`wr.ud` of `struct rxe_send_wr`).
#[derive(Clone, Copy, Debug)]
pub struct UdDest {
    /// Destination QP.
    pub remote_qpn: u32,
    /// Q_Key to present (the QP's own when the high bit is set).
    pub remote_qkey: u32,
    /// The AH (`ibv_create_ah`'s number), 0 when the provider did not set one.
    pub ah_num: u32,
    /// The address vector copied into the WQE, if it is a valid RoCE v2 one.
    pub av: Option<WqeAddress>,
}

fn parse_wqe_av(av: &bindings::rxe_av) -> Option<WqeAddress> {
    // SAFETY: Union members of plain bytes and integers: any value is valid.
    let (dgid, fam, v4, v6) = unsafe {
        (
            av.grh.dgid.raw,
            u32::from(av.sgid_addr._sockaddr_in.sin_family),
            av.sgid_addr._sockaddr_in.sin_addr.s_addr,
            av.sgid_addr._sockaddr_in6.sin6_addr.in6_u.u6_addr8,
        )
    };
    let src = match fam {
        bindings::AF_INET => IpAddress::V4(v4.to_ne_bytes()),
        bindings::AF_INET6 => IpAddress::V6(v6),
        _ => return None,
    };
    let dst = IpAddress::from_gid(&dgid);
    if core::mem::discriminant(&src) != core::mem::discriminant(&dst) {
        return None;
    }
    Some(WqeAddress {
        src,
        dst,
        traffic_class: av.grh.traffic_class,
        hop_limit: av.grh.hop_limit,
    })
}

/// A send work request, parsed from the send ring.
#[derive(Clone, Copy, Debug)]
pub struct SendWqe {
    /// The work request's id.
    pub wr_id: u64,
    /// The operation.
    pub opcode: SendOpcode,
    /// `SEND_*` flags.
    pub send_flags: u32,
    /// Immediate data (network order) or the rkey to invalidate.
    pub ex: u32,
    /// Remote address (RDMA and atomics).
    pub remote_addr: u64,
    /// Remote key (RDMA and atomics).
    pub rkey: u32,
    /// Compare (CAS) or addend (FAA).
    pub compare_add: u64,
    /// Swap value (CAS).
    pub swap: u64,
    /// The message length in bytes.
    pub length: u64,
    /// Where the payload is (for READ: where it goes; atomics: the 8-byte result).
    pub payload: Payload,
    /// The destination of a UD QP's send.
    pub ud: Option<UdDest>,
}

impl SendWqe {
    /// A zero-length SEND without SGEs: a place to parse WQEs into
    /// ([`Qp::sq_peek_into`]).
    pub const EMPTY: Self = Self {
        wr_id: 0,
        opcode: SendOpcode::Send,
        send_flags: 0,
        ex: 0,
        remote_addr: 0,
        rkey: 0,
        compare_add: 0,
        swap: 0,
        length: 0,
        payload: Payload::Sges(SgeList::EMPTY),
        ud: None,
    };
}

/// A send WQE that cannot be executed: complete it with `IBV_WC_LOC_QP_OP_ERR`.
#[derive(Clone, Copy, Debug)]
pub struct BadWqe {
    /// The work request's id.
    pub wr_id: u64,
    /// Its raw opcode.
    pub opcode: u32,
}

/// A receive work request, parsed from the receive ring.
#[derive(Clone, Copy, Debug)]
pub struct RecvWqe {
    /// The work request's id.
    pub wr_id: u64,
    /// Where received bytes go; `None` when user space wrote too many SGEs (complete
    /// with `IBV_WC_LOC_LEN_ERR`).
    pub sges: Option<SgeList>,
}

/// A work queue: the ring and the limits user space agreed to.
pub(crate) struct WorkQueue {
    pub(crate) queue: Queue,
    pub(crate) max_sge: usize,
    pub(crate) max_inline: usize,
}

/// Parses the receive WQE `ahead` places after the head of a receive ring (a QP's or
/// an SRQ's) without consuming it; `None` when fewer are waiting.
pub(crate) fn parse_recv(wq: &WorkQueue, ahead: u32) -> Option<RecvWqe> {
    let mut list = SgeList::EMPTY;
    let (wr_id, fits) = parse_recv_into(wq, ahead, &mut list)?;
    Some(RecvWqe {
        wr_id,
        sges: fits.then_some(list),
    })
}

/// Parses the receive WQE `ahead` places after the head, its scatter list into
/// `sges`; returns its id and whether the list was valid (`false`: too many SGEs).
fn parse_recv_into(wq: &WorkQueue, ahead: u32, sges: &mut SgeList) -> Option<(u64, bool)> {
    // SAFETY: `rxe_recv_wqe` is integers only, valid for any bytes.
    let w = unsafe { wq.queue.read_as_at::<bindings::rxe_recv_wqe>(ahead, 0) }.ok()??;
    let n = w.dma.num_sge as usize;
    let room = wq.queue.slot_size() - RECV_WQE_HDR;
    let fits = n <= wq.max_sge
        && n <= MAX_SGE
        && n * SGE_SIZE <= room
        && read_sges_into(&wq.queue, ahead, RECV_WQE_HDR, n, sges).is_ok();
    if !fits {
        sges.len = 0;
    }
    Some((w.wr_id, fits))
}

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

/// A queue pair of driver `T`.
#[pin_data]
pub struct Qp<T: Driver> {
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
    data: T::Qp,
}

const SEND_WQE_HDR: usize = size_of::<bindings::rxe_send_wqe>();
pub(crate) const RECV_WQE_HDR: usize = size_of::<bindings::rxe_recv_wqe>();
pub(crate) const SGE_SIZE: usize = size_of::<bindings::rxe_sge>();
const _: () = assert!(SGE_SIZE == 16);
const _: () = assert!(offset_of!(bindings::rxe_send_wqe, dma) + size_of::<bindings::rxe_dma_info>() == SEND_WQE_HDR);
const _: () = assert!(offset_of!(bindings::rxe_recv_wqe, dma) + size_of::<bindings::rxe_dma_info>() == RECV_WQE_HDR);

/// Reads `n` SGEs into `list`, overwriting only the entries it then holds.
fn read_sges_into(q: &Queue, ahead: u32, offset: usize, n: usize, list: &mut SgeList) -> Result {
    list.len = 0;
    for (i, sge) in list.sges.get_mut(..n).ok_or(EINVAL)?.iter_mut().enumerate() {
        // SAFETY: `rxe_sge` is integers, valid for any bytes.
        let raw = unsafe { q.read_as_at::<bindings::rxe_sge>(ahead, offset + i * SGE_SIZE) }?.ok_or(EINVAL)?;
        *sge = Sge {
            addr: raw.addr,
            length: raw.length,
            lkey: raw.lkey,
        };
    }
    list.len = n;
    Ok(())
}

impl<T: Driver> Qp<T> {
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

    /// Takes the oldest send work request a kernel consumer posted.
    pub fn kernel_send_pop(&self) -> Option<KernelSend> {
        Option::as_mut(&mut *self.kq.lock())?.sq.pop()
    }

    /// Takes the oldest receive work request a kernel consumer posted.
    pub fn kernel_recv_pop(&self) -> Option<KernelRecv> {
        Option::as_mut(&mut *self.kq.lock())?.rq.pop()
    }

    /// Adds a completion to the send CQ.
    pub fn push_send(&self, wc: &WorkCompletion) -> Result {
        let ib = self.inner.lock().ib.map_or(core::ptr::null_mut(), NonNull::as_ptr);
        self.send_cq.push_for(wc, ib, false)
    }

    /// Adds a completion to the receive CQ; `solicited` as for [`Cq::push`].
    pub fn push_recv(&self, wc: &WorkCompletion, solicited: bool) -> Result {
        let ib = self.inner.lock().ib.map_or(core::ptr::null_mut(), NonNull::as_ptr);
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
    pub fn data(&self) -> &T::Qp {
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

    /// Parses the send WQE at the head of the send ring without consuming it.
    ///
    /// `None` when the ring is empty (or gone); `Some(Err(_))` for a WQE that cannot be
    /// executed (unknown opcode, too many SGEs, inline data too long).
    pub fn sq_peek(&self) -> Option<Result<SendWqe, BadWqe>> {
        self.sq_peek_at(0)
    }

    /// Like [`sq_peek`](Self::sq_peek), for the WQE `ahead` places after the head: the
    /// transport keeps WQEs in the ring until they complete, as rdma_rxe does.
    pub fn sq_peek_at(&self, ahead: u32) -> Option<Result<SendWqe, BadWqe>> {
        let mut w = SendWqe::EMPTY;
        Some(self.sq_peek_into(ahead, &mut w)?.map(|()| w))
    }

    /// Like [`sq_peek_at`](Self::sq_peek_at), parsed into `out`, which keeps its
    /// contents when this returns `None`. A transport that parses every WQE into the
    /// same place spares the copies of a returned `SendWqe` (about 600 bytes).
    pub fn sq_peek_into(&self, ahead: u32, out: &mut SendWqe) -> Option<Result<(), BadWqe>> {
        let sq = self.sq.lock();
        let wq = sq.as_ref()?;
        // SAFETY: `rxe_send_wqe` is integers, unions of integers and a raw pointer, valid
        // for any bytes.
        let w = unsafe { wq.queue.read_as_at::<bindings::rxe_send_wqe>(ahead, 0) }.ok()??;
        let wr_id = w.wr.wr_id;
        let bad = BadWqe {
            wr_id,
            opcode: w.wr.opcode,
        };
        let Some(opcode) = SendOpcode::from_raw(w.wr.opcode) else {
            return Some(Err(bad));
        };
        let room = wq.queue.slot_size() - SEND_WQE_HDR;
        let flags = w.wr.send_flags;
        let num_sge = w.dma.num_sge as usize;
        // SAFETY: Union members of integers: any bytes are valid.
        let (ex, rdma, atomic) = unsafe { (w.wr.ex.imm_data, w.wr.wr.rdma, w.wr.wr.atomic) };
        let (remote_addr, rkey) = match opcode {
            SendOpcode::AtomicCmpAndSwp | SendOpcode::AtomicFetchAndAdd => {
                (atomic.remote_addr, atomic.rkey)
            }
            _ => (rdma.remote_addr, rdma.rkey),
        };
        let length = if flags & SEND_INLINE != 0 {
            let len = w.dma.length as usize;
            if len > wq.max_inline || len > room || len > MAX_INLINE {
                return Some(Err(bad));
            }
            if !matches!(out.payload, Payload::Inline { .. }) {
                out.payload = Payload::Inline {
                    len: 0,
                    data: [0; MAX_INLINE],
                };
            }
            let Payload::Inline { len: l, data } = &mut out.payload else {
                return Some(Err(bad));
            };
            if wq.queue.read_at(ahead, SEND_WQE_HDR, &mut data[..len]).is_err() {
                return Some(Err(bad));
            }
            *l = len;
            len as u64
        } else {
            if num_sge > wq.max_sge || num_sge > MAX_SGE || num_sge * SGE_SIZE > room {
                return Some(Err(bad));
            }
            if !matches!(out.payload, Payload::Sges(_)) {
                out.payload = Payload::Sges(SgeList::EMPTY);
            }
            let Payload::Sges(list) = &mut out.payload else {
                return Some(Err(bad));
            };
            if read_sges_into(&wq.queue, ahead, SEND_WQE_HDR, num_sge, list).is_err() {
                return Some(Err(bad));
            }
            list.total_len()
        };
        out.ud = (self.qp_type == QpType::Ud).then(|| {
            // SAFETY: Union member of integers and plain structs: any bytes are valid.
            let ud = unsafe { w.wr.wr.ud };
            UdDest {
                remote_qpn: ud.remote_qpn,
                remote_qkey: ud.remote_qkey,
                ah_num: ud.ah_num,
                av: parse_wqe_av(&ud.av),
            }
        });
        out.wr_id = wr_id;
        out.opcode = opcode;
        out.send_flags = flags;
        out.ex = ex;
        out.remote_addr = remote_addr;
        out.rkey = rkey;
        out.compare_add = atomic.compare_add;
        out.swap = atomic.swap;
        out.length = length;
        Some(Ok(()))
    }

    /// The number of WQEs in the send ring (posted by user space, not yet consumed).
    pub fn sq_count(&self) -> u32 {
        self.sq.lock().as_ref().map_or(0, |wq| wq.queue.count())
    }

    /// The number of WQEs in the receive ring.
    pub fn rq_count(&self) -> u32 {
        self.rq.lock().as_ref().map_or(0, |wq| wq.queue.count())
    }

    /// Consumes the send WQE at the head of the send ring.
    pub fn sq_advance(&self) {
        if let Some(wq) = Option::as_mut(&mut *self.sq.lock()) {
            wq.queue.advance_consumer();
        }
    }

    /// Parses the receive WQE at the head of the receive ring without consuming it;
    /// `None` when the ring is empty (or the QP uses an SRQ or is destroyed).
    pub fn rq_peek(&self) -> Option<RecvWqe> {
        self.rq_peek_at(0)
    }

    /// Like [`rq_peek`](Self::rq_peek), for the WQE `ahead` places after the head.
    pub fn rq_peek_at(&self, ahead: u32) -> Option<RecvWqe> {
        parse_recv(self.rq.lock().as_ref()?, ahead)
    }

    /// Like [`rq_peek_at`](Self::rq_peek_at), the scatter list parsed into `sges`:
    /// returns the WQE's id and whether its scatter list was valid (`false`: too many
    /// SGEs, and `sges` is empty).
    pub fn rq_peek_into(&self, ahead: u32, sges: &mut SgeList) -> Option<(u64, bool)> {
        parse_recv_into(self.rq.lock().as_ref()?, ahead, sges)
    }

    /// Consumes the receive WQE at the head of the receive ring.
    pub fn rq_advance(&self) {
        if let Some(wq) = Option::as_mut(&mut *self.rq.lock()) {
            wq.queue.advance_consumer();
        }
    }

    /// Completes every waiting send WQE with `IBV_WC_WR_FLUSH_ERR`; returns how many.
    /// Stops early when the CQ overflows (it raised its error event).
    pub fn flush_send_queue(&self) -> usize {
        let mut n = 0;
        while let Some(w) = self.kernel_send_pop() {
            if self.push_send(&WorkCompletion::flushed(w.wr_id, WcOpcode::Send, self.qpn)).is_err() {
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
            let wr_id = u64::from_ne_bytes([raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7]]);
            let op = u32::from_ne_bytes([raw[12], raw[13], raw[14], raw[15]]);
            let opcode = SendOpcode::from_raw(op).map_or(WcOpcode::Send, SendOpcode::wc_opcode);
            if self.push_send(&WorkCompletion::flushed(wr_id, opcode, self.qpn)).is_err() {
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
            if self.push_recv(&WorkCompletion::flushed(w.wr_id, WcOpcode::Recv, self.qpn), false).is_err() {
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

/// `struct rxe_create_qp_resp`.
#[repr(C)]
struct CreateQpResp {
    rq_mi: MmapInfo,
    sq_mi: MmapInfo,
}

// SAFETY: `repr(C)` of `AsBytes` structs without padding.
unsafe impl AsBytes for CreateQpResp {}

/// The core's `ib_qp` followed by ours; allocated and freed by the core (`size_ib_qp`).
#[repr(C)]
pub(crate) struct QpObject<T: Driver> {
    ib: Opaque<bindings::ib_qp>,
    qp: Option<Arc<Qp<T>>>,
}

impl<T: Driver> QpObject<T> {
    /// A shared reference, for the verbs that run concurrently (posting, modify,
    /// query).
    ///
    /// # Safety
    ///
    /// `ib` is a live `ib_qp` of a device of driver `T`.
    unsafe fn from_raw<'a>(ib: *mut bindings::ib_qp) -> &'a Self {
        // SAFETY: `ib` is the first field of the `repr(C)` struct, which the core
        // allocated with our size and zeroed.
        unsafe { &*ib.cast::<Self>() }
    }

    /// The exclusive reference of `create_qp` and `destroy_qp`.
    ///
    /// # Safety
    ///
    /// As for [`Self::from_raw`], and nothing else uses the object meanwhile: the core
    /// calls `create_qp` before it publishes the QP, and `destroy_qp` once no other
    /// verb runs on it and none will (uverbs destroys under the object's exclusive
    /// lock; a kernel consumer may not race its own destroy).
    unsafe fn from_raw_mut<'a>(ib: *mut bindings::ib_qp) -> &'a mut Self {
        // SAFETY: As in `from_raw`; exclusive per the function's contract.
        unsafe { &mut *ib.cast::<Self>() }
    }

    /// # Safety
    ///
    /// As for `from_raw`.
    unsafe fn get(ib: *mut bindings::ib_qp) -> Result<Arc<Qp<T>>> {
        // SAFETY: Per the contract; `qp` is set in `create_qp` before the core publishes
        // the QP and taken in `destroy_qp`, after which the core calls nothing else.
        unsafe { Self::from_raw(ib) }.qp.clone().ok_or(EINVAL)
    }
}

/// The size of [`QpObject`], for `size_ib_qp`.
pub(crate) const fn object_size<T: Driver>() -> usize {
    size_of::<QpObject<T>>()
}

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
        let (dev, init, udata) =
            unsafe { (Device::<T>::from_raw((*ibqp).device), &mut *init, UData::from_raw(udata)) };
        if init.create_flags != 0 || !init.xrcd.is_null() || !init.rwq_ind_tbl.is_null() {
            return Err(EOPNOTSUPP);
        }
        let qp_type = match init.qp_type {
            bindings::ib_qp_type_IB_QPT_RC => QpType::Rc,
            bindings::ib_qp_type_IB_QPT_UD => QpType::Ud,
            bindings::ib_qp_type_IB_QPT_GSI => QpType::Gsi,
            _ => return Err(EOPNOTSUPP),
        };
        let taken = dev.objects().quotas.qp.take(T::device_attributes(dev).max_qp)?;
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
        let (send_cq, recv_cq) = unsafe { (CqObject::get(init.send_cq)?, CqObject::get(init.recv_cq)?) };
        // SAFETY: An SRQ of our device, held by the core for the QP's life.
        let srq = if init.srq.is_null() { None } else { Some(unsafe { SrqObject::get(init.srq)? }) };
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
        let sq = unsafe { Queue::new(uctx, cap.max_send_wr, SEND_WQE_HDR + room, Direction::FromClient)? };
        let rq_elem = RECV_WQE_HDR + cap.max_recv_sge as usize * SGE_SIZE;
        let rq = match srq {
            Some(_) => None,
            // SAFETY: As above.
            None => Some(unsafe { Queue::new(uctx, cap.max_recv_wr, rq_elem, Direction::FromClient)? }),
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
        let qpn = dev.objects().qps.insert_with(|qpn| parts.take().ok_or(EINVAL)?.build(dev, qpn))?;
        let qp = dev.objects().qps.get(qpn).ok_or(EINVAL)?;
        cap.max_send_wr = caps.max_send_wr;
        cap.max_recv_wr = caps.max_recv_wr;
        cap.max_send_sge = caps.max_send_sge;
        cap.max_recv_sge = caps.max_recv_sge;
        cap.max_inline_data = caps.max_inline_data;
        // SAFETY: The core zeroed our part; nobody else sees the QP yet.
        unsafe {
            (*ibqp).qp_num = qpn;
            QpObject::<T>::from_raw_mut(ibqp).qp = Some(qp);
        }
        taken.keep();
        Ok(0)
    })
}

/// What a new QP is made of: its work queues (rings mapped by user space, or a kernel
/// consumer's queues) and attributes.
struct QpParts {
    ibqp: *mut bindings::ib_qp,
    qp_type: QpType,
    pd: PdId,
    send_cq: Arc<Cq>,
    recv_cq: Arc<Cq>,
    caps: QpCaps,
    sq_sig_all: bool,
    srq: Option<Arc<Srq>>,
    sq: Option<WorkQueue>,
    rq: Option<WorkQueue>,
    kq: Option<KernelQueues>,
}

impl QpParts {
    /// The QP numbered `qpn`, with the driver's data.
    fn build<T: Driver>(self, dev: &Device<T>, qpn: u32) -> Result<Arc<Qp<T>>> {
        let (caps, sq_sig_all, qp_type) = (self.caps, self.sq_sig_all, self.qp_type);
        let data = T::new_qp(dev, &QpInit { qpn, caps, sq_sig_all, qp_type })?;
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

/// `create_qp` for a kernel consumer: a UD or GSI QP (QP number 1) with kernel queues.
///
/// # Safety
///
/// As for `create_qp`.
unsafe fn create_kernel_qp<T: Driver>(
    ibqp: *mut bindings::ib_qp,
    dev: &Device<T>,
    init: &mut bindings::ib_qp_init_attr,
    qp_type: QpType,
) -> Result<i32> {
    if !qp_type.is_datagram() || !init.srq.is_null() {
        return Err(EOPNOTSUPP);
    }
    if init.send_cq.is_null() || init.recv_cq.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: CQs of our device, held by the core for the QP's life.
    let (send_cq, recv_cq) = unsafe { (CqObject::get(init.send_cq)?, CqObject::get(init.recv_cq)?) };
    let lim = T::device_attributes(dev);
    let cap = &mut init.cap;
    if cap.max_send_wr == 0
        || cap.max_recv_wr == 0
        || cap.max_send_wr > lim.max_qp_wr
        || cap.max_recv_wr > lim.max_qp_wr
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
            dev.objects().qps.insert_at(GSI_QPN, parts.build(dev, GSI_QPN)?)?;
            GSI_QPN
        }
        _ => {
            let mut parts = Some(parts);
            dev.objects().qps.insert_with(|qpn| parts.take().ok_or(EINVAL)?.build(dev, qpn))?
        }
    };
    let qp = dev.objects().qps.get(qpn).ok_or(EINVAL)?;
    // SAFETY: The core zeroed our part; nobody else sees the QP yet.
    unsafe {
        (*ibqp).qp_num = qpn;
        QpObject::<T>::from_raw_mut(ibqp).qp = Some(qp);
    }
    Ok(0)
}

/// The QP number of the GSI QP.
pub const GSI_QPN: u32 = 1;

/// `post_send` of a kernel consumer: copies the UD work requests into the send queue.
///
/// # Safety
///
/// `wr` is a valid chain of `ib_ud_wr` (the consumer's contract for UD QPs) whose
/// buffers stay valid until each completes; `bad_wr` is valid for writes or NULL.
unsafe fn post_kernel_sends<T: Driver>(
    dev: &Device<T>,
    qp: &Qp<T>,
    mut wr: *const bindings::ib_send_wr,
    bad_wr: *mut *const bindings::ib_send_wr,
) -> Result {
    // SAFETY: The device is live.
    let lkey = unsafe { (*dev.as_raw()).local_dma_lkey };
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
unsafe fn kernel_send(ud: *const bindings::ib_ud_wr, lkey: u32, sig_all: bool) -> Result<KernelSend> {
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
    let ah = unsafe { crate::ah::AhObject::get(ud.ah) }.ok_or(EINVAL)?;
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

pub(crate) unsafe extern "C" fn post_recv<T: Driver>(
    ibqp: *mut bindings::ib_qp,
    mut wr: *const bindings::ib_recv_wr,
    bad_wr: *mut *const bindings::ib_recv_wr,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: Live QP of our device.
        let (dev, qp) = unsafe { (Device::<T>::from_raw((*ibqp).device), QpObject::<T>::get(ibqp)?) };
        // SAFETY: The device is live.
        let lkey = unsafe { (*dev.as_raw()).local_dma_lkey };
        while !wr.is_null() {
            let r = if !qp.kernel || qp.state() == QpState::Reset {
                Err(EINVAL)
            } else {
                // SAFETY: The consumer's valid chain; buffers kept until completion.
                unsafe { KernelBuffers::from_raw((*wr).sg_list, (*wr).num_sge, lkey) }.and_then(|buffers| {
                    // SAFETY: Integer union member.
                    let wr_id = unsafe { (*wr).__bindgen_anon_1.wr_id };
                    Option::as_mut(&mut *qp.kq.lock()).ok_or(EINVAL)?.rq.push(KernelRecv { wr_id, buffers })
                })
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

pub(crate) unsafe extern "C" fn modify_qp<T: Driver>(
    ibqp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_qp_attr,
    attr_mask: kernel::ffi::c_int,
    _udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    from_result(|| {
        let m = attr_mask as u32;
        if m & !mask::STANDARD != 0 {
            return Err(EOPNOTSUPP);
        }
        // SAFETY: Live QP of our device; `attr` valid with held GID attributes.
        let (dev, qp, mut req) = unsafe {
            (Device::<T>::from_raw((*ibqp).device), QpObject::<T>::get(ibqp)?, parse_modify(&*attr, m)?)
        };
        check_values(&req, &qp.caps)?;
        // One transition at a time, each followed by the driver's reaction to it
        // before the next one starts.
        let _modify = qp.modify.lock();
        let from = {
            let mut inner = qp.inner.lock();
            let cur = if req.has(mask::CUR_STATE) { req.cur_state } else { inner.attrs.state };
            let new = if req.has(mask::STATE) { req.new_state } else { cur };
            req.cur_state = cur;
            req.new_state = new;
            // SAFETY: Pure function of its arguments.
            let ok = unsafe {
                bindings::ib_modify_qp_is_ok(cur as u32, new as u32, qp.qp_type as u32, m)
            };
            if !ok {
                return Err(EINVAL);
            }
            T::check_modify_qp(dev, &qp, &inner.attrs, &req)?;
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
        T::qp_modified(dev, &qp, from, req.new_state);
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
        let (dev, qp) = unsafe { (Device::<T>::from_raw((*ibqp).device), QpObject::<T>::get(ibqp)?) };
        // SAFETY: `msg` is the message being built, which only this callback writes
        // meanwhile.
        unsafe { crate::restrack::ResourceAttrs::fill(msg, |attrs| T::qp_resource(dev, &qp, attrs)) }?;
        Ok(0)
    })
}

pub(crate) unsafe extern "C" fn query_qp<T: Driver>(
    ibqp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_qp_attr,
    _attr_mask: kernel::ffi::c_int,
    init: *mut bindings::ib_qp_init_attr,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: Live QP of ours; the outputs are valid for writes.
        let (qp, attr, init, ib) =
            unsafe { (QpObject::<T>::get(ibqp)?, &mut *attr, &mut *init, &*ibqp) };
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
        attr.qp_access_flags = a.access.bits() as _;
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

pub(crate) unsafe extern "C" fn destroy_qp<T: Driver>(
    ibqp: *mut bindings::ib_qp,
    _udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    // SAFETY: The core destroys a live QP of ours once, when no other verb runs on it.
    let (dev, obj) = unsafe { (Device::<T>::from_raw((*ibqp).device), QpObject::<T>::from_raw_mut(ibqp)) };
    let Some(qp) = obj.qp.take() else {
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
        let (dev, qp) = unsafe { (Device::<T>::from_raw((*ibqp).device), QpObject::<T>::get(ibqp)?) };
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
