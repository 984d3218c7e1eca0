// SPDX-License-Identifier: GPL-2.0

//! `rdma link add NAME type metaroce netdev DEV`.

use crate::{
    device::MetaRoceDevice,
    driver::MetaRoceDriver,
    net::{DeviceNet, NetContext},
};
use kernel::{prelude::*, sync::Arc};
use rdma::{
    device::{self, Device, Registry},
    link::LinkOps,
    netdev::NetDevice,
};

/// Creates metaroce devices on request of the RDMA netlink interface.
pub(crate) struct NewLink {
    registry: Arc<Registry<MetaRoceDriver>>,
    net: Arc<NetContext>,
}

impl NewLink {
    pub(crate) fn new(registry: Arc<Registry<MetaRoceDriver>>, net: Arc<NetContext>) -> Self {
        Self { registry, net }
    }
}

impl LinkOps for NewLink {
    fn newlink(&self, name: &CStr, netdev: &NetDevice) -> Result {
        if netdev.is_vlan() {
            pr_err!(
                "{:?}: create the device on the real netdev, not a VLAN\n",
                netdev.name()
            );
            return Err(EPERM);
        }
        if self.registry.get_by_netdev(netdev.id()).is_some() {
            pr_err!("{:?} already has a metaroce device\n", netdev.name());
            return Err(EEXIST);
        }
        // Both would answer for the netdev's addresses (one GID table entry each).
        if device::netdev_has_soft_roce_device(netdev) {
            pr_err!("{:?} already has an rdma_rxe device\n", netdev.name());
            return Err(EEXIST);
        }
        let net = DeviceNet::new(&self.net, &self.registry, netdev, name).inspect_err(|e| {
            pr_err!(
                "{:?}: opening UDP port {} failed: {:?}\n",
                name,
                metaroce_proto::constants::UDP_PORT,
                e
            );
        })?;
        Device::register(
            &self.registry,
            netdev,
            name,
            MetaRoceDevice::new(netdev, net),
        )
        .inspect_err(|e| {
            pr_err!(
                "creating {:?} on {:?} failed: {:?}\n",
                name,
                netdev.name(),
                e
            );
        })
    }
}
