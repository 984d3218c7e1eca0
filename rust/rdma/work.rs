// SPDX-License-Identifier: GPL-2.0

//! What the kernel crate's workqueue abstraction leaves out: waiting for a work item,
//! queueing one on another CPU, and telling whether this CPU runs a user task.

use crate::bindings;
use kernel::cpu::CpuId;
use kernel::workqueue::{Queue, RawWorkItem, Work};

/// The per-CPU system workqueue (`system_percpu_wq`), the one `schedule_work()` uses.
///
/// The kernel crate's `workqueue::system()` returns `system_wq`, which this kernel marks
/// deprecated (it warns once when work is queued on it); this is its replacement.
pub fn system_percpu() -> &'static Queue {
    // SAFETY: `system_percpu_wq` is a C global, set up before any module loads and
    // never freed.
    unsafe { Queue::from_raw(kernel::bindings::system_percpu_wq) }
}

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

/// Queues `w` on `queue` on the first online CPU after `cpu` (wrapping around; `cpu`
/// itself if it is the only one online). Like [`Queue::enqueue`], queueing an item
/// that is already queued does nothing.
///
/// On a bottom-half workqueue this moves softirq work off `cpu`: the work runs on the
/// other CPU as soon as that CPU takes its interrupt, without a scheduler wakeup.
pub fn enqueue_after<W, const ID: u64>(queue: &Queue, cpu: CpuId, w: W) -> W::EnqueueOutput
where
    W: RawWorkItem<ID> + Send + 'static,
{
    // `Queue` is a transparent wrapper of `Opaque<workqueue_struct>`, itself transparent,
    // and `queue` borrows a live workqueue.
    let queue_ptr = core::ptr::from_ref(queue)
        .cast_mut()
        .cast::<bindings::workqueue_struct>();
    // SAFETY: As in `Queue::enqueue`: `false` only if the item is already queued, `W` is
    // `Send + 'static`, and the workqueue keeps `work_ptr` only on `true`, when
    // `__enqueue` keeps it valid until the work function runs.
    unsafe {
        w.__enqueue(move |work_ptr| {
            bindings::metaroce_queue_work_after_cpu(cpu.as_u32(), queue_ptr, work_ptr.cast())
        })
    }
}

/// Whether this CPU runs a user task under the caller: the task a softirq
/// interrupted, or the caller itself in process context. `false` in a kernel thread
/// (ksoftirqd, a worker) and on an idle CPU.
///
/// Softirq work that finds a user task under it takes that task's CPU time; work
/// that does not runs where the CPU had time to spare.
pub fn cpu_runs_user_task() -> bool {
    // SAFETY: The helper only reads the current task's flags.
    unsafe { bindings::metaroce_current_is_user_task() }
}
