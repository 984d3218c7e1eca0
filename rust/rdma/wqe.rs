// SPDX-License-Identifier: GPL-2.0

//! Work requests as the driver sees them: SGEs, opcodes and flags, payloads, the
//! parsed send and receive WQEs (of a QP or an SRQ) and the address of a UD send.

use crate::{
    av::{AddressVector, IpAddress},
    bindings,
    cq::WcOpcode,
};
use kernel::prelude::*;

/// The most SGEs a work request may have (the rings are sized for at most this many).
pub const MAX_SGE: usize = 32;
/// The most inline data a send work request may carry.
pub const MAX_INLINE: usize = MAX_SGE * size_of::<bindings::rxe_sge>();

/// A scatter/gather element (`struct rxe_sge`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Sge {
    /// Virtual address.
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// Local key of the MR.
    pub lkey: u32,
}

/// Up to [`MAX_SGE`] SGEs.
#[derive(Clone, Copy, Debug)]
pub struct SgeList {
    pub(crate) len: usize,
    pub(crate) sges: [Sge; MAX_SGE],
}

impl SgeList {
    /// No SGE.
    pub const EMPTY: Self = Self {
        len: 0,
        sges: [Sge {
            addr: 0,
            length: 0,
            lkey: 0,
        }; MAX_SGE],
    };

    /// The SGEs.
    pub fn as_slice(&self) -> &[Sge] {
        &self.sges[..self.len]
    }

    /// The sum of their lengths.
    pub fn total_len(&self) -> u64 {
        self.as_slice().iter().map(|s| u64::from(s.length)).sum()
    }
}

/// Calls `f(sge, address, position, count)` for each piece of bytes `offset..offset +
/// len` of the scatter list `sges`, in order; `EMSGSIZE` when the list is shorter.
///
/// The one walk of a scatter list: user and kernel consumers' buffers alike.
pub fn walk_sges(
    sges: &[Sge],
    offset: u64,
    len: usize,
    mut f: impl FnMut(&Sge, u64, usize, usize) -> Result,
) -> Result {
    let mut skip = offset;
    let mut pos = 0;
    for sge in sges {
        if pos == len {
            break;
        }
        let sge_len = u64::from(sge.length);
        if skip >= sge_len {
            skip -= sge_len;
            continue;
        }
        let n = (sge_len - skip).min((len - pos) as u64) as usize;
        // An address past the end of the address space is no MR's: the lookup refuses it.
        f(sge, sge.addr.wrapping_add(skip), pos, n)?;
        pos += n;
        skip = 0;
    }
    if pos == len {
        Ok(())
    } else {
        Err(EMSGSIZE)
    }
}

/// The opcode of a send work request (`enum ibv_wr_opcode`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SendOpcode {
    /// RDMA WRITE.
    RdmaWrite,
    /// RDMA WRITE with immediate.
    RdmaWriteWithImm,
    /// SEND.
    Send,
    /// SEND with immediate.
    SendWithImm,
    /// RDMA READ.
    RdmaRead,
    /// Atomic compare and swap.
    AtomicCmpAndSwp,
    /// Atomic fetch and add.
    AtomicFetchAndAdd,
    /// Local invalidate.
    LocalInv,
    /// SEND with invalidate.
    SendWithInv,
}

impl SendOpcode {
    pub(super) fn from_raw(v: u32) -> Option<Self> {
        Some(match v {
            bindings::ib_wr_opcode_IB_WR_RDMA_WRITE => Self::RdmaWrite,
            bindings::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM => Self::RdmaWriteWithImm,
            bindings::ib_wr_opcode_IB_WR_SEND => Self::Send,
            bindings::ib_wr_opcode_IB_WR_SEND_WITH_IMM => Self::SendWithImm,
            bindings::ib_wr_opcode_IB_WR_RDMA_READ => Self::RdmaRead,
            bindings::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP => Self::AtomicCmpAndSwp,
            bindings::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD => Self::AtomicFetchAndAdd,
            bindings::ib_wr_opcode_IB_WR_LOCAL_INV => Self::LocalInv,
            bindings::ib_wr_opcode_IB_WR_SEND_WITH_INV => Self::SendWithInv,
            _ => return None,
        })
    }

    /// The opcode of this request's completion.
    pub fn wc_opcode(self) -> WcOpcode {
        match self {
            Self::RdmaWrite | Self::RdmaWriteWithImm => WcOpcode::RdmaWrite,
            Self::Send | Self::SendWithImm | Self::SendWithInv => WcOpcode::Send,
            Self::RdmaRead => WcOpcode::RdmaRead,
            Self::AtomicCmpAndSwp => WcOpcode::CompSwap,
            Self::AtomicFetchAndAdd => WcOpcode::FetchAdd,
            Self::LocalInv => WcOpcode::LocalInv,
        }
    }
}

