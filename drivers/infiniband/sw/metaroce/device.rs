// SPDX-License-Identifier: GPL-2.0

//! A MetaRoCE device: its attributes and per-device state (`impl Driver for
//! MetaRoceDriver`).

use crate::driver::{
    MetaRoceDriver, GID_TABLE_LEN, MAX_AH, MAX_CQ, MAX_CQE, MAX_MR, MAX_PD, MAX_QP, MAX_QP_WR,
    MAX_RD_ATOMIC, MAX_SGE, MAX_SRQ, PACKET_OVERHEAD, VENDOR_ID,
};
use crate::net::DeviceNet;
use crate::qp::{self, MetaRoceQp};
use kernel::{
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc,
    },
};
use metaroce_proto::constants::MAX_MSG_LEN;
use rdma::{
    device::{Device, DeviceAttributes, DeviceCaps, Driver, DriverQp, PortAttributes},
    mtu::Mtu,
    netdev::NetDevice,
    qp::{ModifyQp, QpAttributes, QpInit, QpState},
    restrack::ResourceAttrs,
    stats::CounterDesc,
};

/// Per-device state.
#[pin_data]
pub(crate) struct MetaRoceDevice {
    /// The netdev's MTU, kept current by the netdev notifier.
    netdev_mtu: Atomic<u32>,
    /// Times the netdev lost its link while the device existed.
    link_downed: Atomic<u64>,
    /// The UDP tunnel and datagram counters.
    net: DeviceNet,
}

impl MetaRoceDevice {
    pub(crate) fn new(netdev: &NetDevice, net: DeviceNet) -> impl PinInit<Self, Error> {
        let mtu = netdev.mtu();
        try_pin_init!(Self {
            netdev_mtu: Atomic::new(mtu),
            link_downed: Atomic::new(0),
            net,
        })
    }

    pub(crate) fn net(&self) -> &DeviceNet {
        &self.net
    }

    pub(crate) fn set_netdev_mtu(&self, mtu: u32) {
        self.netdev_mtu.store(mtu, Relaxed);
    }

    pub(crate) fn count_link_down(&self) {
        self.link_downed.fetch_add(1, Relaxed);
    }

    /// The largest IB MTU that fits the netdev's MTU with MetaRoCE headers.
    pub(crate) fn active_mtu(&self) -> Mtu {
        Mtu::for_ethernet(self.netdev_mtu.load(Relaxed), PACKET_OVERHEAD)
    }

    /// Payload bytes per packet of a connection opened by a QP whose path MTU is
    /// `path_mtu` (spec [MR-WIRE-6]). A QP at the port's active MTU gets all the
    /// netdev's MTU leaves after the headers: MetaRoCE is not bound to the IB MTU
    /// steps, so at an Ethernet MTU of 1500 a packet carries 1392 bytes, not 1024,
    /// and at 9000, 8892, not 4096. A QP that asks for less knows of a narrower
    /// path and gets what it asked for.
    pub(crate) fn payload_mtu(&self, path_mtu: Mtu) -> u32 {
        // One reading of the MTU, so a concurrent change cannot mix two of them.
        let eth = self.netdev_mtu.load(Relaxed);
        let active = Mtu::for_ethernet(eth, PACKET_OVERHEAD).bytes();
        if path_mtu.bytes() < active {
            return path_mtu.bytes();
        }
        eth.saturating_sub(PACKET_OVERHEAD).max(active)
    }
}

impl Driver for MetaRoceDriver {
    type Data = MetaRoceDevice;

    const NODE_DESC: &'static CStr = c"metaroce";

    const HW_COUNTERS: &'static [CounterDesc] = &crate::counters::HW_COUNTERS;

    fn hw_counters(dev: &Device<Self>, values: &mut [u64]) {
        dev.data().net().read_counters(values);
    }

    const QP_COUNTERS: usize = crate::counters::QP_COUNTERS;

    fn qp_counters(qp: &DriverQp<MetaRoceDriver>, values: &mut [u64]) {
        qp.data().counters.read(values);
    }

    fn device_attributes(_dev: &Device<Self>) -> DeviceAttributes {
        DeviceAttributes {
            max_mr_size: u64::MAX,
            page_size_cap: 0xffff_f000,
            // What rdma_rxe reports (rxe_param.h): 0xffffff is "no OUI" (IBTA A3.3.1),
            // and a software device has no part number, hardware or firmware.
            vendor_id: VENDOR_ID,
            vendor_part_id: 0,
            hw_ver: 0,
            fw_ver: 0,
            max_qp: MAX_QP,
            max_qp_wr: MAX_QP_WR,
            device_cap_flags: DeviceCaps::PORT_ACTIVE_EVENT
                | DeviceCaps::SYS_IMAGE_GUID
                | DeviceCaps::RC_RNR_NAK_GEN
                | DeviceCaps::SRQ_RESIZE,
            max_send_sge: MAX_SGE,
            max_recv_sge: MAX_SGE,
            max_sge_rd: MAX_SGE,
            max_cq: MAX_CQ,
            max_cqe: MAX_CQE,
            max_mr: MAX_MR,
            max_pd: MAX_PD,
            max_qp_rd_atom: MAX_RD_ATOMIC,
            max_qp_init_rd_atom: MAX_RD_ATOMIC,
            max_res_rd_atom: MAX_RD_ATOMIC * MAX_QP,
            atomics: true,
            max_ah: MAX_AH,
            max_srq: MAX_SRQ,
            max_srq_wr: MAX_QP_WR,
            max_srq_sge: MAX_SGE,
            local_ca_ack_delay: 15,
        }
    }

    fn port_attributes(dev: &Device<Self>, netdev: &NetDevice) -> PortAttributes {
        PortAttributes {
            max_mtu: Mtu::Mtu4096,
            active_mtu: dev.data().active_mtu(),
            phys_mtu: netdev.mtu(),
            gid_tbl_len: GID_TABLE_LEN,
            pkey_tbl_len: 1,
            max_msg_sz: MAX_MSG_LEN,
            port_cap_flags: rdma::device::PortCaps::CM_SUP,
        }
    }

    type Qp = MetaRoceQp;

    fn new_qp(_dev: &Device<Self>, init: &QpInit) -> Result<MetaRoceQp> {
        MetaRoceQp::new(init)
    }

    fn check_modify_qp(
        dev: &Device<Self>,
        qp: &DriverQp<MetaRoceDriver>,
        cur: &QpAttributes,
        req: &ModifyQp,
    ) -> Result {
        qp::check_modify(dev, qp, cur, req)
    }

    fn qp_modified(
        dev: &Device<Self>,
        qp: &Arc<DriverQp<MetaRoceDriver>>,
        from: QpState,
        to: QpState,
    ) {
        qp::on_modified(dev, qp, from, to)
    }

    fn send_doorbell(dev: &Device<Self>, qp: &Arc<DriverQp<MetaRoceDriver>>) -> Result {
        qp::on_send_doorbell(dev, qp)
    }

    fn qp_destroying(dev: &Device<Self>, qp: &Arc<DriverQp<MetaRoceDriver>>) {
        qp::on_destroying(dev, qp)
    }

    fn qp_resource(
        _dev: &Device<Self>,
        qp: &Arc<DriverQp<MetaRoceDriver>>,
        attrs: &mut ResourceAttrs<'_>,
    ) -> Result {
        qp::resource(qp, attrs)
    }
}
