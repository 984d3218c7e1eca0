// SPDX-License-Identifier: GPL-2.0

//! Memory regions (`struct ib_mr`) over pinned user memory (`struct ib_umem`).
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h),
//! [`include/rdma/ib_umem.h`](srctree/include/rdma/ib_umem.h).
//!
//! `ibv_reg_mr` pins the pages ([`Mr`] owns the umem) and enters the region in the
//! device's key table under `lkey == rkey == index << 8 | random byte`. The transport
//! finds a region by key with [`MrTable::with_mr`], which checks the full key, the
//! protection domain and the access rights, and then copies bytes with [`Mr::write`],
//! [`Mr::read`] and [`Mr::atomic`], which check the bounds.
//!
//! The lookup runs under the table's lock and counts the transfer as a user of the
//! region; the copy runs outside the lock (with interrupts on). Deregistration
//! ([`MrTable::unlist`], the only way an MR leaves its table) removes the key first, so
//! no new transfer finds it, then waits for the counted users to finish before it
//! unpins the pages, in process context (unpinning may sleep).
//!
//! `ibv_rereg_mr` changes a region's PD and access rights in place, keys and pages
//! kept (`rereg_user_mr`, as rdma_rxe); a new translation is not supported.

use crate::{bindings, skb::SkBuff, table::Table};
use core::ptr::NonNull;
use kernel::{
    error::from_err_ptr,
    prelude::*,
    sync::{
        atomic::{Acquire, Atomic, Relaxed, Release},
        Arc,
    },
    time::{delay::fsleep, Delta},
    types::Opaque,
};

/// Access rights of an MR or QP (`enum ib_access_flags`, the values of `ibv_access_flags`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Access(u32);

impl Access {
    /// The local HCA may write (receives, READ responses, atomic results).
    pub const LOCAL_WRITE: Self = Self(bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE);
    /// Remote peers may RDMA WRITE.
    pub const REMOTE_WRITE: Self = Self(bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE);
    /// Remote peers may RDMA READ.
    pub const REMOTE_READ: Self = Self(bindings::ib_access_flags_IB_ACCESS_REMOTE_READ);
    /// Remote peers may issue atomics.
    pub const REMOTE_ATOMIC: Self = Self(bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC);
    /// Memory windows may be bound.
    pub const MW_BIND: Self = Self(bindings::ib_access_flags_IB_ACCESS_MW_BIND);
    /// No right beyond local read (every MR may be read locally).
    pub const LOCAL_READ: Self = Self(0);
    /// Rights this driver implements for MRs.
    pub const SUPPORTED_MR: Self = Self(
        Self::LOCAL_WRITE.0 | Self::REMOTE_WRITE.0 | Self::REMOTE_READ.0 | Self::REMOTE_ATOMIC.0,
    );
    /// Flags a QP accepts in `qp_access_flags`: the remote rights it grants, plus
    /// `LOCAL_WRITE`, which applications commonly pass (perftest's SEND tests do) and
    /// every HCA, rdma_rxe included, ignores on a QP.
    pub const SUPPORTED_QP: Self = Self(
        Self::LOCAL_WRITE.0 | Self::REMOTE_WRITE.0 | Self::REMOTE_READ.0 | Self::REMOTE_ATOMIC.0,
    );

    /// From raw `IB_ACCESS_*` bits.
    pub fn from_bits(bits: u32) -> Self {
        Self(bits)
    }

    /// The raw bits.
    pub fn bits(self) -> u32 {
        self.0
    }

