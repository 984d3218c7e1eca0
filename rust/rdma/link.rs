// SPDX-License-Identifier: GPL-2.0

//! RDMA link types: `rdma link add NAME type TYPE netdev DEV`.
//!
//! C header: [`include/rdma/rdma_netlink.h`](srctree/include/rdma/rdma_netlink.h).

use crate::{bindings, netdev::NetDevice};
use core::{
    marker::PhantomPinned,
    ptr,
    sync::atomic::{AtomicPtr, Ordering},
};
use kernel::{error::from_result, prelude::*, types::Opaque};

/// Creates devices for `rdma link add`.
pub trait LinkOps: Send + Sync + 'static {
    /// Creates a device named `name` on `netdev`.
    ///
    /// Runs in process context; the netdev is held by the caller for the duration.
    fn newlink(&self, name: &CStr, netdev: &NetDevice) -> Result;
}

/// The one link type a module registers; `newlink` has no context argument, so the
/// registration is found through this pointer.
///
/// # Invariants
///
/// Non-null exactly while a [`Registration`] is registered; it then points to it.
static REGISTERED: AtomicPtr<kernel::ffi::c_void> = AtomicPtr::new(ptr::null_mut());

/// A registered RDMA link type (`rdma_link_register`), unregistered on drop.
///
/// Only one may exist at a time in a module.
#[pin_data(PinnedDrop)]
pub struct Registration<T: LinkOps> {
    #[pin]
    ops: Opaque<bindings::rdma_link_ops>,
    handler: T,
    #[pin]
    _pin: PhantomPinned,
}

// SAFETY: `ops` is only touched by the RDMA core under its own lock; `T: Send + Sync`.
unsafe impl<T: LinkOps> Send for Registration<T> {}
// SAFETY: As above.
unsafe impl<T: LinkOps> Sync for Registration<T> {}

impl<T: LinkOps> Registration<T> {
    /// Registers link type `kind` (e.g. `c"metaroce"`) handled by `handler`.
    pub fn new(kind: &'static CStr, handler: T) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            ops <- Opaque::ffi_init(move |ops: *mut bindings::rdma_link_ops| {
                // SAFETY: `ops` is valid for writes.
                unsafe {
                    ops.write(bindings::rdma_link_ops {
                        type_: kind.as_char_ptr(),
                        newlink: Some(Self::newlink),
                        ..Default::default()
                    })
                };
            }),
            handler,
            _pin: PhantomPinned,
        })
        .pin_chain(|this| {
            let me = ptr::from_ref(&*this).cast_mut().cast();
            REGISTERED
                .compare_exchange(ptr::null_mut(), me, Ordering::AcqRel, Ordering::Acquire)
                .map_err(|_| EBUSY)?;
            // SAFETY: `ops` is pinned and initialised; it is unregistered in `drop`.
            unsafe { bindings::rdma_link_register(this.ops.get()) };
            Ok(())
        })
    }

    unsafe extern "C" fn newlink(
        name: *const kernel::ffi::c_char,
        ndev: *mut bindings::net_device,
    ) -> kernel::ffi::c_int {
        from_result(|| {
            let me = REGISTERED.load(Ordering::Acquire);
            if me.is_null() {
                return Err(ENODEV);
            }
            // SAFETY: The RDMA core only calls `newlink` between `rdma_link_register` and
            // the return of `rdma_link_unregister`, during which `REGISTERED` points to
            // the live registration (invariant).
            let this = unsafe { &*me.cast::<Self>() };
            // SAFETY: `name` is a NUL-terminated string and `ndev` a held netdev, both
            // live for the call.
            let (name, netdev) = unsafe { (CStr::from_char_ptr(name), NetDevice::from_raw(ndev)) };
            this.handler.newlink(name, netdev)?;
            Ok(0)
        })
    }
}

#[pinned_drop]
impl<T: LinkOps> PinnedDrop for Registration<T> {
    fn drop(self: Pin<&mut Self>) {
        // A registration whose `new` failed (another one held `REGISTERED`) was never
        // registered: it must neither unregister nor clear the other's pointer.
        let me = ptr::from_ref(&*self).cast_mut().cast();
        if REGISTERED.load(Ordering::Acquire) != me {
            return;
        }
        // SAFETY: `REGISTERED` points to us, so `new` registered `ops`; this waits for
        // running `newlink` calls.
        unsafe { bindings::rdma_link_unregister(self.ops.get()) };
        // INVARIANT: No `newlink` can run any more.
        REGISTERED.store(ptr::null_mut(), Ordering::Release);
    }
}
