// SPDX-License-Identifier: GPL-2.0

//! Conversions between the protocol core's types and rdma's (and rdma's addresses and
//! the network stack's), in one place. Both layers
//! name the same concepts alike (`WcStatus`, `WcOpcode`, `AtomicOp`): the core's are
//! spelled `Core*` here only, so the rest of the driver means rdma's by those names.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use metaroce_proto::{
    AtomicOp as CoreAtomicOp, Opcode, WcOpcode as CoreOpcode, WcStatus as CoreStatus,
};
use rdma::{
    av::IpAddress,
    cq::{WcOpcode, WcStatus},
    mr::AtomicOp,
    qp::SendOpcode,
};

/// The core's opcode for a send WQE's, `None` for those the core does not carry.
pub(crate) fn core_opcode(op: SendOpcode) -> Option<Opcode> {
    Some(match op {
        SendOpcode::Send => Opcode::Send,
        SendOpcode::SendWithImm => Opcode::SendImm,
        SendOpcode::RdmaWrite => Opcode::Write,
        SendOpcode::RdmaWriteWithImm => Opcode::WriteImm,
        SendOpcode::RdmaRead => Opcode::Read,
        SendOpcode::AtomicCmpAndSwp => Opcode::CompareSwap,
        SendOpcode::AtomicFetchAndAdd => Opcode::FetchAdd,
        SendOpcode::LocalInv | SendOpcode::SendWithInv => return None,
    })
}

/// The completion status of the core's completion status.
pub(crate) fn wc_status(s: CoreStatus) -> WcStatus {
    match s {
        CoreStatus::Success => WcStatus::Success,
        CoreStatus::LocLenErr => WcStatus::LocLenErr,
        CoreStatus::LocProtErr => WcStatus::LocProtErr,
        CoreStatus::RemAccessErr => WcStatus::RemAccessErr,
        CoreStatus::RemInvReqErr => WcStatus::RemInvReqErr,
        CoreStatus::RemOpErr => WcStatus::RemOpErr,
        CoreStatus::RetryExcErr => WcStatus::RetryExcErr,
        CoreStatus::RnrRetryExcErr => WcStatus::RnrRetryExcErr,
        CoreStatus::WrFlushErr => WcStatus::WrFlushErr,
    }
}

/// The completion opcode of the core's completion.
pub(crate) fn wc_opcode(o: CoreOpcode) -> WcOpcode {
    match o {
        CoreOpcode::Send => WcOpcode::Send,
        CoreOpcode::RdmaWrite => WcOpcode::RdmaWrite,
        CoreOpcode::RdmaRead => WcOpcode::RdmaRead,
        CoreOpcode::CompSwap => WcOpcode::CompSwap,
        CoreOpcode::FetchAdd => WcOpcode::FetchAdd,
        CoreOpcode::Recv => WcOpcode::Recv,
        CoreOpcode::RecvRdmaWithImm => WcOpcode::RecvRdmaWithImm,
    }
}

/// The memory-region atomic of the core's atomic request.
pub(crate) fn atomic_op(op: CoreAtomicOp) -> AtomicOp {
    match op {
        CoreAtomicOp::CompareSwap { compare, swap } => AtomicOp::CompareSwap { compare, swap },
        CoreAtomicOp::FetchAdd { add } => AtomicOp::FetchAdd { add },
    }
}

/// An address of an address vector as the network stack's.
pub(crate) fn ip(a: IpAddress) -> IpAddr {
    match a {
        IpAddress::V4(b) => IpAddr::V4(Ipv4Addr::from(b)),
        IpAddress::V6(b) => IpAddr::V6(Ipv6Addr::from(b)),
    }
}