    /// Returns `true` when every right of `other` is in `self`.
    pub fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// Checks an MR's requested rights like `ib_check_mr_access`: `EINVAL` for remote
    /// write or atomic without local write, `EOPNOTSUPP` for rights not implemented
    /// (on-demand paging, memory windows, flush, relaxed ordering is ignored).
    pub fn check_mr(self) -> Result {
        let optional = bindings::ib_access_flags_IB_ACCESS_RELAXED_ORDERING;
        let remote_w = Self::REMOTE_WRITE.0 | Self::REMOTE_ATOMIC.0;
        if self.0 & remote_w != 0 && self.0 & Self::LOCAL_WRITE.0 == 0 {
            return Err(EINVAL);
        }
        if self.0 & !bindings::ib_access_flags_IB_ACCESS_SUPPORTED != 0 {
            return Err(EINVAL);
        }
        if self.0 & !(Self::SUPPORTED_MR.0 | optional) != 0 {
            return Err(EOPNOTSUPP);
        }
        Ok(())
    }
}

impl core::ops::BitOr for Access {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

/// The identity of a protection domain: objects of one PD may use each other.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct PdId(usize);

impl PdId {
    pub(crate) fn from_raw(pd: *const bindings::ib_pd) -> Self {
        Self(pd as usize)
    }
}

/// The 8-byte atomic operations of RDMA.
#[derive(Clone, Copy, Debug)]
pub enum AtomicOp {
    /// Writes `swap` if the word equals `compare`.
    CompareSwap {
        /// Expected value.
        compare: u64,
        /// New value.
        swap: u64,
    },
    /// Adds `add` to the word.
    FetchAdd {
        /// Addend.
        add: u64,
    },
}

/// A registered memory region.
///
/// # Invariants
///
/// `umem` is a pinned user memory region of `length` bytes from `ib_umem_get`, owned by
/// `self` and released on drop; `pages` are its pages in order (live while it is), and
/// its first byte is at `first` in the first page. `users` counts the transfers of
/// [`MrTable::with_mr`] that run on the region; it only rises while the region is in
/// its table. `pd` (a [`PdId`]) and `access` ([`Access`] bits) change only through
/// `rereg_user_mr`, as single stores: a transfer sees the old or the new value.
pub struct Mr {
    umem: NonNull<bindings::ib_umem>,
    users: Atomic<u32>,
    pages: KVVec<NonNull<bindings::page>>,
    first: usize,
    pd: Atomic<usize>,
    iova: u64,
    length: u64,
    access: Atomic<u32>,
    key: u32,
}

// SAFETY: The umem is pinned memory described by an immutable table; copies into it
// through `&Mr` are byte copies that need no exclusion (RDMA gives no ordering between
// concurrent transfers to the same bytes either).
unsafe impl Send for Mr {}
// SAFETY: As above.
unsafe impl Sync for Mr {}

impl Mr {
    /// The local key.
    pub fn lkey(&self) -> u32 {
        self.key
    }

    /// The remote key (the same value as the local key).
    pub fn rkey(&self) -> u32 {
        self.key
    }

    /// The first virtual address of the region.
    pub fn iova(&self) -> u64 {
        self.iova
    }

    /// The length in bytes.
    pub fn length(&self) -> u64 {
        self.length
    }

    /// The access rights.
    pub fn access(&self) -> Access {
        Access(self.access.load(Relaxed))
    }

    /// The protection domain.
    pub fn pd(&self) -> PdId {
        PdId(self.pd.load(Relaxed))
    }

    /// The offset of `[va, va + len)` in the region; `EFAULT` when it is not inside.
    pub fn offset_of(&self, va: u64, len: u64) -> Result<usize> {
        let off = va.checked_sub(self.iova).ok_or(EFAULT)?;
        let end = off.checked_add(len).ok_or(EFAULT)?;
        if end > self.length {
            return Err(EFAULT);
        }
        usize::try_from(off).map_err(|_| EFAULT)
    }

    /// The page table position of `[va, va + len)`; `EFAULT` when it is not inside.
    fn position(&self, va: u64, len: u64) -> Result<usize> {
        self.offset_of(va, len)?
            .checked_add(self.first)
            .ok_or(EFAULT)
    }

