// SPDX-License-Identifier: GPL-2.0

//! The InfiniBand MTU of a port or a connected QP's path (`enum ib_mtu`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).

/// An InfiniBand MTU (`enum ib_mtu`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
pub enum Mtu {
    /// 256 bytes.
    Mtu256 = 1,
    /// 512 bytes.
    Mtu512 = 2,
    /// 1024 bytes.
    Mtu1024 = 3,
    /// 2048 bytes.
    Mtu2048 = 4,
    /// 4096 bytes.
    Mtu4096 = 5,
}

impl Mtu {
    /// From an `enum ib_mtu` value.
    pub fn from_raw(v: u32) -> Option<Self> {
        Some(match v {
            1 => Self::Mtu256,
            2 => Self::Mtu512,
            3 => Self::Mtu1024,
            4 => Self::Mtu2048,
            5 => Self::Mtu4096,
            _ => return None,
        })
    }

    /// Returns the largest IB MTU that fits in an Ethernet MTU of `eth_mtu` bytes once
    /// `overhead` bytes of headers are taken off, as `ib_mtu_int_to_enum` does.
    pub fn for_ethernet(eth_mtu: u32, overhead: u32) -> Self {
        match eth_mtu.saturating_sub(overhead) {
            4096.. => Self::Mtu4096,
            2048.. => Self::Mtu2048,
            1024.. => Self::Mtu1024,
            512.. => Self::Mtu512,
            _ => Self::Mtu256,
        }
    }

    /// Returns the MTU in bytes.
    pub fn bytes(self) -> u32 {
        128 << (self as u32)
    }
}
