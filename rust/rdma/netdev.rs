// SPDX-License-Identifier: GPL-2.0

//! Network devices: reference-counted handles and the netdevice notifier.
//!
//! C header: [`include/linux/netdevice.h`](srctree/include/linux/netdevice.h).

use crate::bindings;
use core::{marker::PhantomPinned, ptr::NonNull};
use kernel::{
    error::to_result,
    prelude::*,
    sync::aref::{ARef, AlwaysRefCounted},
    types::Opaque,
};

/// A network device (`struct net_device`).
///
/// # Invariants
///
/// A `&NetDevice` always points to a live `struct net_device` on which the holder owns
/// (directly or through an [`ARef`]) a reference taken with `dev_hold`, or which the
/// kernel keeps alive for the duration of a callback.
#[repr(transparent)]
pub struct NetDevice(Opaque<bindings::net_device>);

// SAFETY: `struct net_device` is meant to be used from any thread; every accessor here
// reads fields the kernel allows to be read concurrently.
unsafe impl Send for NetDevice {}
// SAFETY: As above.
unsafe impl Sync for NetDevice {}

// SAFETY: `dev_hold`/`dev_put` are the reference counting of `struct net_device`;
// `dev_put` on the last reference lets the unregistration that waits for it finish.
unsafe impl AlwaysRefCounted for NetDevice {
    fn inc_ref(&self) {
        // SAFETY: By the type invariant the device is live and we hold a reference.
        unsafe { bindings::metaroce_dev_hold(self.as_raw()) };
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller owns a reference taken by `inc_ref`.
        unsafe { bindings::metaroce_dev_put(obj.cast().as_ptr()) };
    }
}

/// A stable identity of a network device, usable as a key after the device is gone.
///
/// It is never dereferenced: it only tells two devices apart.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct NetDeviceId(usize);

impl NetDevice {
    /// Creates a reference from a raw pointer.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a live `struct net_device` that stays live for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::net_device) -> &'a Self {
        // SAFETY: `NetDevice` is `repr(transparent)` over the C struct; liveness is
        // guaranteed by the caller.
        unsafe { &*ptr.cast() }
    }

    /// Returns the raw pointer to the C struct.
    pub(crate) fn as_raw(&self) -> *mut bindings::net_device {
        self.0.get()
    }

    /// Returns this device's identity.
    pub fn id(&self) -> NetDeviceId {
        NetDeviceId(self.as_raw() as usize)
    }

    /// Returns the interface name, e.g. `eth0`.
    pub fn name(&self) -> &CStr {
        // SAFETY: `name` is a NUL-terminated array inside the live device.
        unsafe { CStr::from_char_ptr(bindings::metaroce_netdev_name(self.as_raw())) }
    }

    /// Returns the current MTU in bytes.
    pub fn mtu(&self) -> u32 {
        // SAFETY: The device is live (type invariant); the helper uses READ_ONCE.
        unsafe { bindings::metaroce_netdev_mtu(self.as_raw()) }
    }

    /// Returns the interface index.
    pub fn ifindex(&self) -> i32 {
        // SAFETY: The device is live (type invariant).
        unsafe { bindings::metaroce_netdev_ifindex(self.as_raw()) }
    }

    /// Returns the device's Ethernet address, or `None` when it has none (e.g. `lo`-like
    /// devices without a hardware address).
    pub fn mac_address(&self) -> Option<[u8; 6]> {
        let mut mac = [0u8; 6];
        // SAFETY: The device is live; the helper writes at most `mac.len()` bytes.
        let n = unsafe {
            bindings::metaroce_netdev_addr(self.as_raw(), mac.as_mut_ptr(), mac.len() as u32)
        };
        (n as usize == mac.len()).then_some(mac)
    }

    /// Returns `true` for a VLAN device stacked on a real one.
    pub fn is_vlan(&self) -> bool {
        // SAFETY: The device is live (type invariant).
        unsafe { bindings::metaroce_netdev_is_vlan(self.as_raw()) }
    }

    /// Returns `true` when the device is running with carrier: a RoCE port on it is ACTIVE.
    pub fn is_port_active(&self) -> bool {
        // SAFETY: The device is live (type invariant).
        unsafe { bindings::metaroce_netdev_port_active(self.as_raw()) }
    }

    /// The link speed in Mb/s (ethtool's), `None` if unknown. Takes RTNL: process
    /// context only, never with RTNL held (not from a netdev notifier).
    pub fn link_speed_mbps(&self) -> Option<u32> {
        kernel::task::might_sleep();
        // SAFETY: The device is live (type invariant); the helper takes and releases
        // RTNL itself, and the caller holds no RTNL and may sleep (documented above).
        let mbps = unsafe { bindings::metaroce_netdev_speed_mbps(self.as_raw()) };
        (mbps != 0).then_some(mbps)
    }
}

