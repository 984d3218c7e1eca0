// SPDX-License-Identifier: GPL-2.0

//! Driver-specific input and output of a verb issued from user space (`struct ib_udata`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).
//!
//! The buffers are user memory: every access goes through `copy_{from,to}_user`
//! ([`kernel::uaccess`]), so a bad pointer is an `EFAULT`, never a fault.

use crate::bindings;
use kernel::{
    prelude::*,
    transmute::{AsBytes, FromBytes},
    uaccess::{UserPtr, UserSlice},
};

/// The user buffers of one verb.
///
/// # Invariants
///
/// `inbuf`/`outbuf` are user addresses of `inlen`/`outlen` bytes (unchecked: user space
/// chose them), copied out of the core's `struct ib_udata` at the start of the callback.
pub struct UData {
    ucontext: *mut bindings::ib_ucontext,
    inbuf: usize,
    inlen: usize,
    outbuf: usize,
    outlen: usize,
}

impl UData {
    /// Reads the user buffers of a verb; `None` for a verb issued by a kernel consumer.
    ///
    /// # Safety
    ///
    /// `udata` is NULL or points to a valid `struct ib_udata` for the duration of the call.
    pub(crate) unsafe fn from_raw(udata: *const bindings::ib_udata) -> Option<Self> {
        if udata.is_null() {
            return None;
        }
        // SAFETY: Non-NULL and valid, per the function's contract.
        let u = unsafe { &*udata };
        Some(Self {
            // SAFETY: Every `ib_udata` the core passes to a driver is the `driver_udata`
            // of a `uverbs_attr_bundle` (`rdma_udata_to_drv_context`).
            ucontext: unsafe { bindings::metaroce_udata_to_ucontext(udata.cast_mut()) },
            inbuf: u.inbuf as usize,
            inlen: u.inlen,
            outbuf: u.outbuf as usize,
            outlen: u.outlen,
        })
    }

    /// The user context the verb was issued in, live for the duration of the verb.
    pub(crate) fn ucontext(&self) -> *mut bindings::ib_ucontext {
        self.ucontext
    }

    /// Length of the driver-specific input.
    pub fn inlen(&self) -> usize {
        self.inlen
    }

    /// Room for the driver-specific response.
    pub fn outlen(&self) -> usize {
        self.outlen
    }

    /// Writes `resp` at the start of the response buffer; `EINVAL` when it does not fit
    /// (an older provider), `EFAULT` when the buffer is not writable.
    pub fn write<T: AsBytes>(&self, resp: &T) -> Result {
        if self.outlen < size_of::<T>() {
            return Err(EINVAL);
        }
        UserSlice::new(UserPtr::from_addr(self.outbuf), size_of::<T>())
            .writer()
            .write(resp)
    }

    /// Reads a `T` from the start of the driver-specific input; `EINVAL` when it is shorter.
    pub fn read<T: FromBytes>(&self) -> Result<T> {
        if self.inlen < size_of::<T>() {
            return Err(EINVAL);
        }
        UserSlice::new(UserPtr::from_addr(self.inbuf), size_of::<T>())
            .reader()
            .read()
    }

    /// Writes `data` to an arbitrary user address (rxe's `modify_srq` returns the new
    /// ring's mmap information through a pointer passed in the input).
    pub fn write_to_user<T: AsBytes>(addr: u64, data: &T) -> Result {
        let addr = usize::try_from(addr).map_err(|_| EFAULT)?;
        UserSlice::new(UserPtr::from_addr(addr), size_of::<T>())
            .writer()
            .write(data)
    }
}
