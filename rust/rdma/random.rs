// SPDX-License-Identifier: GPL-2.0

//! Random numbers from the kernel's CRNG.

/// Returns 64 random bits (`get_random_u64`).
pub fn u64() -> u64 {
    // SAFETY: Callable from any context; takes no arguments.
    unsafe { kernel::bindings::get_random_u64() }
}
