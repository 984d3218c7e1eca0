// SPDX-License-Identifier: GPL-2.0

//! Output route lookups for UDP datagrams (`ip_route_output_flow`,
//! `ip6_dst_lookup_flow`), as rdma_rxe's `rxe_find_route4/6` do, and a per-flow
//! route cache (`struct dst_cache`), as UDP tunnel drivers keep one.
//!
//! C headers: [`include/net/route.h`](srctree/include/net/route.h),
//! [`include/net/ip6_route.h`](srctree/include/net/ip6_route.h),
//! [`include/net/dst_cache.h`](srctree/include/net/dst_cache.h).

use crate::bindings;
use core::{
    net::{Ipv4Addr, Ipv6Addr},
    ptr::NonNull,
};
use kernel::{
    error::{from_err_ptr, to_result},
    prelude::*,
};

/// The UDP protocol number, for the flow key.
const IPPROTO_UDP: u8 = bindings::IPPROTO_UDP as u8;

/// A UDP flow to look a route up for: the ports take part in multipath hashing, so
/// datagrams of different source ports may take different equal-cost routes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Flow<A> {
    /// Output interface index (the device's netdev).
    pub(crate) oif: i32,
    /// Source address; unspecified lets the route choose.
    pub(crate) src: A,
    pub(crate) dst: A,
    pub(crate) src_port: u16,
    pub(crate) dst_port: u16,
}

/// A held IPv4 route (`struct rtable`), released on drop.
///
/// # Invariants
///
/// `rt` is a live route on which this value owns one reference.
pub(crate) struct Route4 {
    rt: NonNull<bindings::rtable>,
    /// The source address (chosen by the lookup when the flow's was unspecified).
    pub(crate) src: Ipv4Addr,
}

impl Route4 {
    /// Looks up the route of `flow`; fails with `EHOSTUNREACH` when there is none.
    ///
    /// # Safety
    ///
    /// `net` must be live for the call.
    pub(crate) unsafe fn lookup(net: *mut bindings::net, flow: &Flow<Ipv4Addr>) -> Result<Self> {
        let mut fl = bindings::flowi4::default();
        fl.__fl_common.flowic_oif = flow.oif;
        fl.__fl_common.flowic_proto = IPPROTO_UDP;
        fl.saddr = u32::from(flow.src).to_be();
        fl.daddr = u32::from(flow.dst).to_be();
        fl.uli.ports = bindings::flowi_uli__bindgen_ty_1 {
            dport: flow.dst_port.to_be(),
            sport: flow.src_port.to_be(),
        };
        // SAFETY: `net` is live (the function's contract); `fl` is a valid flow key.
        let rt = unsafe { bindings::ip_route_output_flow(net, &mut fl, core::ptr::null()) };
        let rt = from_err_ptr(rt).map_err(|_| EHOSTUNREACH)?;
        let rt = NonNull::new(rt).ok_or(EHOSTUNREACH)?;
        // INVARIANT: A successful lookup returns a held route.
        Ok(Self {
            rt,
            src: Ipv4Addr::from(u32::from_be(fl.saddr)),
        })
    }

    /// Returns the hop limit (TTL) the route asks for.
    pub(crate) fn hop_limit(&self) -> u8 {
        // SAFETY: The route is live (type invariant).
        let ttl = unsafe { bindings::metaroce_ip4_dst_hoplimit(self.rt.as_ptr()) };
        u8::try_from(ttl).unwrap_or(64)
    }

    /// Gives the reference up, e.g. to `udp_tunnel_xmit_skb`, which consumes it.
    pub(crate) fn into_raw(self) -> *mut bindings::rtable {
        let rt = self.rt.as_ptr();
        core::mem::forget(self);
        rt
    }
}

impl Drop for Route4 {
    fn drop(&mut self) {
        // SAFETY: We own one reference (type invariant).
        unsafe { bindings::metaroce_ip_rt_put(self.rt.as_ptr()) };
    }
}

/// A held IPv6 route (`struct dst_entry`), released on drop.
///
/// # Invariants
///
/// `dst` is a live route without error on which this value owns one reference.
pub(crate) struct Route6 {
    dst: NonNull<bindings::dst_entry>,
    /// The source address (chosen by the lookup when the flow's was unspecified).
    pub(crate) src: Ipv6Addr,
}

