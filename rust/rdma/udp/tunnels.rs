// SPDX-License-Identifier: GPL-2.0

//! The tunnels of a driver's UDP port, one per network namespace ([`UdpTunnels`]),
//! shared by the devices of a namespace through [`TunnelRef`]s.

use super::{datagram::DatagramHandler, tunnel::UdpTunnel};
use crate::{bindings, netdev::NetDevice};
use core::{
    marker::PhantomPinned,
    ops::Deref,
    ptr,
    sync::atomic::{AtomicPtr, Ordering},
};
use kernel::{
    error::to_result,
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
    types::Opaque,
};

/// The registry's entry for one namespace.
struct Entry<H: DatagramHandler> {
    tunnel: Arc<UdpTunnel<H>>,
    users: usize,
}

/// The registry whose `pernet_operations` are registered, for the `exit` callback
/// (which has no context argument).
///
/// # Invariants
///
/// Non-NULL exactly while a [`UdpTunnels`] has its pernet operations registered; it
/// then points to it.
static PERNET_OWNER: AtomicPtr<kernel::ffi::c_void> = AtomicPtr::new(ptr::null_mut());

/// The tunnel sockets of a driver on one UDP port, one [`UdpTunnel`] per network
/// namespace, reference-counted by [`TunnelRef`]s.
///
/// Only one may exist at a time in a module.
#[pin_data(PinnedDrop)]
pub struct UdpTunnels<H: DatagramHandler> {
    #[pin]
    tunnels: Mutex<KVec<Entry<H>>>,
    #[pin]
    pernet: Opaque<bindings::pernet_operations>,
    handler: Arc<H>,
    port: u16,
    #[pin]
    _pin: PhantomPinned,
}

// SAFETY: `pernet` is only touched by the namespace core under its own lock; the rest
// is `Send + Sync`.
unsafe impl<H: DatagramHandler> Send for UdpTunnels<H> {}
// SAFETY: As above.
unsafe impl<H: DatagramHandler> Sync for UdpTunnels<H> {}

impl<H: DatagramHandler> UdpTunnels<H> {
    /// Creates the registry for UDP `port`, whose datagrams go to `handler`. No socket
    /// exists until the first [`UdpTunnels::open`].
    pub fn new(port: u16, handler: Arc<H>) -> Result<Arc<Self>> {
        Arc::pin_init(
            try_pin_init!(Self {
                tunnels <- new_mutex!(KVec::new()),
                pernet <- Opaque::ffi_init(|ops: *mut bindings::pernet_operations| {
                    // SAFETY: `ops` is valid for writes.
                    unsafe {
                        ops.write(bindings::pernet_operations {
                            exit: Some(Self::pernet_exit),
                            ..Default::default()
                        })
                    };
                }),
                handler,
                port,
                _pin: PhantomPinned,
            })
            .pin_chain(|this| {
                let me = ptr::from_ref(&*this).cast_mut().cast();
                PERNET_OWNER
                    .compare_exchange(ptr::null_mut(), me, Ordering::AcqRel, Ordering::Acquire)
                    .map_err(|_| EBUSY)?;
                // SAFETY: `pernet` is pinned and initialised; it is unregistered in
                // `drop` (which checks `PERNET_OWNER`) before it is freed.
                let ret = to_result(unsafe { bindings::register_pernet_subsys(this.pernet.get()) });
                if ret.is_err() {
                    PERNET_OWNER.store(ptr::null_mut(), Ordering::Release);
                }
                ret
            }),
            GFP_KERNEL,
        )
    }

    /// Returns the handler of received datagrams.
    pub fn handler(&self) -> &H {
        &self.handler
    }

