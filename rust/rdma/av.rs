// SPDX-License-Identifier: GPL-2.0

//! RoCE v2 address vectors (`struct rdma_ah_attr` with its source GID attribute).
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h),
//! [`include/rdma/ib_cache.h`](srctree/include/rdma/ib_cache.h).
//!
//! What the transport needs to address a peer: source and destination IP addresses
//! (from the GIDs, IPv4-mapped or IPv6, as `rdma_gid2ip` derives them), the destination
//! MAC the core resolved, the source MAC and VLAN of the GID's netdev, and the GRH
//! fields (flow label for the UDP source port, traffic class for DSCP/ECN, hop limit).

use crate::bindings;
use kernel::{error::to_result, prelude::*};

/// An IP address of a RoCE v2 endpoint.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum IpAddress {
    /// IPv4 (from an IPv4-mapped GID).
    V4([u8; 4]),
    /// IPv6.
    V6([u8; 16]),
}

impl IpAddress {
    /// The address a GID stands for, as `rdma_gid2ip` computes it.
    pub fn from_gid(gid: &[u8; 16]) -> Self {
        if gid[..10].iter().all(|b| *b == 0) && gid[10] == 0xff && gid[11] == 0xff {
            Self::V4([gid[12], gid[13], gid[14], gid[15]])
        } else {
            Self::V6(*gid)
        }
    }
}

/// A resolved RoCE v2 address vector.
#[derive(Clone, Copy, Debug)]
pub struct AddressVector {
    /// Port (always 1).
    pub port_num: u32,
    /// Destination GID.
    pub dgid: [u8; 16],
    /// Source GID (the GID table entry at `sgid_index`).
    pub sgid: [u8; 16],
    /// Source GID index.
    pub sgid_index: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
    /// Hop limit (IP TTL).
    pub hop_limit: u8,
    /// Traffic class (DSCP and ECN bits).
    pub traffic_class: u8,
    /// Service level.
    pub sl: u8,
    /// Static rate.
    pub static_rate: u8,
    /// Destination MAC, resolved by the core.
    pub dmac: [u8; 6],
    /// Source MAC of the GID's netdev.
    pub smac: [u8; 6],
    /// VLAN id of the GID's netdev (0xffff for none).
    pub vlan_id: u16,
    /// Source address.
    pub src: IpAddress,
    /// Destination address.
    pub dst: IpAddress,
}

impl AddressVector {
    /// Reads a RoCE address vector; `EINVAL` without GRH or source GID attribute.
    ///
    /// # Safety
    ///
    /// `attr` is a valid `rdma_ah_attr` whose `grh.sgid_attr` is NULL or a GID attribute
    /// the caller holds a reference on (the core does for `modify_qp` and `create_ah`).
    pub(crate) unsafe fn from_raw(attr: &bindings::rdma_ah_attr) -> Result<Self> {
        if attr.type_ != bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE
            || attr.ah_flags & bindings::ib_ah_flags_IB_AH_GRH as u8 == 0
        {
            return Err(EINVAL);
        }
        let grh = &attr.grh;
        if grh.sgid_attr.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: Held by the caller (see above).
        let sgid_attr = unsafe { &*grh.sgid_attr };
        // SAFETY: Both union members are plain bytes.
        let (dgid, sgid) = unsafe { (grh.dgid.raw, sgid_attr.gid.raw) };
        let mut smac = [0u8; 6];
        let mut vlan_id = 0xffffu16;
        // SAFETY: Held GID attribute; the outputs are valid for writes of their size.
        to_result(unsafe {
            bindings::rdma_read_gid_l2_fields(grh.sgid_attr, &mut vlan_id, smac.as_mut_ptr())
        })?;
        // SAFETY: A RoCE attribute (checked above) uses the `roce` member.
        let dmac = unsafe { attr.__bindgen_anon_1.roce.dmac };
        Ok(Self {
            port_num: attr.port_num,
            dgid,
            sgid,
            sgid_index: grh.sgid_index,
            flow_label: grh.flow_label,
            hop_limit: grh.hop_limit,
            traffic_class: grh.traffic_class,
            sl: attr.sl,
            static_rate: attr.static_rate,
            dmac,
            smac,
            vlan_id,
            src: IpAddress::from_gid(&sgid),
            dst: IpAddress::from_gid(&dgid),
        })
    }

    /// Writes the address vector back as `query_qp`/`query_ah` report it (without a GID
    /// attribute reference).
    pub(crate) fn to_raw(self, attr: &mut bindings::rdma_ah_attr) {
        attr.type_ = bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE;
        attr.ah_flags = bindings::ib_ah_flags_IB_AH_GRH as u8;
        attr.port_num = self.port_num;
        attr.sl = self.sl;
        attr.static_rate = self.static_rate;
        attr.grh.dgid.raw = self.dgid;
        attr.grh.sgid_index = self.sgid_index;
        attr.grh.flow_label = self.flow_label;
        attr.grh.hop_limit = self.hop_limit;
        attr.grh.traffic_class = self.traffic_class;
        attr.grh.sgid_attr = core::ptr::null();
        attr.__bindgen_anon_1.roce = bindings::roce_ah_attr { dmac: self.dmac };
    }
}
