// SPDX-License-Identifier: GPL-2.0

//! The port counters' callbacks (`alloc_hw_port_stats`, `get_hw_stats`): the driver's
//! [`Driver::HW_COUNTERS`], read with [`Driver::hw_counters`].
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).

use crate::{
    bindings,
    device::{Device, Driver},
};
use core::marker::PhantomData;

/// The C callbacks of the counters of driver `T`.
pub(crate) struct Adapter<T: Driver>(PhantomData<T>);

impl<T: Driver> Adapter<T> {
    /// `alloc_hw_port_stats`, when the driver has counters.
    pub(crate) const ALLOC: Option<
        unsafe extern "C" fn(*mut bindings::ib_device, u32) -> *mut bindings::rdma_hw_stats,
    > = if T::HW_COUNTERS.is_empty() {
        None
    } else {
        Some(Self::alloc_hw_port_stats)
    };

    /// `get_hw_stats`, when the driver has counters.
    pub(crate) const GET: Option<
        unsafe extern "C" fn(
            *mut bindings::ib_device,
            *mut bindings::rdma_hw_stats,
            u32,
            kernel::ffi::c_int,
        ) -> kernel::ffi::c_int,
    > = if T::HW_COUNTERS.is_empty() {
        None
    } else {
        Some(Self::get_hw_stats)
    };

    unsafe extern "C" fn alloc_hw_port_stats(
        _ib: *mut bindings::ib_device,
        _port: u32,
    ) -> *mut bindings::rdma_hw_stats {
        let descs = T::HW_COUNTERS;
        // SAFETY: `descs` is a `'static` array of `rdma_stat_desc` (`CounterDesc` is
        // transparent), so it outlives the struct, which the RDMA core frees.
        unsafe {
            bindings::rdma_alloc_hw_stats_struct(
                descs.as_ptr().cast(),
                descs.len() as kernel::ffi::c_int,
                bindings::RDMA_HW_STATS_DEFAULT_LIFESPAN as kernel::ffi::c_ulong,
            )
        }
    }

    unsafe extern "C" fn get_hw_stats(
        ib: *mut bindings::ib_device,
        stats: *mut bindings::rdma_hw_stats,
        _port: u32,
        _index: kernel::ffi::c_int,
    ) -> kernel::ffi::c_int {
        // SAFETY: The RDMA core calls this on a live device of this driver.
        let dev = unsafe { Device::<T>::from_raw(ib) };
        // SAFETY: `stats` came from `alloc_hw_port_stats` and the core holds its lock:
        // it has `num_counters` values, ours to write for the call.
        let values = unsafe {
            let n = usize::try_from((*stats).num_counters).unwrap_or(0);
            core::slice::from_raw_parts_mut((*stats).value.as_mut_ptr(), n)
        };
        values.fill(0);
        T::hw_counters(dev, values);
        values.len() as kernel::ffi::c_int
    }
}
