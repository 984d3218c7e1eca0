// SPDX-License-Identifier: GPL-2.0

//! Port hardware counters (`alloc_hw_port_stats`, `get_hw_stats`), as
//! `rdma statistic show link DEV/1` and `/sys/class/infiniband/DEV/ports/1/hw_counters/`
//! show them.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).
//!
//! A driver names its counters in `Driver::HW_COUNTERS` and reads them in
//! `Driver::hw_counters`; a driver without counters has neither callback. The last
//! `Driver::QP_COUNTERS` of them (at most [`MAX_QP_COUNTERS`]) are per QP (`rdma
//! statistic qp show`): the port reports 0 for them and ib_core adds the QP counters'
//! values. The callbacks are the verbs layer's (`verbs/stats.rs`, and
//! `verbs/counter.rs`, which says how a QP counter's values add up).

use crate::bindings;
use core::ptr;
use kernel::{prelude::*, str::as_char_ptr_in_const_context};

/// The most per-QP counters a driver may have (the last entries of its counters;
/// `Driver::QP_COUNTERS`).
pub const MAX_QP_COUNTERS: usize = 16;

/// The name of one counter (`struct rdma_stat_desc`).
#[repr(transparent)]
pub struct CounterDesc(bindings::rdma_stat_desc);

// SAFETY: Read-only after construction; the name is a `'static` string.
unsafe impl Sync for CounterDesc {}

impl CounterDesc {
    /// Describes a counter named `name` (e.g. `c"rx_packets"`).
    pub const fn new(name: &'static CStr) -> Self {
        Self(bindings::rdma_stat_desc {
            name: as_char_ptr_in_const_context(name),
            flags: 0,
            priv_: ptr::null(),
        })
    }
}
