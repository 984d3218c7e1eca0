// SPDX-License-Identifier: GPL-2.0

//! Safe abstractions over the kernel's RDMA core and networking for metaroce.
//!
//! The kernel crate has no RDMA, netdev or UDP tunnel abstractions; this crate
//! provides the few the driver needs. It is the only place of the module that
//! holds `unsafe` code: every block argues its soundness in a `SAFETY` comment,
//! and the driver crate (`drivers/infiniband/sw/metaroce`) forbids `unsafe`
//! entirely.

// The `unsafe extern "C" fn`s are the callbacks of the ops tables (device, link,
// counters, notifier): only the C core calls them, under the contract of the op it
// registered them for, which the `SAFETY` comments in their bodies cite.
#![allow(
    clippy::missing_safety_doc,
    reason = "unsafe fns here are C callbacks; their contract is the C op's"
)]
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h),
//! [`include/rdma/rdma_netlink.h`](srctree/include/rdma/rdma_netlink.h),
//! [`include/linux/netdevice.h`](srctree/include/linux/netdevice.h),
//! [`include/net/udp_tunnel.h`](srctree/include/net/udp_tunnel.h).

pub mod ah;
pub mod av;
pub mod bindings;
pub mod clock;
pub mod cq;
pub mod device;
pub mod link;
pub mod mmap;
pub mod mr;
pub mod mtu;
pub mod netdev;
mod object;
pub mod params;
pub mod qp;
pub mod queue;
pub mod quota;
pub mod random;
pub mod restrack;
mod ring;
mod route;
pub mod skb;
pub mod srq;
pub mod stats;
pub mod sync;
pub mod table;
pub mod trace;
pub mod udata;
pub mod udp;
mod verbs;
pub mod work;
pub mod wqe;