    /// Copies `data` into the region at virtual address `va`.
    pub fn write(&self, va: u64, data: &[u8]) -> Result {
        let pos = self.position(va, data.len() as u64)?;
        // SAFETY: The pages are live (type invariant); the helper bounds-checks against
        // their number and reads exactly `data.len()` bytes of `data`.
        kernel::error::to_result(unsafe {
            bindings::metaroce_pages_copy(
                self.pages.as_ptr().cast(),
                self.pages.len(),
                pos,
                data.as_ptr().cast_mut().cast(),
                data.len(),
                true,
            )
        })
    }

    /// Copies bytes of the region at virtual address `va` into `out`.
    pub fn read(&self, va: u64, out: &mut [u8]) -> Result {
        let pos = self.position(va, out.len() as u64)?;
        // SAFETY: As in `write`; writes exactly `out.len()` bytes of `out`.
        kernel::error::to_result(unsafe {
            bindings::metaroce_pages_copy(
                self.pages.as_ptr().cast(),
                self.pages.len(),
                pos,
                out.as_mut_ptr().cast(),
                out.len(),
                false,
            )
        })
    }

    /// Appends bytes `[va, va + len)` of the region to `skb` as paged fragments,
    /// without copying them (zero-copy transmit). The fragments hold references on
    /// the pages, which therefore outlive the region's deregistration for as long as
    /// the buffer lives; the buffer carries whatever the application leaves there.
    ///
    /// `EFAULT` when the range is not inside the region, `EMSGSIZE` when `skb` runs out
    /// of fragment slots (it then holds the fragments appended so far).
    pub fn attach_to(&self, va: u64, len: usize, skb: &mut SkBuff) -> Result {
        let pos = self.position(va, len as u64)?;
        // SAFETY: The pages are live (type invariant); the helper bounds-checks against
        // their number and only appends fragments, each with its own page reference,
        // to the skb we own (`&mut`).
        kernel::error::to_result(unsafe {
            bindings::metaroce_pages_to_skb(
                self.pages.as_ptr().cast(),
                self.pages.len(),
                pos,
                len,
                skb.as_raw(),
            )
        })
    }

    /// Copies `len` bytes of `skb`'s data from byte `offset` on, fragments included,
    /// into the region at virtual address `va`.
    pub fn write_from_skb(&self, va: u64, skb: &SkBuff, offset: usize, len: usize) -> Result {
        let pos = self.position(va, len as u64)?;
        // SAFETY: The pages are live; the helper checks both ranges and only reads the
        // skb, which is live for the call (`&SkBuff`).
        kernel::error::to_result(unsafe {
            bindings::metaroce_pages_copy_from_skb(
                self.pages.as_ptr().cast(),
                self.pages.len(),
                pos,
                skb.as_raw(),
                offset,
                len,
            )
        })
    }

    /// Performs `op` on the 8-byte aligned word at `va`, returns its original value.
    /// `EINVAL` when `va` is not 8-byte aligned.
    pub fn atomic(&self, va: u64, op: AtomicOp) -> Result<u64> {
        if va & 7 != 0 {
            return Err(EINVAL);
        }
        let pos = self.position(va, 8)?;
        let (is_cas, a, b) = match op {
            AtomicOp::CompareSwap { compare, swap } => (true, compare, swap),
            AtomicOp::FetchAdd { add } => (false, add, 0),
        };
        let mut orig = 0u64;
        // SAFETY: The pages are live; the helper checks bounds and alignment and writes
        // `orig`.
        kernel::error::to_result(unsafe {
            bindings::metaroce_pages_atomic64(
                self.pages.as_ptr().cast(),
                self.pages.len(),
                pos,
                is_cas,
                a,
                b,
                &mut orig,
            )
        })?;
        Ok(orig)
    }
}

/// The pages of `umem` in order.
///
/// # Safety
///
/// `umem` must be a live umem.
unsafe fn umem_pages(umem: NonNull<bindings::ib_umem>) -> Result<KVVec<NonNull<bindings::page>>> {
    // SAFETY: Live umem (the caller's guarantee).
    let n = unsafe { bindings::metaroce_umem_num_pages(umem.as_ptr()) };
    let mut pages = KVVec::with_capacity(n, GFP_KERNEL)?;
    // SAFETY: The helper stores at most `n` page pointers (never NULL: they are the
    // umem's pinned pages) into the spare capacity, which has room for `n`.
    let got = unsafe {
        bindings::metaroce_umem_pages(
            umem.as_ptr(),
            pages.spare_capacity_mut().as_mut_ptr().cast(),
            n,
        )
    };
    let got = usize::try_from(got).map_err(|_| EINVAL)?;
    if got != n {
        return Err(EINVAL);
    }
    // SAFETY: The first `got <= capacity` elements were just initialised.
    unsafe { pages.inc_len(got) };
    Ok(pages)
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: Owned umem (type invariant), released once.
        unsafe { bindings::ib_umem_release(self.umem.as_ptr()) };
    }
}

