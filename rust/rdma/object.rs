// SPDX-License-Identifier: GPL-2.0

//! The verbs objects the RDMA core allocates for a driver (`size_ib_cq`, `size_ib_srq`,
//! `size_ib_qp`, `size_ib_ah`): the core's C struct followed by our shared object.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).

use kernel::{prelude::*, sync::Arc, types::Opaque};

/// The core's C object `C` (`ib_cq`, `ib_srq`, `ib_qp`, `ib_ah`) followed by ours, `T`:
/// allocated with [`Object::SIZE`] and zeroed by the core, which frees it after the
/// `destroy_*` callback.
///
/// `obj` is set by the `create_*` callback before the core publishes the object and
/// taken by `destroy_*`, which the core calls once, when no other verb runs on the object
/// and none will (uverbs destroys under the object's exclusive lock, a CQ or SRQ only
/// once no QP uses it, and a kernel consumer may not race its own destroy).
#[repr(C)]
pub(crate) struct Object<C, T> {
    ib: Opaque<C>,
    pub(crate) obj: Option<Arc<T>>,
}

impl<C, T> Object<C, T> {
    /// The size the core allocates (`size_ib_*`).
    pub(crate) const SIZE: usize = size_of::<Self>();

    /// A shared reference, for the verbs that run concurrently (posting, modify, query).
    ///
    /// # Safety
    ///
    /// `ib` is a live `C` of a device of this crate's drivers whose object is a `T`, and
    /// stays so for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ib: *mut C) -> &'a Self {
        // SAFETY: `ib` is the first field of the `repr(C)` struct, which the core
        // allocated with our size and zeroed.
        unsafe { &*ib.cast::<Self>() }
    }

    /// The exclusive reference of `create_*` and `destroy_*`.
    ///
    /// # Safety
    ///
    /// As for [`Self::from_raw`], and nothing else uses the object meanwhile: the core
    /// calls `create_*` before it publishes the object and `destroy_*` as above.
    pub(crate) unsafe fn from_raw_mut<'a>(ib: *mut C) -> &'a mut Self {
        // SAFETY: As in `from_raw`; exclusive per the function's contract.
        unsafe { &mut *ib.cast::<Self>() }
    }

    /// Our object (`EINVAL` when `create_*` did not set it).
    ///
    /// # Safety
    ///
    /// As for [`Self::from_raw`].
    pub(crate) unsafe fn get(ib: *mut C) -> Result<Arc<T>> {
        // SAFETY: Per the contract; `obj` is set before the core publishes the object
        // and taken only by `destroy_*`, after which the core calls nothing else on it.
        unsafe { Self::from_raw(ib) }.obj.clone().ok_or(EINVAL)
    }
}