    /// Returns a reference to the tunnel of `netdev`'s namespace, creating its sockets if
    /// it has none yet.
    ///
    /// Process context. Fails like `udp_sock_create`, e.g. with `EADDRINUSE` when another
    /// socket of the namespace has the port.
    pub fn open(self: &Arc<Self>, netdev: &NetDevice) -> Result<TunnelRef<H>> {
        // SAFETY: `netdev` is live (type invariant of `NetDevice`).
        let net = unsafe { bindings::metaroce_dev_net(netdev.as_raw()) };
        let mut tunnels = self.tunnels.lock();
        if let Some(e) = tunnels.iter_mut().find(|e| e.tunnel.net == net) {
            e.users += 1;
            return Ok(TunnelRef {
                registry: self.clone(),
                tunnel: e.tunnel.clone(),
            });
        }
        // Room for the entry first, so that nothing can fail once the sockets exist.
        tunnels.reserve(1, GFP_KERNEL)?;
        let tunnel = Arc::new(UdpTunnel::new(net, self.handler.clone()), GFP_KERNEL)?;
        // The namespace is live: `netdev` belongs to it and the caller holds `netdev`.
        tunnel.open_sockets(self.port)?;
        tunnels
            .push_within_capacity(Entry {
                tunnel: tunnel.clone(),
                users: 1,
            })
            .map_err(|_| ENOMEM)?;
        Ok(TunnelRef {
            registry: self.clone(),
            tunnel,
        })
    }

    /// Returns the number of namespaces with open sockets.
    pub fn open_namespaces(&self) -> usize {
        self.tunnels.lock().len()
    }

    /// Drops one user of `tunnel`; the last closes it.
    fn release(&self, tunnel: &Arc<UdpTunnel<H>>) {
        let last = {
            let mut tunnels = self.tunnels.lock();
            // Not listed any more when its namespace went away first.
            let Some(i) = tunnels.iter().position(|e| Arc::ptr_eq(&e.tunnel, tunnel)) else {
                return;
            };
            tunnels[i].users -= 1;
            if tunnels[i].users > 0 {
                return;
            }
            tunnels.remove(i).ok()
        };
        if let Some(e) = last {
            e.tunnel.close();
        }
    }

    /// The namespace `net` is being dismantled: closes its sockets, if any.
    ///
    /// # Safety
    ///
    /// Called by the namespace core with a live `net`, while the operations are
    /// registered.
    unsafe extern "C" fn pernet_exit(net: *mut bindings::net) {
        let owner = PERNET_OWNER.load(Ordering::Acquire);
        if owner.is_null() {
            return;
        }
        // SAFETY: Exit callbacks run only while the operations are registered, when
        // `PERNET_OWNER` points to the live registry (invariant).
        let this = unsafe { &*owner.cast::<Self>() };
        let gone = {
            let mut tunnels = this.tunnels.lock();
            let i = tunnels.iter().position(|e| e.tunnel.net == net);
            i.and_then(|i| tunnels.remove(i).ok())
        };
        if let Some(e) = gone {
            e.tunnel.close();
        }
    }
}

#[pinned_drop]
impl<H: DatagramHandler> PinnedDrop for UdpTunnels<H> {
    fn drop(self: Pin<&mut Self>) {
        let me = ptr::from_ref(&*self).cast_mut().cast();
        if PERNET_OWNER.load(Ordering::Acquire) != me {
            // The registration failed in `new`.
            return;
        }
        // SAFETY: Registered in `new`. This runs `pernet_exit` for every namespace, which
        // closes any tunnel still listed (none: each `TunnelRef` holds the registry).
        unsafe { bindings::unregister_pernet_subsys(self.pernet.get()) };
        // INVARIANT: No exit callback can run any more.
        PERNET_OWNER.store(ptr::null_mut(), Ordering::Release);
    }
}

/// A user's reference to the tunnel of its namespace; the last one closes the sockets.
///
/// Dropping it may sleep (two RCU grace periods when it is the last).
pub struct TunnelRef<H: DatagramHandler> {
    registry: Arc<UdpTunnels<H>>,
    tunnel: Arc<UdpTunnel<H>>,
}

impl<H: DatagramHandler> Deref for TunnelRef<H> {
    type Target = UdpTunnel<H>;

    fn deref(&self) -> &UdpTunnel<H> {
        &self.tunnel
    }
}

impl<H: DatagramHandler> Drop for TunnelRef<H> {
    fn drop(&mut self) {
        self.registry.release(&self.tunnel);
    }
}
