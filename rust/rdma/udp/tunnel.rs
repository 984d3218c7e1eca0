// SPDX-License-Identifier: GPL-2.0

//! One network namespace's tunnel sockets ([`UdpTunnel`]): the receive callback
//! and transmission.

use super::datagram::{DatagramHandler, DatagramInfo, Destination, Received, Segment};
use crate::{
    bindings,
    netdev::NetDevice,
    route::{cached_or_lookup, Flow, Route4, Route6, RouteCache},
    skb::{SkBuff, UDP_TUNNEL_HEADROOM},
};
use core::{
    marker::PhantomData,
    net::IpAddr,
    ptr::{self, NonNull},
    sync::atomic::{AtomicPtr, Ordering},
};
use kernel::{
    alloc::Flags,
    error::to_result,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        rcu, Arc,
    },
};

/// The UDP encapsulation type given to the socket (as rdma_rxe uses): any non-zero
/// value makes UDP hand datagrams to the callback instead of the socket's queue.
pub(super) const ENCAP_TYPE: u8 = 1;

/// Length of a UDP header.
pub(super) const UDP_HLEN: usize = 8;

/// The IPv4 "don't fragment" flag, in network byte order.
pub(super) const IP_DF: u16 = (bindings::IP_DF as u16).to_be();

/// Counters of one namespace's tunnel for events that belong to no device.
#[derive(Clone, Copy, Default, Debug)]
pub struct TunnelStats {
    /// Datagrams dropped before the handler: bad headers.
    pub rx_malformed: u64,
    /// Datagrams the handler found no receiver for ([`Received::discard_unclaimed`]).
    pub rx_unclaimed: u64,
    /// UDP GSO/GRO buffers received whole (the `gro` parameter).
    pub rx_gro_buffers: u64,
    /// The datagrams they held.
    pub rx_gro_segments: u64,
    /// Transmissions that found no route.
    pub tx_no_route: u64,
    /// Transmissions refused for another reason (closed tunnel, bad arguments, no
    /// headroom, no memory).
    pub tx_errors: u64,
}

/// The tunnel sockets of one network namespace.
///
/// # Invariants
///
/// - `sk4` and `sk6` are NULL or UDP tunnel sockets of namespace `net` set up with this
///   tunnel as their user data; they are cleared, then released after an RCU grace
///   period, in [`UdpTunnel::close`], which runs before `net` is freed.
/// - While a socket pointer read under the RCU read lock is non-NULL, `net` is live.
pub struct UdpTunnel<H: DatagramHandler> {
    pub(super) net: *mut bindings::net,
    sk4: AtomicPtr<bindings::sock>,
    sk6: AtomicPtr<bindings::sock>,
    handler: Arc<H>,
    rx_malformed: Atomic<u64>,
    rx_unclaimed: Atomic<u64>,
    rx_gro_buffers: Atomic<u64>,
    rx_gro_segments: Atomic<u64>,
    tx_no_route: Atomic<u64>,
    tx_errors: Atomic<u64>,
}

// SAFETY: `net` is an identity and, per the invariants, only dereferenced while live;
// the sockets are used under RCU from any context; `H` is `Send + Sync`.
unsafe impl<H: DatagramHandler> Send for UdpTunnel<H> {}
// SAFETY: As above; all mutable state is atomic.
unsafe impl<H: DatagramHandler> Sync for UdpTunnel<H> {}

impl<H: DatagramHandler> UdpTunnel<H> {
    pub(super) fn new(net: *mut bindings::net, handler: Arc<H>) -> Self {
        Self {
            net,
            sk4: AtomicPtr::new(ptr::null_mut()),
            sk6: AtomicPtr::new(ptr::null_mut()),
            handler,
            rx_malformed: Atomic::new(0),
            rx_unclaimed: Atomic::new(0),
            rx_gro_buffers: Atomic::new(0),
            rx_gro_segments: Atomic::new(0),
            tx_no_route: Atomic::new(0),
            tx_errors: Atomic::new(0),
        }
    }

    /// Returns the handler of received datagrams.
    pub fn handler(&self) -> &H {
        &self.handler
    }

