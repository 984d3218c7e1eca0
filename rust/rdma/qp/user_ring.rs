// SPDX-License-Identifier: GPL-2.0

//! The send and receive rings a user QP shares with the rxe provider: reading their
//! WQEs ([`crate::ring`] has the layout).

use super::{Qp, QpType};
use crate::{
    bindings,
    ring::{parse_recv, parse_recv_into, read_sges_into, SEND_WQE_HDR, SGE_SIZE},
    wqe::{
        parse_wqe_av, BadWqe, RecvWqe, SendData, SendOpcode, SendWqe, SgeList, UdDest, MAX_INLINE,
        MAX_SGE, SEND_INLINE,
    },
};
use kernel::prelude::*;

impl<D> Qp<D> {
    /// Parses the send WQE at the head of the send ring without consuming it.
    ///
    /// `None` when the ring is empty (or gone); `Some(Err(_))` for a WQE that cannot be
    /// executed (unknown opcode, too many SGEs, inline data too long).
    pub fn sq_peek(&self) -> Option<Result<SendWqe, BadWqe>> {
        self.sq_peek_at(0)
    }

    /// Like [`sq_peek`](Self::sq_peek), for the WQE `ahead` places after the head: the
    /// transport keeps WQEs in the ring until they complete, as rdma_rxe does.
    pub fn sq_peek_at(&self, ahead: u32) -> Option<Result<SendWqe, BadWqe>> {
        let mut w = SendWqe::EMPTY;
        Some(self.sq_peek_into(ahead, &mut w)?.map(|()| w))
    }

    /// Like [`sq_peek_at`](Self::sq_peek_at), parsed into `out`, which keeps its
    /// contents when this returns `None`. A transport that parses every WQE into the
    /// same place spares the copies of a returned `SendWqe` (about 600 bytes).
    pub fn sq_peek_into(&self, ahead: u32, out: &mut SendWqe) -> Option<Result<(), BadWqe>> {
        let sq = self.sq.lock();
        let wq = sq.as_ref()?;
        // SAFETY: `rxe_send_wqe` is integers, unions of integers and a raw pointer, valid
        // for any bytes.
        let w = unsafe { wq.queue.read_as_at::<bindings::rxe_send_wqe>(ahead, 0) }.ok()??;
        let wr_id = w.wr.wr_id;
        let bad = BadWqe {
            wr_id,
            opcode: w.wr.opcode,
        };
        let Some(opcode) = SendOpcode::from_raw(w.wr.opcode) else {
            return Some(Err(bad));
        };
        let room = wq.queue.slot_size() - SEND_WQE_HDR;
        let flags = w.wr.send_flags;
        let num_sge = w.dma.num_sge as usize;
        // SAFETY: Union members of integers: any bytes are valid.
        let (ex, rdma, atomic) = unsafe { (w.wr.ex.imm_data, w.wr.wr.rdma, w.wr.wr.atomic) };
        let (remote_addr, rkey) = match opcode {
            SendOpcode::AtomicCmpAndSwp | SendOpcode::AtomicFetchAndAdd => {
                (atomic.remote_addr, atomic.rkey)
            }
            _ => (rdma.remote_addr, rdma.rkey),
        };
        // `ibv_wr_set_inline_data` of the extended QP API copies the data into the WQE
        // and sets its length, but not `IBV_SEND_INLINE` (the flags are the user's
        // `wr_flags`), and leaves no SGE: a WQE that can carry data, with a length and
        // no SGE, is inline. `ibv_post_send` always sets the flag for inline data, and
        // otherwise its length is the SGEs' sum (0 without SGEs).
        let data_op = matches!(
            opcode,
            SendOpcode::Send
                | SendOpcode::SendWithImm
                | SendOpcode::RdmaWrite
                | SendOpcode::RdmaWriteWithImm
        );
        let inline = flags & SEND_INLINE != 0 || (data_op && num_sge == 0 && w.dma.length != 0);
        let length = if inline {
            let len = w.dma.length as usize;
            if len > wq.max_inline || len > room || len > MAX_INLINE {
                return Some(Err(bad));
            }
            if !matches!(out.payload, SendData::Inline { .. }) {
                out.payload = SendData::Inline {
                    len: 0,
                    data: [0; MAX_INLINE],
                };
            }
            let SendData::Inline { len: l, data } = &mut out.payload else {
                return Some(Err(bad));
            };
            if wq
                .queue
                .read_at(ahead, SEND_WQE_HDR, &mut data[..len])
                .is_err()
            {
                return Some(Err(bad));
            }
            *l = len;
            len as u64
        } else {
            if num_sge > wq.max_sge || num_sge > MAX_SGE || num_sge * SGE_SIZE > room {
                return Some(Err(bad));
            }
            if !matches!(out.payload, SendData::Sges(_)) {
                out.payload = SendData::Sges(SgeList::EMPTY);
            }
            let SendData::Sges(list) = &mut out.payload else {
                return Some(Err(bad));
            };
            if read_sges_into(&wq.queue, ahead, SEND_WQE_HDR, num_sge, list).is_err() {
                return Some(Err(bad));
            }
            list.total_len()
        };
        out.ud = (self.qp_type == QpType::Ud).then(|| {
            // SAFETY: Union member of integers and plain structs: any bytes are valid.
            let ud = unsafe { w.wr.wr.ud };
            UdDest {
                remote_qpn: ud.remote_qpn,
                remote_qkey: ud.remote_qkey,
                ah_num: ud.ah_num,
                av: parse_wqe_av(&ud.av),
            }
        });
        out.wr_id = wr_id;
        out.opcode = opcode;
        out.send_flags = flags;
        out.ex = ex;
        out.remote_addr = remote_addr;
        out.rkey = rkey;
        out.compare_add = atomic.compare_add;
        out.swap = atomic.swap;
        out.length = length;
        Some(Ok(()))
    }