/// `send_flags`: a completion is generated (unless the QP signals all).
pub const SEND_SIGNALED: u32 = 2;
/// `send_flags`: solicited event at the responder.
pub const SEND_SOLICITED: u32 = 4;
/// `send_flags`: the payload is inline in the WQE.
pub const SEND_INLINE: u32 = 8;
/// `send_flags`: wait for earlier READ/atomics.
pub const SEND_FENCE: u32 = 1;

/// The data of a send work request (the core's `Payload` is a packet's).
#[derive(Clone, Copy, Debug)]
pub enum SendData {
    /// Gathered from local MRs.
    Sges(SgeList),
    /// Carried in the WQE.
    Inline {
        /// Length.
        len: usize,
        /// Bytes (`len` of them).
        data: [u8; MAX_INLINE],
    },
}

/// An address vector as the rxe provider copies it into a UD send WQE
/// (`struct rxe_av`): what the datagram needs of it.
#[derive(Clone, Copy, Debug)]
pub struct WqeAddress {
    /// Source address (`sgid_addr`).
    pub src: IpAddress,
    /// Destination address (from the destination GID).
    pub dst: IpAddress,
    /// Traffic class (DSCP and ECN bits).
    pub traffic_class: u8,
    /// Hop limit (IP TTL).
    pub hop_limit: u8,
}

impl From<&AddressVector> for WqeAddress {
    fn from(av: &AddressVector) -> Self {
        Self {
            src: av.src,
            dst: av.dst,
            traffic_class: av.traffic_class,
            hop_limit: av.hop_limit,
        }
    }
}

/// Where a UD send goes, from the WQE (`wr.ud` of `struct rxe_send_wr`).
#[derive(Clone, Copy, Debug)]
pub struct UdDest {
    /// Destination QP.
    pub remote_qpn: u32,
    /// Q_Key to present (the QP's own when the high bit is set).
    pub remote_qkey: u32,
    /// The AH (`ibv_create_ah`'s number), 0 when the provider did not set one.
    pub ah_num: u32,
    /// The address vector copied into the WQE, if it is a valid RoCE v2 one.
    pub av: Option<WqeAddress>,
}

pub(super) fn parse_wqe_av(av: &bindings::rxe_av) -> Option<WqeAddress> {
    // SAFETY: Union members of plain bytes and integers: any value is valid.
    let (dgid, fam, v4, v6) = unsafe {
        (
            av.grh.dgid.raw,
            u32::from(av.sgid_addr._sockaddr_in.sin_family),
            av.sgid_addr._sockaddr_in.sin_addr.s_addr,
            av.sgid_addr._sockaddr_in6.sin6_addr.in6_u.u6_addr8,
        )
    };
    let src = match fam {
        bindings::AF_INET => IpAddress::V4(v4.to_ne_bytes()),
        bindings::AF_INET6 => IpAddress::V6(v6),
        _ => return None,
    };
    let dst = IpAddress::from_gid(&dgid);
    if core::mem::discriminant(&src) != core::mem::discriminant(&dst) {
        return None;
    }
    Some(WqeAddress {
        src,
        dst,
        traffic_class: av.grh.traffic_class,
        hop_limit: av.grh.hop_limit,
    })
}

/// A send work request, parsed from the send ring.
#[derive(Clone, Copy, Debug)]
pub struct SendWqe {
    /// The work request's id.
    pub wr_id: u64,
    /// The operation.
    pub opcode: SendOpcode,
    /// `SEND_*` flags.
    pub send_flags: u32,
    /// Immediate data (network order) or the rkey to invalidate.
    pub ex: u32,
    /// Remote address (RDMA and atomics).
    pub remote_addr: u64,
    /// Remote key (RDMA and atomics).
    pub rkey: u32,
    /// Compare (CAS) or addend (FAA).
    pub compare_add: u64,
    /// Swap value (CAS).
    pub swap: u64,
    /// The message length in bytes.
    pub length: u64,
    /// Where the payload is (for READ: where it goes; atomics: the 8-byte result).
    pub payload: SendData,
    /// The destination of a UD QP's send.
    pub ud: Option<UdDest>,
}

impl SendWqe {
    /// A zero-length SEND without SGEs: a place to parse WQEs into
    /// ([`Qp::sq_peek_into`]).
    pub const EMPTY: Self = Self {
        wr_id: 0,
        opcode: SendOpcode::Send,
        send_flags: 0,
        ex: 0,
        remote_addr: 0,
        rkey: 0,
        compare_add: 0,
        swap: 0,
        length: 0,
        payload: SendData::Sges(SgeList::EMPTY),
        ud: None,
    };
}