    /// Returns `true` while the sockets are open.
    pub fn is_open(&self) -> bool {
        !self.sk4.load(Ordering::Relaxed).is_null()
    }

    /// Returns a snapshot of the counters.
    pub fn stats(&self) -> TunnelStats {
        TunnelStats {
            rx_malformed: self.rx_malformed.load(Relaxed),
            rx_unclaimed: self.rx_unclaimed.load(Relaxed),
            rx_gro_buffers: self.rx_gro_buffers.load(Relaxed),
            rx_gro_segments: self.rx_gro_segments.load(Relaxed),
            tx_no_route: self.tx_no_route.load(Relaxed),
            tx_errors: self.tx_errors.load(Relaxed),
        }
    }

    /// Sends `payload` as one UDP datagram to `to`, through `netdev` (which must be in the
    /// tunnel's namespace), with the route's hop limit, the ECN codepoint of `to`, and
    /// for IPv4 the "don't fragment" flag. The caller sizes payloads to the path MTU.
    ///
    /// `payload` needs [`UDP_TUNNEL_HEADROOM`] bytes of headroom
    /// ([`SkBuff::alloc_for_udp`] reserves it). Any context, including softirq; the
    /// buffer is consumed either way. Errors (also counted in [`UdpTunnel::stats`]):
    /// `EHOSTUNREACH` (no route), `ENETDOWN` (the tunnel is closed, or has no IPv6),
    /// `EINVAL` (mixed address families, too little headroom, `netdev` in another
    /// namespace). Once the datagram is handed to IP, later drops (queue full, neighbour
    /// unresolved) are not reported, as for any UDP socket.
    pub fn send(&self, netdev: &NetDevice, to: &Destination, payload: SkBuff) -> Result {
        self.send_routed(netdev, to, payload, None)
    }

    /// Sends as [`UdpTunnel::send`] does, with the route kept in `routes` between
    /// datagrams of the same flow (a sender keeps one cache per flow it sends on).
    pub fn send_cached(
        &self,
        netdev: &NetDevice,
        to: &Destination,
        payload: SkBuff,
        routes: &mut RouteCache,
    ) -> Result {
        self.send_routed(netdev, to, payload, Some(routes))
    }

    fn send_routed(
        &self,
        netdev: &NetDevice,
        to: &Destination,
        payload: SkBuff,
        routes: Option<&mut RouteCache>,
    ) -> Result {
        let ret = self.try_send(netdev, to, payload, routes);
        match ret {
            Ok(()) => {}
            Err(e) if e == EHOSTUNREACH => {
                self.tx_no_route.fetch_add(1, Relaxed);
            }
            Err(_) => {
                self.tx_errors.fetch_add(1, Relaxed);
            }
        }
        ret
    }

    /// Copies `bytes` into a new buffer and sends it as [`UdpTunnel::send`] does.
    pub fn send_slice(
        &self,
        netdev: &NetDevice,
        to: &Destination,
        bytes: &[u8],
        flags: Flags,
    ) -> Result {
        let mut skb = SkBuff::alloc_for_udp(netdev, bytes.len(), flags).inspect_err(|_| {
            self.tx_errors.fetch_add(1, Relaxed);
        })?;
        skb.append(bytes)?;
        self.send(netdev, to, skb)
    }

