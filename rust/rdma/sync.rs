// SPDX-License-Identifier: GPL-2.0

//! A spinlock that disables bottom halves: what the kernel crate does not offer.
//!
//! State shared between process context and softirq (packet receive) must be locked
//! with softirqs disabled, or a softirq on the CPU holding the lock deadlocks on it.
//! `SpinLockIrq` would do, but transmitting (`dev_queue_xmit`) with hard interrupts
//! disabled is not allowed; `spin_lock_bh` is what the networking stack uses.
//!
//! C header: [`include/linux/spinlock.h`](srctree/include/linux/spinlock.h).

use crate::bindings;
use kernel::sync::lock::{Backend, Lock};

/// A spinlock taken with `spin_lock_bh`; build it with [`new_spinlock_bh!`].
pub type SpinLockBh<T> = Lock<T, SpinLockBhBackend>;

/// The [`Backend`] of [`SpinLockBh`].
pub struct SpinLockBhBackend;

/// Creates a [`SpinLockBh`] initializer with its own lock class.
#[macro_export]
macro_rules! new_spinlock_bh {
    ($inner:expr $(, $name:literal)? $(,)?) => {
        $crate::sync::SpinLockBh::new(
            $inner, ::kernel::optional_name!($($name)?), ::kernel::static_lock_class!())
    };
}
pub use new_spinlock_bh;

// SAFETY: `spinlock_t` gives mutual exclusion; `relock` uses the default, which locks the
// same way (`spin_lock_bh`).
unsafe impl Backend for SpinLockBhBackend {
    type State = kernel::bindings::spinlock_t;
    type GuardState = ();

    unsafe fn init(
        ptr: *mut Self::State,
        name: *const kernel::ffi::c_char,
        key: *mut kernel::bindings::lock_class_key,
    ) {
        // SAFETY: The caller guarantees `ptr` is valid for writes and `name` and `key`
        // valid for reads indefinitely.
        unsafe { kernel::bindings::__spin_lock_init(ptr, name, key) }
    }

    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: `ptr` points to an initialized `spinlock_t` (caller's guarantee); the
        // two bindings name the same C type.
        unsafe { bindings::metaroce_spin_lock_bh(ptr.cast()) }
    }

    unsafe fn try_lock(ptr: *mut Self::State) -> Option<Self::GuardState> {
        // SAFETY: As in `lock`.
        (unsafe { bindings::metaroce_spin_trylock_bh(ptr.cast()) } != 0).then_some(())
    }

    unsafe fn unlock(ptr: *mut Self::State, _guard_state: &Self::GuardState) {
        // SAFETY: The caller owns the lock, taken with `spin_lock_bh`.
        unsafe { bindings::metaroce_spin_unlock_bh(ptr.cast()) }
    }

    unsafe fn assert_is_held(ptr: *mut Self::State) {
        // SAFETY: `ptr` points to an initialized `spinlock_t`.
        unsafe { kernel::bindings::spin_assert_is_held(ptr) }
    }
}
