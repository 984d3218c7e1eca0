// SPDX-License-Identifier: GPL-2.0

//! What the kernel crate's workqueue abstraction leaves out: waiting for a work item.

use kernel::workqueue::Work;

/// Waits until the last queueing of `work` has finished executing; returns `true` if
/// it had to wait.
///
/// This is the fence before a work item's owner goes away (and before module exit):
/// afterwards the work function runs only if someone queues it again. Process context
/// only, and never from the work item itself.
pub fn flush<T: ?Sized, const ID: u64>(work: &Work<T, ID>) -> bool {
    // SAFETY: `work` is a live, initialized `Work`, so its `work_struct` is valid for
    // the duration of the call; `flush_work` only waits on it.
    unsafe { kernel::bindings::flush_work(Work::raw_get(work)) }
}
