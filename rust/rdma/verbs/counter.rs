// SPDX-License-Identifier: GPL-2.0

//! Per-QP statistic counters (`struct rdma_counter`): `rdma statistic qp set ... auto
//! on`, `rdma statistic qp bind`, `rdma statistic qp show`.
//!
//! C headers: [`include/rdma/rdma_counter.h`](srctree/include/rdma/rdma_counter.h),
//! [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h) (`counter_*` ops).
//!
//! The last [`Driver::QP_COUNTERS`] entries of [`Driver::HW_COUNTERS`] are per QP: the
//! driver keeps them for each QP from its creation ([`Driver::qp_counters`], e.g.
//! relaxed atomics the transport increments) and this module does the rest. An
//! `rdma_counter` shares the port's descriptors, as ib_core requires (it adds a
//! counter's values to the port's by index); the port's other counters are disabled
//! in it, so `rdma statistic qp show` lists only the per-QP ones. A counter's value is,
//! per counter, what its QPs counted while bound to it: a QP's values are noted when
//! it binds, and what it counted until it unbinds (or is destroyed, which unbinds it
//! first) stays in the counter. In the port's view (`rdma statistic show link`)
//! ib_core adds the counters' values to the driver's, which are 0 for the per-QP
//! entries: there they are the traffic of the QPs while bound to a counter.
//!
//! ib_core calls bind, unbind and update under the counter's mutex (`counter->lock`),
//! which therefore guards the state kept here.

use crate::{
    bindings,
    device::Driver,
    qp::{Qp, QpObject},
    stats::MAX_QP_COUNTERS,
};
use core::{marker::PhantomData, ptr};
use kernel::{
    error::from_result,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc,
    },
    types::Opaque,
};

/// Counter ids handed out so far (ib_core tracks counters by id; 0 is never used).
static NEXT_ID: Atomic<u32> = Atomic::new(1);

/// A QP bound to a counter, with its values when it bound.
struct Member<T: Driver> {
    qp: Arc<Qp<T::Qp>>,
    /// The core's QP, as its identity at unbind.
    ib: *mut bindings::ib_qp,
    base: [u64; MAX_QP_COUNTERS],
}

/// What the driver keeps of one counter, under the counter's mutex.
struct State<T: Driver> {
    members: KVec<Member<T>>,
    /// What QPs that left the counter counted while bound to it.
    retired: [u64; MAX_QP_COUNTERS],
}

/// The core's `rdma_counter` followed by ours; allocated (zeroed) and freed by the core
/// (`size_rdma_counter`).
#[repr(C)]
struct CounterObject<T: Driver> {
    raw: Opaque<bindings::rdma_counter>,
    /// Written by `counter_init`, dropped by `counter_dealloc`.
    state: State<T>,
}

/// The per-QP counters of driver `T`: the C callbacks and their limits.
pub(crate) struct Adapter<T: Driver>(PhantomData<T>);

impl<T: Driver> Adapter<T> {
    const N: usize = {
        assert!(T::QP_COUNTERS <= MAX_QP_COUNTERS);
        assert!(T::QP_COUNTERS <= T::HW_COUNTERS.len());
        T::QP_COUNTERS
    };

    /// Sets the counter callbacks of `ops` when the driver has per-QP counters.
    pub(crate) fn set_ops(ops: &mut bindings::ib_device_ops) {
        if Self::N == 0 {
            return;
        }
        ops.counter_init = Some(Self::init);
        ops.counter_alloc_stats = Some(Self::alloc_stats);
        ops.counter_bind_qp = Some(Self::bind_qp);
        ops.counter_unbind_qp = Some(Self::unbind_qp);
        ops.counter_update_stats = Some(Self::update_stats);
        ops.counter_dealloc = Some(Self::dealloc);
        ops.size_rdma_counter = size_of::<CounterObject<T>>();
    }

    /// The index of the first per-QP counter in [`Driver::HW_COUNTERS`].
    const FIRST: usize = T::HW_COUNTERS.len() - Self::N;

    /// The driver's values of `qp`, `N` of them.
    fn read(qp: &Qp<T::Qp>) -> [u64; MAX_QP_COUNTERS] {
        let mut v = [0; MAX_QP_COUNTERS];
        T::qp_counters(qp, &mut v[..Self::N]);
        v
    }

    /// # Safety
    ///
    /// `counter` is a live counter of a device of driver `T` (allocated with
    /// [`Self::SIZE`]) whose state `counter_init` wrote, and the caller holds its mutex
    /// or is its last user.
    unsafe fn state<'a>(counter: *mut bindings::rdma_counter) -> &'a mut State<T> {
        // SAFETY: `raw` is the first field of the `repr(C)` object the core allocated
        // with our size; exclusive per the function's contract.
        unsafe { &mut (*counter.cast::<CounterObject<T>>()).state }
    }

