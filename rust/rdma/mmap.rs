// SPDX-License-Identifier: GPL-2.0

//! Kernel buffers that user space maps through the uverbs file (`rdma_user_mmap_entry`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).
//!
//! A [`UserBuffer`] is `vmalloc_user` memory registered with the RDMA core under an mmap
//! offset of one user context. User space maps it with `mmap(cmd_fd, offset)`; the
//! device's `mmap` callback ([`mmap`]) finds it by that offset. Dropping the
//! [`UserBuffer`] removes the offset; the memory is freed by `mmap_free` once the core
//! has dropped its last reference (pages still mapped stay alive through their page
//! references until user space unmaps them).

use crate::bindings;
use core::ptr::NonNull;
use kernel::{error::to_result, prelude::*, transmute::AsBytes, types::Opaque};

/// Where and how large a buffer is in the uverbs file (`struct mminfo` of the rxe ABI).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct MmapInfo {
    /// The offset to pass to `mmap`.
    pub offset: u64,
    /// The buffer's size in bytes.
    pub size: u32,
    /// Padding, zero.
    pub pad: u32,
}

// SAFETY: `repr(C)` of integers without padding: every byte is initialised.
unsafe impl AsBytes for MmapInfo {}

/// The core's entry followed by what `mmap` and `mmap_free` need.
#[repr(C)]
struct Entry {
    entry: Opaque<bindings::rdma_user_mmap_entry>,
    buf: NonNull<u8>,
    size: usize,
}

/// A zeroed, user-mappable kernel buffer registered in a user context.
///
/// # Invariants
///
/// `entry` points to an [`Entry`] inserted in its user context by [`UserBuffer::new`]
/// and not yet removed; its `buf` is `size` bytes of `vmalloc_user` memory, live until
/// `mmap_free` runs, which cannot happen before the drop of `self` removes the entry.
pub struct UserBuffer {
    entry: NonNull<Entry>,
}

// SAFETY: The buffer is plain memory; the entry is only touched through the core's
// functions, which lock it themselves.
unsafe impl Send for UserBuffer {}
// SAFETY: As above; `&UserBuffer` only gives out the address.
unsafe impl Sync for UserBuffer {}

impl UserBuffer {
    /// Allocates `size` zeroed bytes and registers them for mapping in `uctx`.
    ///
    /// # Safety
    ///
    /// `uctx` is a live user context for the duration of the call.
    pub(crate) unsafe fn new(uctx: *mut bindings::ib_ucontext, size: usize) -> Result<Self> {
        if size == 0 || size > u32::MAX as usize {
            return Err(EINVAL);
        }
        // SAFETY: Plain allocation; zeroed memory flagged for mapping to user space.
        let buf = unsafe { bindings::metaroce_vmalloc_user(size) };
        let buf = NonNull::new(buf.cast::<u8>()).ok_or(ENOMEM)?;
        let entry = match KBox::new(
            Entry {
                entry: Opaque::zeroed(),
                buf,
                size,
            },
            GFP_KERNEL,
        ) {
            Ok(e) => e,
            Err(e) => {
                // SAFETY: Allocated above, not shared with anyone.
                unsafe { bindings::vfree(buf.as_ptr().cast()) };
                return Err(e.into());
            }
        };
        let entry = KBox::into_raw(entry);
        // SAFETY: `entry` is a zeroed core entry inside our allocation; `uctx` is live.
        // On success the core owns a reference that `rdma_user_mmap_entry_remove` drops.
        let ret = to_result(unsafe {
            bindings::rdma_user_mmap_entry_insert(uctx, (*entry).entry.get(), size)
        });
        if let Err(e) = ret {
            // SAFETY: Not inserted: the entry and the buffer are still only ours.
            unsafe {
                bindings::vfree(buf.as_ptr().cast());
                drop(KBox::from_raw(entry));
            }
            return Err(e);
        }
        // INVARIANT: Inserted just above.
        Ok(Self {
            // SAFETY: From `KBox::into_raw`, so not NULL.
            entry: unsafe { NonNull::new_unchecked(entry) },
        })
    }

    fn entry(&self) -> &Entry {
        // SAFETY: Live until `mmap_free`, which needs our drop first (type invariant).
        unsafe { self.entry.as_ref() }
    }

    /// The mmap offset and size that user space needs.
    pub fn info(&self) -> MmapInfo {
        // SAFETY: The entry was initialised by the insertion; `start_pgoff` is not
        // changed afterwards.
        let pgoff = unsafe { (*self.entry().entry.get()).start_pgoff };
        MmapInfo {
            offset: (pgoff as u64) << kernel::page::PAGE_SHIFT,
            size: self.entry().size as u32,
            pad: 0,
        }
    }

    /// The buffer's length in bytes.
    pub fn len(&self) -> usize {
        self.entry().size
    }

    /// Always `false`: buffers are never empty.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The buffer's address, valid for `len()` bytes while `self` lives. The memory is
    /// shared with user space, which may write it at any time.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.entry().buf.as_ptr()
    }
}

impl Drop for UserBuffer {
    fn drop(&mut self) {
        // SAFETY: Inserted and not yet removed (type invariant). The core drops its
        // reference; `mmap_free` runs once no mapping is being set up any more.
        unsafe { bindings::rdma_user_mmap_entry_remove(self.entry().entry.get()) };
    }
}

/// The device's `mmap` callback: maps the buffer registered at the VMA's offset.
///
/// # Safety
///
/// Called by the RDMA core with a live user context and VMA.
pub(crate) unsafe extern "C" fn mmap(
    uctx: *mut bindings::ib_ucontext,
    vma: *mut bindings::vm_area_struct,
) -> kernel::ffi::c_int {
    // SAFETY: Both are live for the call. On success we hold a reference on the entry,
    // so the buffer is not freed while we map it.
    let e = unsafe { bindings::rdma_user_mmap_entry_get(uctx, vma) };
    if e.is_null() {
        return EINVAL.to_errno();
    }
    // CAST: The core entry is the first field of the `repr(C)` [`Entry`] (all our entries
    // are inserted by `UserBuffer::new`).
    let entry = e.cast::<Entry>();
    // SAFETY: `entry` is live (reference held). The core checked that the VMA is shared
    // and exactly as many pages as the entry; the buffer is `vmalloc_user` memory of
    // at least that many pages (vmalloc rounds up to pages).
    let ret = unsafe { bindings::remap_vmalloc_range(vma, (*entry).buf.as_ptr().cast(), 0) };
    // SAFETY: Drops the reference taken by `rdma_user_mmap_entry_get`.
    unsafe { bindings::rdma_user_mmap_entry_put(e) };
    ret
}

/// The device's `mmap_free` callback: frees an entry and its buffer.
///
/// # Safety
///
/// Called by the RDMA core once per inserted entry, after the last reference is gone.
pub(crate) unsafe extern "C" fn mmap_free(e: *mut bindings::rdma_user_mmap_entry) {
    // CAST: See `mmap`.
    let entry = e.cast::<Entry>();
    // SAFETY: The core is done with the entry; it came from `KBox::into_raw` in
    // `UserBuffer::new`, and its buffer from `vmalloc_user`. User mappings hold their
    // own page references.
    unsafe {
        bindings::vfree((*entry).buf.as_ptr().cast());
        drop(KBox::from_raw(entry));
    }
}