impl Route6 {
    /// Looks up the route of `flow`; fails with `EHOSTUNREACH` when there is none.
    ///
    /// # Safety
    ///
    /// `net` must be live for the call and `sk` NULL or a socket of `net`.
    pub(crate) unsafe fn lookup(
        net: *mut bindings::net,
        sk: *const bindings::sock,
        flow: &Flow<Ipv6Addr>,
    ) -> Result<Self> {
        let mut fl6 = bindings::flowi6::default();
        fl6.__fl_common.flowic_oif = flow.oif;
        fl6.__fl_common.flowic_proto = IPPROTO_UDP;
        fl6.saddr.in6_u.u6_addr8 = flow.src.octets();
        fl6.daddr.in6_u.u6_addr8 = flow.dst.octets();
        fl6.uli.ports = bindings::flowi_uli__bindgen_ty_1 {
            dport: flow.dst_port.to_be(),
            sport: flow.src_port.to_be(),
        };
        // SAFETY: `net` and `sk` per the function's contract; `fl6` is a valid flow key.
        let dst = unsafe { bindings::metaroce_ip6_dst_lookup_flow(net, sk, &mut fl6) };
        let dst = from_err_ptr(dst).map_err(|_| EHOSTUNREACH)?;
        let dst = NonNull::new(dst).ok_or(EHOSTUNREACH)?;
        // SAFETY: A successful lookup returns a held route; the lookup wrote `saddr`.
        let (error, src) = unsafe { ((*dst.as_ptr()).error, fl6.saddr.in6_u.u6_addr8) };
        if error != 0 {
            // SAFETY: We own the reference and drop it.
            unsafe { bindings::dst_release(dst.as_ptr()) };
            return Err(EHOSTUNREACH);
        }
        // INVARIANT: Held and without error.
        Ok(Self {
            dst,
            src: Ipv6Addr::from(src),
        })
    }

    /// Returns the hop limit the route asks for.
    pub(crate) fn hop_limit(&self) -> u8 {
        // SAFETY: The route is live (type invariant).
        let hl = unsafe { bindings::ip6_dst_hoplimit(self.dst.as_ptr()) };
        u8::try_from(hl).unwrap_or(64)
    }

    /// Gives the reference up, e.g. to `udp_tunnel6_xmit_skb`, which consumes it.
    pub(crate) fn into_raw(self) -> *mut bindings::dst_entry {
        let dst = self.dst.as_ptr();
        core::mem::forget(self);
        dst
    }
}

impl Drop for Route6 {
    fn drop(&mut self) {
        // SAFETY: We own one reference (type invariant).
        unsafe { bindings::dst_release(self.dst.as_ptr()) };
    }
}

/// The flow a [`RouteCache`] holds the route of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CachedFlow {
    V4(Flow<Ipv4Addr>),
    V6(Flow<Ipv6Addr>),
}

/// The route of one flow, kept between datagrams (the kernel's per-CPU `struct
/// dst_cache`): a lookup costs a FIB walk, and a connection sends every datagram of
/// a path on the same flow. A cached route is checked at each use and dropped when
/// the routing table changed; a different flow replaces it.
///
/// # Invariants
///
/// `cache` was initialized by `dst_cache_init` and is destroyed only on drop.
pub struct RouteCache {
    cache: bindings::dst_cache,
    flow: Option<CachedFlow>,
}

// SAFETY: The per-CPU storage belongs to this value; it is used through `&mut self`
// only, with bottom halves disabled, on whichever CPU the owner runs.
unsafe impl Send for RouteCache {}

impl RouteCache {
    /// An empty cache (allocates its per-CPU storage).
    pub fn new(flags: kernel::alloc::Flags) -> Result<Self> {
        let mut cache = bindings::dst_cache::default();
        // SAFETY: `cache` is a zeroed `struct dst_cache` we own.
        to_result(unsafe { bindings::dst_cache_init(&mut cache, crate::skb::gfp(flags)) })?;
        // INVARIANT: Initialized just above.
        Ok(Self { cache, flow: None })
    }