    unsafe extern "C" fn init(counter: *mut bindings::rdma_counter) {
        let state = State::<T> {
            members: KVec::new(),
            retired: [0; MAX_QP_COUNTERS],
        };
        // The state owns no memory until a QP binds: the core's error paths that free
        // the counter without `counter_dealloc` (before a bind succeeded) leak nothing.
        // SAFETY: The core allocated the object with our size right before this call
        // and nobody else sees it yet; it is written before any other callback runs.
        unsafe { ptr::write(&raw mut (*counter.cast::<CounterObject<T>>()).state, state) };
    }

    unsafe extern "C" fn alloc_stats(
        counter: *mut bindings::rdma_counter,
    ) -> *mut bindings::rdma_hw_stats {
        let descs = T::HW_COUNTERS;
        // SAFETY: `descs` is a `'static` array of `rdma_stat_desc` (`CounterDesc` is
        // transparent), so it outlives the struct, which the RDMA core frees.
        let stats = unsafe {
            bindings::rdma_alloc_hw_stats_struct(
                descs.as_ptr().cast(),
                descs.len() as kernel::ffi::c_int,
                bindings::RDMA_HW_STATS_DEFAULT_LIFESPAN as kernel::ffi::c_ulong,
            )
        };
        if stats.is_null() {
            return stats;
        }
        const BITS: usize = kernel::ffi::c_ulong::BITS as usize;
        // SAFETY: The fresh struct is ours until returned; `is_disabled` has a bit per
        // counter. The counter is live (the core allocated it for this call).
        unsafe {
            for i in 0..Self::FIRST {
                *(*stats).is_disabled.add(i / BITS) |= 1 << (i % BITS);
            }
            (*counter).id = NEXT_ID.fetch_add(1, Relaxed);
        }
        stats
    }

    unsafe extern "C" fn bind_qp(
        counter: *mut bindings::rdma_counter,
        ib: *mut bindings::ib_qp,
        _port: u32,
    ) -> kernel::ffi::c_int {
        from_result(|| {
            // SAFETY: The core binds a live QP of ours (it holds a reference) to a live
            // counter whose mutex it holds.
            let (qp, state) = unsafe { (QpObject::<T::Qp>::get(ib)?, Self::state(counter)) };
            let base = Self::read(&qp);
            state.members.push(Member { qp, ib, base }, GFP_KERNEL)?;
            // SAFETY: As above; the core reads `qp->counter` to unbind it later.
            unsafe { (*ib).counter = counter };
            Ok(0)
        })
    }

    unsafe extern "C" fn unbind_qp(ib: *mut bindings::ib_qp, _port: u32) -> kernel::ffi::c_int {
        // SAFETY: The core unbinds a live QP from its live counter (`qp->counter`, set
        // by `bind_qp`), under the counter's mutex.
        let counter = unsafe { (*ib).counter };
        if counter.is_null() {
            return 0;
        }
        // SAFETY: As above.
        let state = unsafe { Self::state(counter) };
        if let Some(i) = state.members.iter().position(|m| m.ib == ib) {
            if let Ok(m) = state.members.remove(i) {
                let now = Self::read(&m.qp);
                for ((r, n), b) in state.retired.iter_mut().zip(now).zip(m.base) {
                    *r = r.wrapping_add(n.wrapping_sub(b));
                }
            }
        }
        // SAFETY: As above.
        unsafe { (*ib).counter = ptr::null_mut() };
        0
    }

    unsafe extern "C" fn update_stats(counter: *mut bindings::rdma_counter) -> kernel::ffi::c_int {
        // SAFETY: The core asks under the counter's mutex; `stats` came from
        // `alloc_stats` (every counter of `HW_COUNTERS`).
        let (state, values) = unsafe {
            let stats = (*counter).stats;
            let n = usize::try_from((*stats).num_counters).unwrap_or(0);
            (
                Self::state(counter),
                core::slice::from_raw_parts_mut((*stats).value.as_mut_ptr(), n),
            )
        };
        let mut sum = state.retired;
        for m in state.members.iter() {
            let now = Self::read(&m.qp);
            for ((s, n), b) in sum.iter_mut().zip(now).zip(m.base) {
                *s = s.wrapping_add(n.wrapping_sub(b));
            }
        }
        values.fill(0);
        for (v, s) in values.iter_mut().skip(Self::FIRST).zip(sum) {
            *v = s;
        }
        0
    }

    unsafe extern "C" fn dealloc(counter: *mut bindings::rdma_counter) -> kernel::ffi::c_int {
        // SAFETY: The core deallocates a counter once, when its last QP unbound and
        // nothing else uses it; the memory is freed after this returns.
        unsafe { ptr::drop_in_place(&raw mut (*counter.cast::<CounterObject<T>>()).state) };
        0
    }
}
