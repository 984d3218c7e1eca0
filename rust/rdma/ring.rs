// SPDX-License-Identifier: GPL-2.0

//! The work queue rings shared with the rxe provider (a QP's send and receive rings,
//! an SRQ's): their WQE layout (`struct rxe_send_wqe`, `struct rxe_recv_wqe`, `struct
//! rxe_sge`) and the parsing of receive WQEs and scatter lists.
//!
//! C header: [`include/uapi/rdma/rdma_user_rxe.h`](srctree/include/uapi/rdma/rdma_user_rxe.h).

use crate::{
    bindings,
    queue::Queue,
    wqe::{RecvWqe, Sge, SgeList, MAX_SGE},
};
use core::mem::offset_of;
use kernel::prelude::*;

/// A work queue: the ring and the limits user space agreed to.
pub(crate) struct WorkQueue {
    pub(crate) queue: Queue,
    pub(crate) max_sge: usize,
    pub(crate) max_inline: usize,
}

/// Parses the receive WQE `ahead` places after the head of a receive ring (a QP's or
/// an SRQ's) without consuming it; `None` when fewer are waiting.
pub(crate) fn parse_recv(wq: &WorkQueue, ahead: u32) -> Option<RecvWqe> {
    let mut list = SgeList::EMPTY;
    let (wr_id, fits) = parse_recv_into(wq, ahead, &mut list)?;
    Some(RecvWqe {
        wr_id,
        sges: fits.then_some(list),
    })
}

/// Parses the receive WQE `ahead` places after the head, its scatter list into
/// `sges`; returns its id and whether the list was valid (`false`: too many SGEs).
pub(crate) fn parse_recv_into(
    wq: &WorkQueue,
    ahead: u32,
    sges: &mut SgeList,
) -> Option<(u64, bool)> {
    // SAFETY: `rxe_recv_wqe` is integers only, valid for any bytes.
    let w = unsafe { wq.queue.read_as_at::<bindings::rxe_recv_wqe>(ahead, 0) }.ok()??;
    let n = w.dma.num_sge as usize;
    let room = wq.queue.slot_size() - RECV_WQE_HDR;
    let fits = n <= wq.max_sge
        && n <= MAX_SGE
        && n * SGE_SIZE <= room
        && read_sges_into(&wq.queue, ahead, RECV_WQE_HDR, n, sges).is_ok();
    if !fits {
        sges.len = 0;
    }
    Some((w.wr_id, fits))
}

pub(crate) const SEND_WQE_HDR: usize = size_of::<bindings::rxe_send_wqe>();
pub(crate) const RECV_WQE_HDR: usize = size_of::<bindings::rxe_recv_wqe>();
pub(crate) const SGE_SIZE: usize = size_of::<bindings::rxe_sge>();
const _: () = assert!(SGE_SIZE == 16);
const _: () = assert!(
    offset_of!(bindings::rxe_send_wqe, dma) + size_of::<bindings::rxe_dma_info>() == SEND_WQE_HDR
);
const _: () = assert!(
    offset_of!(bindings::rxe_recv_wqe, dma) + size_of::<bindings::rxe_dma_info>() == RECV_WQE_HDR
);

/// Reads `n` SGEs into `list`, overwriting only the entries it then holds.
pub(crate) fn read_sges_into(
    q: &Queue,
    ahead: u32,
    offset: usize,
    n: usize,
    list: &mut SgeList,
) -> Result {
    list.len = 0;
    for (i, sge) in list.sges.get_mut(..n).ok_or(EINVAL)?.iter_mut().enumerate() {
        // SAFETY: `rxe_sge` is integers, valid for any bytes.
        let raw = unsafe { q.read_as_at::<bindings::rxe_sge>(ahead, offset + i * SGE_SIZE) }?
            .ok_or(EINVAL)?;
        *sge = Sge {
            addr: raw.addr,
            length: raw.length,
            lkey: raw.lkey,
        };
    }
    list.len = n;
    Ok(())
}