    /// Forgets the cached route unless it belongs to `flow`, which it is kept for next.
    fn select(&mut self, flow: CachedFlow) -> bool {
        if self.flow == Some(flow) {
            return true;
        }
        // SAFETY: The cache is initialized (type invariant) and has no concurrent
        // user (`&mut self`).
        unsafe { bindings::dst_cache_reset_now(&mut self.cache) };
        self.flow = Some(flow);
        false
    }
}

/// A route a [`RouteCache`] can hold, of the family whose addresses are `Addr`.
pub(crate) trait CachedRoute: Sized {
    /// The family's address type.
    type Addr;
    /// The cached route of `flow`, if it is still valid. Bottom halves must be disabled.
    fn cached(cache: &mut RouteCache, flow: &Flow<Self::Addr>) -> Option<Self>;
    /// Keeps `self` in `cache` as the route of `flow`. Bottom halves must be disabled.
    fn keep(&self, cache: &mut RouteCache, flow: &Flow<Self::Addr>);
}

impl CachedRoute for Route4 {
    type Addr = Ipv4Addr;

    fn cached(cache: &mut RouteCache, flow: &Flow<Ipv4Addr>) -> Option<Self> {
        if !cache.select(CachedFlow::V4(*flow)) {
            return None;
        }
        let mut saddr = 0u32;
        // SAFETY: The cache is initialized (type invariant); bottom halves are
        // disabled (the function's contract).
        let rt =
            NonNull::new(unsafe { bindings::dst_cache_get_ip4(&mut cache.cache, &mut saddr) })?;
        // INVARIANT: `dst_cache_get_ip4` returns a held route.
        Some(Route4 {
            rt,
            src: Ipv4Addr::from(u32::from_be(saddr)),
        })
    }

    fn keep(&self, cache: &mut RouteCache, flow: &Flow<Ipv4Addr>) {
        cache.select(CachedFlow::V4(*flow));
        // SAFETY: The cache is initialized (type invariant); `self` is live and the
        // cache takes its own reference; a `struct rtable` begins with its `dst_entry`.
        unsafe {
            bindings::dst_cache_set_ip4(
                &mut cache.cache,
                self.rt.as_ptr().cast::<bindings::dst_entry>(),
                u32::from(self.src).to_be(),
            )
        };
    }
}

impl CachedRoute for Route6 {
    type Addr = Ipv6Addr;

    fn cached(cache: &mut RouteCache, flow: &Flow<Ipv6Addr>) -> Option<Self> {
        if !cache.select(CachedFlow::V6(*flow)) {
            return None;
        }
        let mut saddr = bindings::in6_addr::default();
        // SAFETY: As for IPv4.
        let dst =
            NonNull::new(unsafe { bindings::dst_cache_get_ip6(&mut cache.cache, &mut saddr) })?;
        // SAFETY: `saddr` was written by the lookup.
        let src = Ipv6Addr::from(unsafe { saddr.in6_u.u6_addr8 });
        // INVARIANT: `dst_cache_get_ip6` returns a held route; only routes without
        // error are cached (`keep`).
        Some(Route6 { dst, src })
    }

    fn keep(&self, cache: &mut RouteCache, flow: &Flow<Ipv6Addr>) {
        cache.select(CachedFlow::V6(*flow));
        let mut saddr = bindings::in6_addr::default();
        saddr.in6_u.u6_addr8 = self.src.octets();
        // SAFETY: As for IPv4.
        unsafe { bindings::dst_cache_set_ip6(&mut cache.cache, self.dst.as_ptr(), &saddr) };
    }
}

/// The route of `flow`: from `cache` while it is valid there, else from `lookup`,
/// then kept in `cache`. Bottom halves must be disabled.
pub(crate) fn cached_or_lookup<R: CachedRoute>(
    mut cache: Option<&mut RouteCache>,
    flow: &Flow<R::Addr>,
    lookup: impl FnOnce() -> Result<R>,
) -> Result<R> {
    if let Some(rt) = cache.as_deref_mut().and_then(|c| R::cached(c, flow)) {
        return Ok(rt);
    }
    let rt = lookup()?;
    if let Some(c) = cache {
        rt.keep(c, flow);
    }
    Ok(rt)
}

impl Drop for RouteCache {
    fn drop(&mut self) {
        // SAFETY: Initialized (type invariant) and no longer used.
        unsafe { bindings::dst_cache_destroy(&mut self.cache) };
    }
}