/// The MRs of a device by key.
pub type MrTable = Table<Mr>;

impl Table<Mr> {
    /// Calls `f` with the MR of `key` if it belongs to `pd` and grants `access`.
    ///
    /// `EINVAL` for an unknown key, `EACCES` for another PD or a missing right (the
    /// transport maps both to the protection/access error of its side).
    ///
    /// Usable in softirq context: no reference escapes, and [`unlist`](Self::unlist)
    /// does not return while `f` runs. The lookup holds the table's lock; `f` runs
    /// outside it and must not sleep.
    pub fn with_mr<R>(
        &self,
        key: u32,
        pd: PdId,
        access: Access,
        f: impl FnOnce(&Mr) -> Result<R>,
    ) -> Result<R> {
        let mr = self.with(key >> 8, |mr| {
            let mr = mr.ok_or(EINVAL)?;
            if mr.key != key {
                return Err(EINVAL);
            }
            if mr.pd() != pd || !mr.access().contains(access) {
                return Err(EACCES);
            }
            // Under the table's lock, which `unlist` takes to remove the MR: a count
            // raised here is one `unlist` waits for.
            mr.users.add(1, Relaxed);
            Ok(NonNull::from(mr))
        })?;
        // SAFETY: The MR was in the table when `users` was raised under the table's
        // lock, and its owners drop it only through `unlist`, which waits for `users`
        // to fall back to 0: it lives until the `fetch_sub` below.
        let mr = unsafe { mr.as_ref() };
        let r = f(mr);
        // Release: the copies of `f` happen before `unlist` sees the count fall.
        mr.users.fetch_sub(1, Release);
        r
    }

    /// Removes the MR of `index` from the table and waits until no transfer of
    /// [`with_mr`](Self::with_mr) runs on it; returns the table's reference. Sleeps.
    /// MRs must leave the table this way only (not with [`Table::remove`]): the
    /// safety of `with_mr` rests on it.
    pub fn unlist(&self, index: u32) -> Option<Arc<Mr>> {
        let mr = self.remove(index)?;
        // Acquire: pairs with the `Release` of `with_mr`; a transfer takes a copy's
        // time, so a short sleep between looks suffices.
        while mr.users.load(Acquire) != 0 {
            fsleep(Delta::from_micros(20));
        }
        Some(mr)
    }
}

/// The key space: 24-bit indices, index 0 unused (key 0 is no MR).
pub(crate) const MR_INDEX_MIN: u32 = 1;
pub(crate) const MR_INDEX_MAX: u32 = (1 << 24) - 1;

/// The core's `ib_mr` followed by ours; allocated by us in `reg_user_mr` and
/// `get_dma_mr` (which has no `Mr`: it is the local DMA key).
#[repr(C)]
struct MrObject {
    ib: Opaque<bindings::ib_mr>,
    mr: Option<Arc<Mr>>,
}

