// SPDX-License-Identifier: GPL-2.0

//! MetaRoCE: an RDMA transport for lossy Ethernet, as a software RDMA device.
//!
//! `rdma link add mroce0 type metaroce netdev eth0` creates an `ib_device` on any
//! netdev. Userspace drives it through rdma-core's stock Soft-RoCE (rxe) provider.
//! See Documentation/metaroce/ for the protocol and the driver guide.
//!
//! This crate is safe Rust: everything that touches C lives in `rust/rdma`.

#![forbid(unsafe_code)]

mod bound;
mod conn;
mod convert;
mod counters;
mod device;
mod driver;
mod engine;
mod link;
mod memory;
mod net;
mod netdev_events;
mod qp;
mod rate_hint;
mod sge;
mod trace;
mod transport;
mod ud;

use kernel::{prelude::*, sync::Arc};
use rdma::{device::Registry, netdev::Notifier};

module! {
    type: MetaRoce,
    name: "metaroce",
    authors: ["The metaroce authors"],
    description: "MetaRoCE: RDMA over lossy Ethernet (software device)",
    license: "GPL",
    alias: ["rdma-link-metaroce"],
    params: {
        max_conns: u32 {
            default: 1024,
            description: "Most connections (peer addresses) per device; a QP to a new peer beyond them fails RTR with ENOSPC",
        },
        open_rate: u32 {
            default: 20000,
            description: "Datagrams with dst_conn 0 (peers opening connections) a device takes per second, in bursts of up to 1024",
        },
    },
}

/// The module: one link type, the devices it created, a netdev notifier and the UDP
/// tunnel sockets' registry.
///
/// Fields drop in declaration order, which is the teardown order: no new devices, then
/// every device unregistered and freed (closing the last tunnel sockets), then the
/// notifier and the tunnel registry.
struct MetaRoce {
    _link: Pin<KBox<rdma::link::Registration<link::NewLink>>>,
    _devices: DeviceFence,
    _notifier: Pin<KBox<Notifier<netdev_events::NetdevEvents>>>,
    _net: Arc<net::NetContext>,
}

/// Unregisters every device of the module when dropped.
struct DeviceFence(Arc<Registry<driver::MetaRoceDriver>>);

impl Drop for DeviceFence {
    fn drop(&mut self) {
        let n = self.0.len();
        self.0.unregister_all();
        if n > 0 {
            pr_info!("removed {} device(s)\n", n);
        }
    }
}

impl kernel::Module for MetaRoce {
    fn init(module: &'static ThisModule) -> Result<Self> {
        let registry = Registry::new(module)?;
        let net = Arc::new(net::NetContext::new()?, GFP_KERNEL)?;
        let notifier = KBox::pin_init(
            Notifier::new(netdev_events::NetdevEvents::new(registry.clone())),
            GFP_KERNEL,
        )?;
        let link = KBox::pin_init(
            rdma::link::Registration::new(
                c"metaroce",
                link::NewLink::new(registry.clone(), net.clone()),
            ),
            GFP_KERNEL,
        )?;
        pr_info!(
            "loaded: MetaRoCE wire version {:#04x}, UDP port {}\n",
            metaroce_proto::constants::VERSION_DRAFT0,
            metaroce_proto::constants::UDP_PORT
        );
        Ok(Self {
            _link: link,
            _devices: DeviceFence(registry),
            _notifier: notifier,
            _net: net,
        })
    }
}