/// A send WQE that cannot be executed: complete it with `IBV_WC_LOC_QP_OP_ERR`.
#[derive(Clone, Copy, Debug)]
pub struct BadWqe {
    /// The work request's id.
    pub wr_id: u64,
    /// Its raw opcode.
    pub opcode: u32,
}

/// A receive work request, parsed from the receive ring.
#[derive(Clone, Copy, Debug)]
pub struct RecvWqe {
    /// The work request's id.
    pub wr_id: u64,
    /// Where received bytes go; `None` when user space wrote too many SGEs (complete
    /// with `IBV_WC_LOC_LEN_ERR`).
    pub sges: Option<SgeList>,
}

#[kunit_tests(rdma_wqe_walk_sges)]
mod tests {
    use super::*;

    /// A piece of a walk: (the SGE's lkey, address, position, count).
    type Piece = (u32, u64, usize, usize);

    fn sge(addr: u64, length: u32, lkey: u32) -> Sge {
        Sge { addr, length, lkey }
    }

    /// The pieces `walk_sges` reports, with its result.
    fn walk(sges: &[Sge], offset: u64, len: usize) -> Result<(KVec<Piece>, Result)> {
        let mut pieces = KVec::new();
        let mut grow = Ok(());
        let r = walk_sges(sges, offset, len, |s, addr, pos, n| {
            if grow.is_ok() {
                grow = pieces.push((s.lkey, addr, pos, n), GFP_KERNEL);
            }
            Ok(())
        });
        grow?;
        Ok((pieces, r))
    }

    #[test]
    fn a_range_inside_one_sge_is_one_piece() -> Result {
        let sges = [sge(0x1000, 100, 1)];
        let (p, r) = walk(&sges, 10, 20)?;
        assert!(r.is_ok());
        assert_eq!(&p[..], &[(1, 0x100a, 0, 20)]);
        Ok(())
    }

    #[test]
    fn a_range_across_sges_is_split_at_their_ends() -> Result {
        let sges = [sge(0x1000, 8, 1), sge(0x2000, 8, 2), sge(0x3000, 8, 3)];
        // Bytes 6..20: the last 2 of the first SGE, all of the second, 4 of the third.
        let (p, r) = walk(&sges, 6, 14)?;
        assert!(r.is_ok());
        assert_eq!(
            &p[..],
            &[(1, 0x1006, 0, 2), (2, 0x2000, 2, 8), (3, 0x3000, 10, 4)]
        );
        Ok(())
    }

    #[test]
    fn an_offset_skips_whole_and_empty_sges() -> Result {
        let sges = [sge(0x1000, 8, 1), sge(0x9000, 0, 9), sge(0x2000, 8, 2)];
        let (p, r) = walk(&sges, 8, 8)?;
        assert!(r.is_ok());
        assert_eq!(&p[..], &[(2, 0x2000, 0, 8)]);
        Ok(())
    }

    #[test]
    fn a_list_shorter_than_the_range_is_emsgsize_after_what_fits() -> Result {
        let sges = [sge(0x1000, 8, 1), sge(0x2000, 4, 2)];
        let (p, r) = walk(&sges, 2, 20)?;
        assert!(r == Err(EMSGSIZE));
        assert_eq!(&p[..], &[(1, 0x1002, 0, 6), (2, 0x2000, 6, 4)]);
        // An offset past the end reaches nothing.
        let (p, r) = walk(&sges, 12, 1)?;
        assert!(r == Err(EMSGSIZE));
        assert!(p.is_empty());
        Ok(())
    }

    #[test]
    fn an_empty_range_touches_nothing() -> Result {
        let (p, r) = walk(&[sge(0x1000, 8, 1)], 100, 0)?;
        assert!(r.is_ok());
        assert!(p.is_empty());
        let (p, r) = walk(&[], 0, 0)?;
        assert!(r.is_ok());
        assert!(p.is_empty());
        Ok(())
    }

    #[test]
    fn the_callbacks_error_stops_the_walk() {
        let sges = [sge(0x1000, 4, 1), sge(0x2000, 4, 2)];
        let mut calls = 0;
        let r = walk_sges(&sges, 0, 8, |_, _, _, _| {
            calls += 1;
            Err(EFAULT)
        });
        assert!(r == Err(EFAULT));
        assert_eq!(calls, 1);
    }

    #[test]
    fn an_address_at_the_top_of_the_address_space_wraps_for_the_mr_lookup_to_refuse() -> Result {
        let (p, r) = walk(&[sge(u64::MAX - 1, 8, 1)], 4, 2)?;
        assert!(r.is_ok());
        assert_eq!(&p[..], &[(1, 2, 0, 2)]);
        Ok(())
    }
}