/// A netdevice notifier event that a driver may act on.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Event {
    /// The device is going away; every reference to it must be dropped.
    Unregister,
    /// The device came up.
    Up,
    /// The device went down.
    Down,
    /// Carrier or other state changed.
    Change,
    /// The MTU changed.
    ChangeMtu,
    /// Any other event.
    Other(u64),
}

impl Event {
    fn from_raw(event: u64) -> Self {
        match event as u32 {
            bindings::netdev_cmd_NETDEV_UNREGISTER => Self::Unregister,
            bindings::netdev_cmd_NETDEV_UP => Self::Up,
            bindings::netdev_cmd_NETDEV_DOWN => Self::Down,
            bindings::netdev_cmd_NETDEV_CHANGE => Self::Change,
            bindings::netdev_cmd_NETDEV_CHANGEMTU => Self::ChangeMtu,
            _ => Self::Other(event),
        }
    }
}

/// Handler of netdevice notifier events.
pub trait NotifierHandler: Send + Sync {
    /// Called for every event on every network device, in process context under RTNL.
    ///
    /// It must not sleep for long nor take RTNL.
    fn on_event(&self, event: Event, dev: &NetDevice);
}

/// A registered netdevice notifier (`register_netdevice_notifier`).
///
/// Unregistered when dropped; after the drop returns no callback runs any more.
#[pin_data(PinnedDrop)]
pub struct Notifier<T: NotifierHandler> {
    #[pin]
    nb: Opaque<bindings::notifier_block>,
    handler: T,
    #[pin]
    _pin: PhantomPinned,
}

// SAFETY: The notifier block is only touched by the notifier chain under its own lock;
// `T` is `Send + Sync`.
unsafe impl<T: NotifierHandler> Send for Notifier<T> {}
// SAFETY: As above.
unsafe impl<T: NotifierHandler> Sync for Notifier<T> {}

impl<T: NotifierHandler> Notifier<T> {
    /// Registers `handler` for netdevice events. Existing devices are replayed as
    /// `REGISTER` and `UP` events.
    pub fn new(handler: T) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            nb <- Opaque::ffi_init(|nb: *mut bindings::notifier_block| {
                // SAFETY: `nb` is valid for writes; all other fields stay zeroed.
                unsafe {
                    nb.write(bindings::notifier_block {
                        notifier_call: Some(Self::notifier_call),
                        ..Default::default()
                    })
                };
            }),
            handler,
            _pin: PhantomPinned,
        })
        .pin_chain(|this| {
            // SAFETY: `nb` is pinned inside `this`, initialised above, and unregistered
            // in `drop` before it is freed.
            to_result(unsafe { bindings::register_netdevice_notifier(this.nb.get()) })
        })
    }

    unsafe extern "C" fn notifier_call(
        nb: *mut bindings::notifier_block,
        event: kernel::ffi::c_ulong,
        info: *mut kernel::ffi::c_void,
    ) -> kernel::ffi::c_int {
        // SAFETY: `nb` is the `nb` field of a live, registered `Notifier<T>` (it is
        // unregistered before being freed), so the containing struct is live.
        let this = unsafe {
            &*kernel::container_of!(nb.cast::<Opaque<bindings::notifier_block>>(), Self, nb)
        };
        // SAFETY: For netdevice notifiers `info` is a `netdev_notifier_info` whose device
        // is live for the duration of the call.
        let dev =
            unsafe { NetDevice::from_raw(bindings::metaroce_netdev_notifier_info_to_dev(info)) };
        this.handler.on_event(Event::from_raw(event as u64), dev);
        bindings::NOTIFY_OK as kernel::ffi::c_int
    }
}

#[pinned_drop]
impl<T: NotifierHandler> PinnedDrop for Notifier<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: `nb` was registered in `new` (a failed registration never yields a
        // `Notifier`); unregistering waits for running callbacks.
        unsafe { bindings::unregister_netdevice_notifier(self.nb.get()) };
    }
}

/// Returns an owned reference to `dev`.
pub fn hold(dev: &NetDevice) -> ARef<NetDevice> {
    ARef::from(dev)
}