/// `get_dma_mr`: kernel consumers' access to their own memory by virtual address under
/// the device's local DMA key (`IBK_LOCAL_DMA_LKEY`, so the core asks for one only for
/// `IB_PD_UNSAFE_GLOBAL_RKEY`, which is refused: no remote access to all memory).
pub(crate) unsafe extern "C" fn get_dma_mr(
    ibpd: *mut bindings::ib_pd,
    access: kernel::ffi::c_int,
) -> *mut bindings::ib_mr {
    let remote = bindings::ib_access_flags_IB_ACCESS_REMOTE_READ
        | bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE
        | bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC;
    if access as u32 & remote != 0 {
        return EOPNOTSUPP.to_ptr();
    }
    let obj = match KBox::new(
        MrObject {
            ib: Opaque::zeroed(),
            mr: None,
        },
        GFP_KERNEL,
    ) {
        Ok(o) => KBox::into_raw(o),
        Err(e) => return Error::from(e).to_ptr(),
    };
    // SAFETY: Fresh allocation; the core fills in device, PD and type after we return.
    unsafe {
        let ib = (*obj).ib.get();
        (*ib).lkey = (*(*ibpd).device).local_dma_lkey;
        (*ib).rkey = 0;
        ib
    }
}

/// `reg_user_mr` of `length` bytes of user memory at `start`, known to the device
/// `ib` as `iova..iova + length`, with rights `access` (checked) in `pd`: pins the
/// pages, enters the region in `mrs` and returns the core's MR for it.
///
/// # Safety
///
/// `ib` is a live device of ours whose MR table is `mrs`, called in the verb's
/// context (the user's memory is the current process's).
pub(crate) unsafe fn register_user(
    ib: *mut bindings::ib_device,
    mrs: &MrTable,
    pd: PdId,
    start: u64,
    length: u64,
    iova: u64,
    access: Access,
) -> Result<*mut bindings::ib_mr> {
    let addr = usize::try_from(start).map_err(|_| EINVAL)?;
    let len = usize::try_from(length).map_err(|_| EINVAL)?;
    iova.checked_add(length).ok_or(EINVAL)?;
    // SAFETY: Live device; pins the user pages (writable when any write right is asked).
    let umem = from_err_ptr(unsafe {
        bindings::ib_umem_get_attr_or_va(
            ib,
            core::ptr::null(),
            0,
            addr as u64,
            len,
            access.bits() as i32,
        )
    })?;
    // SAFETY: Not NULL: `from_err_ptr` passed it and `ib_umem_get` never returns NULL.
    let umem = unsafe { NonNull::new_unchecked(umem) };
    // SAFETY: `umem` is live.
    let pages = match unsafe { umem_pages(umem) } {
        Ok(p) => p,
        Err(e) => {
            // SAFETY: Ours, released once: no `Mr` owns it yet.
            unsafe { bindings::ib_umem_release(umem.as_ptr()) };
            return Err(e);
        }
    };
    // SAFETY: Live umem.
    let first = unsafe { bindings::metaroce_umem_offset(umem.as_ptr()) };
    // INVARIANT: `umem` is ours from here on, owned by the `Mr` (released on every error
    // path by its drop), with its pages and its offset in the first.
    let mut mr = Some(Mr {
        umem,
        users: Atomic::new(0),
        pages,
        first,
        pd: Atomic::new(pd.0),
        iova,
        length,
        access: Atomic::new(access.bits()),
        key: 0,
    });
    let mut key = 0;
    let index = mrs.insert_with(|index| {
        // SAFETY: Plain call.
        key = index << 8 | u32::from(unsafe { bindings::get_random_u8() });
        let mut m = mr.take().ok_or(EINVAL)?;
        m.key = key;
        Ok(Arc::new(m, GFP_KERNEL)?)
    })?;
    let Some(mr) = mrs.get(index) else {
        return Err(EINVAL);
    };
    let obj = KBox::new(
        MrObject {
            ib: Opaque::zeroed(),
            mr: Some(mr),
        },
        GFP_KERNEL,
    )
    .inspect_err(|_| {
        mrs.unlist(index);
    })?;
    let obj = KBox::into_raw(obj);
    // SAFETY: Fresh allocation; the core fills in device, PD and type after we return.
    unsafe {
        let ib = (*obj).ib.get();
        (*ib).lkey = key;
        (*ib).rkey = key;
        (*ib).iova = iova;
        (*ib).length = length;
        (*ib).page_size = kernel::page::PAGE_SIZE as u32;
        Ok(ib)
    }
}

