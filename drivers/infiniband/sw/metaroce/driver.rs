// SPDX-License-Identifier: GPL-2.0

//! The driver type and the limits it is built for, at the bottom of the crate: it
//! imports nothing of the crate, so every file may import it (its `rdma::Driver`
//! implementation is in `device.rs`).

use metaroce_proto::constants::MAX_DATA_HEADER_LEN;
use rdma::qp::MAX_SGE as RING_MAX_SGE;

/// The driver type of metaroce devices.
pub(crate) struct MetaRoceDriver;

/// Bytes of every packet that are not payload: IPv6 (the larger IP header), UDP and
/// the largest MetaRoCE data header.
pub(crate) const PACKET_OVERHEAD: u32 = 40 + 8 + MAX_DATA_HEADER_LEN as u32;

/// Limits the driver is built for (Documentation/metaroce/driver.rst, "Limits").
pub(crate) const MAX_QP: u32 = 16384;
pub(crate) const MAX_QP_WR: u32 = 16384;
pub(crate) const MAX_SGE: u32 = RING_MAX_SGE as u32;
pub(crate) const MAX_CQ: u32 = 16384;
pub(crate) const MAX_CQE: u32 = (1 << 15) - 1;
pub(crate) const MAX_MR: u32 = 65536;
pub(crate) const MAX_PD: u32 = 65536;
pub(crate) const MAX_RD_ATOMIC: u32 = 128;
pub(crate) const MAX_AH: u32 = 65536;
pub(crate) const MAX_SRQ: u32 = 16384;
/// GID entries per port: one per address of the netdev (RoCE v2 only), as many as a
/// ConnectX RoCE port's. The RDMA core makes sysfs files for every entry when a device
/// registers.
pub(crate) const GID_TABLE_LEN: u32 = 256;
/// The IEEE vendor id of a device without an OUI, as rdma_rxe reports it.
pub(crate) const VENDOR_ID: u32 = 0xff_ffff;
