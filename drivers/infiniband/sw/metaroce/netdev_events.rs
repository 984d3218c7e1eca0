// SPDX-License-Identifier: GPL-2.0

//! What a metaroce device does when its netdev changes.
//!
//! The RDMA core already turns UP/DOWN/CHANGE into port events and keeps the GID table
//! in sync with the netdev's addresses; this handles the rest.

use crate::device::MetaRoceDriver;
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
        let Some(dev) = self.registry.get_by_netdev(netdev.id()) else {
            return;
        };
        match event {
            Event::Unregister => {
                pr_info!("{:?} is going away: removing {:?}\n", netdev.name(), dev.name());
                Registry::unregister_queued(dev);
            }
            Event::ChangeMtu => dev.data().set_netdev_mtu(netdev.mtu()),
            Event::Down => dev.data().count_link_down(),
            Event::Up | Event::Change | Event::Other(_) => {}
        }
    }
}
