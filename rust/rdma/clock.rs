// SPDX-License-Identifier: GPL-2.0

//! The clock a transport keeps its own time with: `local_clock()`, as TCP does
//! (`tcp_clock_ns`).
//!
//! `ktime_get()` reads the system clocksource, which on a machine whose TSC was found
//! unstable (an emulated one, for instance) is the HPET: an uncached device read per
//! call. `local_clock()` reads the CPU's own counter, corrected at each tick against
//! the system clock. It is monotonic on one CPU; between CPUs it may differ by a
//! fraction of a tick when the TSC is unstable, so a user that moves between CPUs
//! keeps its own high-water mark.
//!
//! C header: [`include/linux/sched/clock.h`](srctree/include/linux/sched/clock.h).

use crate::bindings;

/// Nanoseconds since boot, from `local_clock()`.
pub fn local_ns() -> u64 {
    // SAFETY: The helper takes no argument and may be called from any context.
    unsafe { bindings::metaroce_local_clock() }
}