/// `dereg_mr`: takes the region out of `mrs` (waiting for the transfers under way),
/// unpins its pages and frees the core's MR; `true` for a user MR (`false`: the local
/// DMA key of `get_dma_mr`).
///
/// # Safety
///
/// The core deregisters `ibmr`, a live MR of the device whose MR table is `mrs`, once.
pub(crate) unsafe fn deregister(ibmr: *mut bindings::ib_mr, mrs: &MrTable) -> bool {
    // CAST: Every `ib_mr` of our devices is the first field of an `MrObject` from
    // `reg_user_mr` or `get_dma_mr`.
    let obj = ibmr.cast::<MrObject>();
    // SAFETY: The core deregisters a live MR of ours once; it came from `KBox::into_raw`.
    let obj = unsafe { KBox::from_raw(obj) };
    // Unlist first: no new transfer finds the key, and those under way finish.
    let user = if let Some(mr) = &obj.mr {
        mrs.unlist(mr.key >> 8);
        true
    } else {
        false
    };
    drop(obj);
    user
}

/// `rereg_user_mr`: changes an MR's PD and access rights in place, keeping its keys and
/// its pages, as rdma_rxe does; a new translation (`IB_MR_REREG_TRANS`) is
/// `EOPNOTSUPP`, so the core never needs a new MR from us. Transfers under way finish
/// with the old values; later ones see the new ones.
pub(crate) unsafe extern "C" fn rereg_user_mr(
    ibmr: *mut bindings::ib_mr,
    flags: kernel::ffi::c_int,
    _start: u64,
    _length: u64,
    _virt_addr: u64,
    access: kernel::ffi::c_int,
    ibpd: *mut bindings::ib_pd,
    _udata: *mut bindings::ib_udata,
) -> *mut bindings::ib_mr {
    let supported = (bindings::ib_mr_rereg_flags_IB_MR_REREG_PD
        | bindings::ib_mr_rereg_flags_IB_MR_REREG_ACCESS) as i32;
    if flags & !supported != 0 {
        return EOPNOTSUPP.to_ptr();
    }
    // CAST: Every `ib_mr` of our devices is the first field of an `MrObject`.
    let obj = ibmr.cast::<MrObject>();
    // SAFETY: uverbs holds the MR's object exclusively during the verb: it is live and
    // `mr` is not taken meanwhile (only `dereg_mr` frees the object).
    let Some(mr) = (unsafe { (*obj).mr.as_ref() }) else {
        // The local DMA key has no user memory to re-register.
        return EINVAL.to_ptr();
    };
    // SAFETY: The umem is owned by the live `Mr` (type invariant).
    let err = unsafe { bindings::ib_umem_check_rereg(mr.umem.as_ptr(), flags, access) };
    if err != 0 {
        return Error::from_errno(err).to_ptr();
    }
    let rereg_access = flags & bindings::ib_mr_rereg_flags_IB_MR_REREG_ACCESS as i32 != 0;
    let access = Access::from_bits(access as u32);
    if rereg_access {
        if let Err(e) = access.check_mr() {
            return e.to_ptr();
        }
    }
    if flags & bindings::ib_mr_rereg_flags_IB_MR_REREG_PD as i32 != 0 {
        if ibpd.is_null() {
            return EINVAL.to_ptr();
        }
        mr.pd.store(PdId::from_raw(ibpd).0, Relaxed);
    }
    if rereg_access {
        mr.access.store(access.bits(), Relaxed);
    }
    // NULL: the same MR, changed in place (the core then moves `ib_mr.pd` itself).
    core::ptr::null_mut()
}
