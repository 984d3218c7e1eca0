// SPDX-License-Identifier: GPL-2.0

//! What a metaroce device does when its netdev changes.
//!
//! The RDMA core keeps the GID table in sync with the netdev's addresses (it finds the
//! netdev through `ops.get_netdev`). It does not know our netdev for its own netdev
//! notifier (we do not hand it over with `ib_device_set_netdev`: see `rdma::device`), so
//! the port events and letting go of the netdev at unregistration are done here.

use crate::driver::MetaRoceDriver;
use kernel::{prelude::*, sync::Arc};
use rdma::{
    device::Registry,
    netdev::{Event, NetDevice, NotifierHandler},
};

pub(crate) struct NetdevEvents {
    registry: Arc<Registry<MetaRoceDriver>>,
}

impl NetdevEvents {
    pub(crate) fn new(registry: Arc<Registry<MetaRoceDriver>>) -> Self {
        Self { registry }
    }
}

impl NotifierHandler for NetdevEvents {
    fn on_event(&self, event: Event, netdev: &NetDevice) {
        if event == Event::Unregister {
            // Also for a device already being unregistered: the RDMA core must not get
            // the netdev from us once its unregistration has begun.
            self.registry.detach_netdev(netdev.id());
        }
        let Some(dev) = self.registry.get_by_netdev(netdev.id()) else {
            return;
        };
        match event {
            Event::Unregister => {
                pr_info!(
                    "{:?} is going away: removing {:?}\n",
                    netdev.name(),
                    dev.name()
                );
                Registry::unregister_queued(dev);
            }
            Event::ChangeMtu => dev.data().set_netdev_mtu(netdev.mtu()),
            Event::Down => {
                dev.data().count_link_down();
                dev.dispatch_port_state(netdev);
            }
            Event::Up | Event::Change => dev.dispatch_port_state(netdev),
            Event::Other(_) => {}
        }
    }
}