    fn try_send(
        &self,
        netdev: &NetDevice,
        to: &Destination,
        payload: SkBuff,
        routes: Option<&mut RouteCache>,
    ) -> Result {
        if payload.headroom() < UDP_TUNNEL_HEADROOM {
            payload.discard();
            return Err(EINVAL);
        }
        // SAFETY: `netdev` is live (type invariant of `NetDevice`).
        if unsafe { bindings::metaroce_dev_net(netdev.as_raw()) } != self.net {
            payload.discard();
            return Err(EINVAL);
        }
        let _bh = BhDisabled::new();
        let _rcu = rcu::read_lock();
        let tos = to.ecn as u8;
        let (sport, dport) = (to.src_port.to_be(), to.dst_port.to_be());
        match (to.src, to.dst) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => {
                let sk = self.sk4.load(Ordering::Acquire);
                if sk.is_null() {
                    payload.discard();
                    return Err(ENETDOWN);
                }
                let flow = Flow {
                    oif: netdev.ifindex(),
                    src,
                    dst,
                    src_port: to.src_port,
                    dst_port: to.dst_port,
                };
                // SAFETY: The socket is open under the RCU read lock, so `net` is live
                // (type invariant).
                let rt = match cached_or_lookup(routes, &flow, || unsafe {
                    Route4::lookup(self.net, &self.local_flow(flow))
                }) {
                    Ok(rt) => rt,
                    Err(e) => {
                        payload.discard();
                        return Err(e);
                    }
                };
                let (ttl, src) = (rt.hop_limit(), u32::from(rt.src).to_be());
                // SAFETY: `sk` is our open socket (released only a grace period after being
                // cleared); the route reference and the skb (with headroom for UDP and IP) are
                // handed over; BH is disabled as the transmit path requires.
                unsafe {
                    bindings::udp_tunnel_xmit_skb(
                        rt.into_raw(),
                        sk,
                        payload.into_raw().as_ptr(),
                        src,
                        u32::from(dst).to_be(),
                        tos,
                        ttl,
                        IP_DF,
                        sport,
                        dport,
                        false,
                        false,
                        0,
                    )
                };
                Ok(())
            }
            (IpAddr::V6(src), IpAddr::V6(dst)) => {
                let sk = self.sk6.load(Ordering::Acquire);
                if sk.is_null() {
                    payload.discard();
                    return Err(ENETDOWN);
                }
                let flow = Flow {
                    oif: netdev.ifindex(),
                    src,
                    dst,
                    src_port: to.src_port,
                    dst_port: to.dst_port,
                };
                // SAFETY: As for IPv4; `sk` is a socket of `net`.
                let rt = match cached_or_lookup(routes, &flow, || unsafe {
                    Route6::lookup(self.net, sk, &self.local_flow(flow))
                }) {
                    Ok(rt) => rt,
                    Err(e) => {
                        payload.discard();
                        return Err(e);
                    }
                };
                let ttl = rt.hop_limit();
                let mut saddr = bindings::in6_addr::default();
                saddr.in6_u.u6_addr8 = rt.src.octets();
                let mut daddr = bindings::in6_addr::default();
                daddr.in6_u.u6_addr8 = dst.octets();
                // SAFETY: As for IPv4. With a NULL device no tunnel device statistics
                // are updated.
                unsafe {
                    bindings::udp_tunnel6_xmit_skb(
                        rt.into_raw(),
                        sk,
                        payload.into_raw().as_ptr(),
                        ptr::null_mut(),
                        &saddr,
                        &daddr,
                        tos,
                        ttl,
                        0,
                        sport,
                        dport,
                        false,
                        0,
                    )
                };
                Ok(())
            }
            _ => {
                payload.discard();
                Err(EINVAL)
            }
        }
    }

    /// The netdev of the tunnel's namespace that owns the local address `addr`, if any.
    ///
    /// # Safety
    ///
    /// The caller holds the RCU read lock, with the tunnel open (so `net` is live); the
    /// device stays live until the lock is released.
    unsafe fn local_owner(&self, addr: IpAddr) -> *mut bindings::net_device {
        match addr {
            // SAFETY: `net` is live under the RCU read lock (function's contract).
            IpAddr::V4(a) => unsafe {
                bindings::metaroce_ip_dev_find_rcu(self.net, u32::from(a).to_be())
            },
            IpAddr::V6(a) => {
                let mut a6 = bindings::in6_addr::default();
                a6.in6_u.u6_addr8 = a.octets();
                // SAFETY: As above; `a6` is valid for the call.
                unsafe { bindings::metaroce_ipv6_dev_find_rcu(self.net, &a6) }
            }
        }
    }

    /// The flow to look up for `flow`: a destination that is a local address of the
    /// namespace is looked up through the netdev that owns it, not the sender's, so the
    /// route is the local one (through the loopback device) whichever device of the
    /// namespace has the address: the datagram never leaves the host, and
    /// [`Self::receive`] hands it to the owner's device. Looked up through the sender's
    /// netdev, an address of another netdev would be routed out of the sender's link.
    ///
    /// # Safety
    ///
    /// As for [`Self::local_owner`].
    unsafe fn local_flow<A: Copy + Into<IpAddr>>(&self, flow: Flow<A>) -> Flow<A> {
        // SAFETY: Per the function's contract.
        let owner = unsafe { self.local_owner(flow.dst.into()) };
        if owner.is_null() {
            return flow;
        }
        // SAFETY: `owner` is live under the RCU read lock.
        let oif = unsafe { NetDevice::from_raw(owner) }.ifindex();
        Flow { oif, ..flow }
    }

    /// Creates the sockets bound to `port` on every address of the namespace.
    ///
    /// `self` must stay at its address until [`UdpTunnel::close`] has returned: the
    /// sockets point to it.
    pub(super) fn open_sockets(&self, port: u16) -> Result {
        let sk4 = self.create_socket(bindings::AF_INET, port)?;
        self.sk4.store(sk4, Ordering::Release);
        match self.create_socket(bindings::AF_INET6, port) {
            Ok(sk6) => self.sk6.store(sk6, Ordering::Release),
            // The namespace has no IPv6 (e.g. `ipv6.disable=1`): IPv4 only.
            Err(e) if e == EAFNOSUPPORT => {}
            Err(e) => {
                self.close();
                return Err(e);
            }
        }
        Ok(())
    }

    fn create_socket(&self, family: u32, port: u16) -> Result<*mut bindings::sock> {
        let mut cfg = bindings::udp_port_cfg {
            family: family as u8,
            local_udp_port: port.to_be(),
            ..Default::default()
        };
        if family == bindings::AF_INET6 {
            cfg.set_ipv6_v6only(1);
        }
        let mut sock: *mut bindings::socket = ptr::null_mut();
        // SAFETY: `net` is live (the caller holds a netdev of it, see `UdpTunnels::open`);
        // `cfg` and `sock` are valid for the call.
        to_result(unsafe {
            if family == bindings::AF_INET {
                bindings::udp_sock_create4(self.net, &mut cfg, &mut sock)
            } else {
                bindings::udp_sock_create6(self.net, &mut cfg, &mut sock)
            }
        })?;
        // SAFETY: On success `sock` is a live socket we own, with its `sk`.
        let sk = unsafe { (*sock).sk };
        let batch = crate::params::gro();
        let mut tnl = bindings::udp_tunnel_sock_cfg {
            sk_user_data: ptr::from_ref(self).cast_mut().cast(),
            encap_type: if batch { 0 } else { ENCAP_TYPE },
            encap_rcv: if batch { None } else { Some(Self::encap_rcv) },
            ..Default::default()
        };
        // SAFETY: `sk` is our fresh UDP socket of `net`. The user data is `self`, which
        // outlives the socket (see `open_sockets` and `close`).
        unsafe { bindings::setup_udp_tunnel_sock(self.net, sk, &mut tnl) };
        if batch {
            // SAFETY: `sk` is our fresh socket, set up above, in process context; the
            // callback finds `self` as `encap_rcv` does.
            unsafe { bindings::metaroce_udp_sock_batch_rx(sk, Some(Self::data_ready)) };
        }
        Ok(sk)
    }

    /// Closes the sockets; afterwards no callback runs for them and sends fail.
    ///
    /// Process context; it waits for two RCU grace periods.
    pub(super) fn close(&self) {
        let sk4 = self.sk4.swap(ptr::null_mut(), Ordering::AcqRel);
        let sk6 = self.sk6.swap(ptr::null_mut(), Ordering::AcqRel);
        if sk4.is_null() && sk6.is_null() {
            return;
        }
        // Senders read the pointers under the RCU read lock: after this none uses them.
        rcu::synchronize_rcu();
        for sk in [sk4, sk6] {
            if !sk.is_null() {
                // SAFETY: `sk` is one of our tunnel sockets, no longer reachable for
                // senders; this clears its user data, unhashes and releases it.
                unsafe { bindings::udp_tunnel_sock_release(sk) };
            }
        }
        // Receive callbacks run under the RCU read lock and may have read the user data
        // before it was cleared: after this none holds a reference to `self`.
        rcu::synchronize_rcu();
    }

    /// The socket's `encap_rcv`: builds a [`Received`] and hands it to the handler.
    ///
    /// # Safety
    ///
    /// Called by UDP, in softirq context under the RCU read lock, for one of our sockets,
    /// with an skb whose reference it hands over and whose data starts at the UDP header
    /// (already checksum-verified).
    unsafe extern "C" fn encap_rcv(
        sk: *mut bindings::sock,
        skb: *mut bindings::sk_buff,
    ) -> kernel::ffi::c_int {
        // SAFETY: `sk` is live for the call; its user data is NULL or a `UdpTunnel<H>`
        // that stays live until a grace period after it is cleared (`close`).
        let this = unsafe { bindings::metaroce_rcu_dereference_sk_user_data(sk) }
            .cast::<Self>()
            .cast_const();
        if this.is_null() {
            // SAFETY: Per the function's contract the skb reference is ours; it is not
            // used afterwards.
            unsafe { bindings::metaroce_kfree_skb(skb) };
            return 0;
        }
        // SAFETY: Non-NULL user data is a live tunnel (above).
        let this = unsafe { &*this };
        // SAFETY: The skb is ours and live (UDP passes a valid skb). Paged fragments
        // stay where they are: the handler copies them out where they belong.
        let skb = unsafe { SkBuff::from_raw(NonNull::new_unchecked(skb)) };
        // SAFETY: The skb is live; `dev` is set on received packets.
        let dev = unsafe { bindings::metaroce_skb_dev(skb.as_raw()) };
        match this.receive(skb, dev) {
            Ok(()) => {}
            Err(skb) => {
                this.rx_malformed.fetch_add(1, Relaxed);
                skb.discard();
            }
        }
        0
    }

    /// The socket's `sk_data_ready` with the `gro` parameter: takes every datagram
    /// of the queue, each possibly a UDP GSO buffer, and hands it to
    /// [`Self::receive`].
    ///
    /// # Safety
    ///
    /// Called by UDP for one of our batching sockets
    /// (`metaroce_udp_sock_batch_rx`), in softirq context after queueing a buffer.
    unsafe extern "C" fn data_ready(sk: *mut bindings::sock) {
        let _rcu = rcu::read_lock();
        // SAFETY: `sk` is live for the call; its user data is NULL or a `UdpTunnel<H>`
        // that stays live until a grace period after it is cleared (`close`), and we
        // hold the RCU read lock.
        let this = unsafe { bindings::metaroce_rcu_dereference_sk_user_data(sk) }
            .cast::<Self>()
            .cast_const();
        if this.is_null() {
            // Closing: releasing the socket purges its queue.
            return;
        }
        // SAFETY: Non-NULL user data is a live tunnel (above).
        let this = unsafe { &*this };
        // SAFETY: `sk` is live; the helper dequeues without sleeping.
        while let Some(raw) = NonNull::new(unsafe { bindings::metaroce_udp_recv(sk) }) {
            // SAFETY: The dequeued skb's reference is ours.
            let skb = unsafe { SkBuff::from_raw(raw) };
            // SAFETY: `sk` and the skb are live; under the RCU read lock.
            let dev = unsafe { bindings::metaroce_skb_iif_dev_rcu(sk, skb.as_raw()) };
            // SAFETY: The queue pulled the UDP header, whose bytes stay in front of
            // the data.
            unsafe { bindings::metaroce_skb_push_udp(skb.as_raw()) };
            if let Err(skb) = this.receive(skb, dev) {
                this.rx_malformed.fetch_add(1, Relaxed);
                skb.discard();
            }
        }
    }

    /// Parses the headers of `skb` (data at the UDP header), which came in on `dev`,
    /// and calls the handler for each datagram it holds (more than one for a UDP GSO
    /// buffer), or returns the buffer when it is malformed.
    fn receive(
        &self,
        mut skb: SkBuff,
        dev: *mut bindings::net_device,
    ) -> core::result::Result<(), SkBuff> {
        // UDP has made its header linear already; this only checks.
        if skb.make_linear(UDP_HLEN).is_err() {
            return Err(skb);
        }
        // SAFETY: The skb is live; the network header offset was set by the IP layer.
        let nh = unsafe { bindings::metaroce_skb_network_header(skb.as_raw()) };
        let data = skb.data().as_ptr();
        // The IP header lies between the network header and the UDP header, both inside
        // the linear buffer, the network header first.
        let ip_len = (data as usize).wrapping_sub(nh as usize);
        if nh.is_null() || ip_len == 0 || ip_len > skb.headroom() {
            return Err(skb);
        }
        // SAFETY: `[nh, data)` is within the buffer's head room (checked just above:
        // `data - headroom` is the buffer's head) and holds the received IP header.
        let ip = unsafe { core::slice::from_raw_parts(nh.cast_const(), ip_len) };
        let Some(info) = DatagramInfo::parse(ip, skb.data()) else {
            return Err(skb);
        };
        if dev.is_null() || skb.pull(UDP_HLEN).is_err() {
            return Err(skb);
        }
        // SAFETY: The receive path holds the ingress device for the duration of the
        // softirq that runs this callback.
        let mut netdev = unsafe { NetDevice::from_raw(dev) };
        // Local traffic (the sender routed to a local address, see `local_flow`) comes
        // in on the loopback device: it is for the netdev that owns the destination
        // address, as if it had come in there.
        // SAFETY: `dev` is live (above).
        if unsafe { bindings::metaroce_netdev_is_loopback(dev) } {
            // SAFETY: Softirq context under the RCU read lock, with the socket (hence
            // `net`) live; the owner stays live until the callback returns.
            let owner = unsafe { self.local_owner(info.dst.ip()) };
            if !owner.is_null() {
                // SAFETY: Live under the RCU read lock, which the callback holds.
                netdev = unsafe { NetDevice::from_raw(owner) };
            }
        }
        // SAFETY: The skb is live.
        let gso = unsafe { bindings::metaroce_skb_gso_size(skb.as_raw()) } as usize;
        let len = skb.len();
        if gso == 0 || len <= gso {
            self.handler.on_datagram(Received {
                skb,
                seg: None,
                more: false,
                info,
                netdev,
                unclaimed: &self.rx_unclaimed,
            });
            return Ok(());
        }
        // A UDP GSO buffer: each `gso` bytes (the last possibly fewer) are one
        // datagram. Each goes to the handler with a reference to the buffer, which
        // nobody changes from here on.
        // SAFETY: The skb is ours; its route is not needed (as in `into_owned`).
        unsafe { bindings::metaroce_skb_dst_drop(skb.as_raw()) };
        self.rx_gro_buffers.fetch_add(1, Relaxed);
        let mut start = 0;
        while start < len {
            let n = gso.min(len - start);
            // SAFETY: The skb is live; the new reference is handed to the `SkBuff`.
            let shared = unsafe {
                SkBuff::from_raw(NonNull::new_unchecked(bindings::metaroce_skb_get(
                    skb.as_raw(),
                )))
            };
            self.rx_gro_segments.fetch_add(1, Relaxed);
            self.handler.on_datagram(Received {
                skb: shared,
                seg: Some(Segment { start, len: n }),
                more: start + n < len,
                info,
                netdev,
                unclaimed: &self.rx_unclaimed,
            });
            start += n;
        }
        Ok(())
    }
}

impl<H: DatagramHandler> Drop for UdpTunnel<H> {
    fn drop(&mut self) {
        // Normally closed already, by the last `TunnelRef` or the namespace's exit.
        self.close();
    }
}

/// Bottom halves disabled on this CPU for the guard's lifetime: the IP tunnel transmit
/// path counts its recursion per CPU and expects it.
struct BhDisabled(PhantomData<*mut ()>);

impl BhDisabled {
    fn new() -> Self {
        // SAFETY: Always allowed; re-enabled in `drop` on the same CPU (the guard is
        // neither `Send` nor `Sync`, and disabled BH pins the task to the CPU).
        unsafe { bindings::metaroce_local_bh_disable() };
        Self(PhantomData)
    }
}

impl Drop for BhDisabled {
    fn drop(&mut self) {
        // SAFETY: Disabled in `new`.
        unsafe { bindings::metaroce_local_bh_enable() };
    }
}