    /// The number of WQEs in the send ring (posted by user space, not yet consumed).
    pub fn sq_count(&self) -> u32 {
        self.sq.lock().as_ref().map_or(0, |wq| wq.queue.count())
    }

    /// The number of WQEs in the receive ring.
    pub fn rq_count(&self) -> u32 {
        self.rq.lock().as_ref().map_or(0, |wq| wq.queue.count())
    }

    /// Consumes the send WQE at the head of the send ring.
    pub fn sq_advance(&self) {
        if let Some(wq) = Option::as_mut(&mut *self.sq.lock()) {
            wq.queue.advance_consumer();
        }
    }

    /// Parses the receive WQE at the head of the receive ring without consuming it;
    /// `None` when the ring is empty (or the QP uses an SRQ or is destroyed).
    pub fn rq_peek(&self) -> Option<RecvWqe> {
        self.rq_peek_at(0)
    }

    /// Like [`rq_peek`](Self::rq_peek), for the WQE `ahead` places after the head.
    pub fn rq_peek_at(&self, ahead: u32) -> Option<RecvWqe> {
        parse_recv(self.rq.lock().as_ref()?, ahead)
    }

    /// Like [`rq_peek_at`](Self::rq_peek_at), the scatter list parsed into `sges`:
    /// returns the WQE's id and whether its scatter list was valid (`false`: too many
    /// SGEs, and `sges` is empty).
    pub fn rq_peek_into(&self, ahead: u32, sges: &mut SgeList) -> Option<(u64, bool)> {
        parse_recv_into(self.rq.lock().as_ref()?, ahead, sges)
    }

    /// Consumes the receive WQE at the head of the receive ring.
    pub fn rq_advance(&self) {
        if let Some(wq) = Option::as_mut(&mut *self.rq.lock()) {
            wq.queue.advance_consumer();
        }
    }
}
