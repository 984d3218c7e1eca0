// SPDX-License-Identifier: GPL-2.0

//! A QP bound to a connection: the bridge between its rings and the core's streams.
//!
//! WQEs stay in the user's rings until they complete, as in rdma_rxe: the ring slot is
//! released (consumer index advanced) when the completion is written, so user space
//! cannot reuse a slot the transport still reads. The core knows work requests by a
//! per-QP sequence number (the `wr_id` it sees); the `k`-th WQE after the ring head has
//! sequence `done + k`. Completions come back in post order per direction, so the head
//! is always the one completing.
//!
//! Receives are handed to the core when a message needs one ([`Bound::take_recv`],
//! through [`metaroce_proto::Memory::take_shared_recv`]), so a connection carrying many
//! QPs never scans their receive rings. A QP with a shared receive queue has no
//! receive ring: the WQE is copied out of the SRQ and kept here, by sequence, until it
//! completes. Sends are handed over when the QP's doorbell rang ([`Bound::send_pending`]).

use crate::convert::{core_opcode, wc_opcode, wc_status};
use crate::driver::MetaRoceDriver;
use crate::sge::check_sges;
use crate::transport::Conn;
use core::fmt;
use kernel::{alloc::KVVec, prelude::*, sync::Arc};
use metaroce_proto::{
    constants::{MAX_MSG_LEN, MAX_RECV_WR, MAX_SEND_WR},
    Completion, Opcode, PostError, QpId, WorkRequest,
};
use rdma::{
    cq::{WcOpcode, WcStatus, WorkCompletion, WC_WITH_IMM},
    device::{Device, DriverQp},
    mr::Access,
    qp::{
        QpEvent, QpState, RecvWqe, SendData, SendWqe, Sge, SgeList, SEND_SIGNALED, SEND_SOLICITED,
    },
};

/// What a posted send WQE's completion and payload need, kept from post time.
#[derive(Clone, Copy, Default)]
struct SendSlot {
    wr_id: u64,
    signaled: bool,
    /// The WQE's scatter list when it is one SGE, as most are: its packets are built
    /// (or its READ response placed) without parsing the WQE again.
    sge: Option<Sge>,
}

/// The local buffer of a send WQE: where its payload comes from, or where the
/// response of a READ or atomic goes.
pub(crate) enum LocalBuffer<'a> {
    /// Registered memory (each SGE is looked up by its lkey when used).
    Sges(&'a [Sge]),
    /// Data carried in the WQE.
    Inline(&'a [u8]),
}

/// The transport state of one QP bound to a connection. Only the connection's
/// serialized context (its work item, or a verb holding its lock) touches it.
pub(crate) struct Bound {
    qp: Arc<DriverQp<MetaRoceDriver>>,
    /// The QP's stream in the connection.
    id: QpId,
    /// Rights granted to the peer (`qp_access_flags`).
    access: Access,
    /// Sequence of the next send WQE to hand to the core.
    sq_seq: u64,
    /// Sequence of the send WQE at the ring head.
    sq_done: u64,
    rq_seq: u64,
    rq_done: u64,
    send_slots: KVec<SendSlot>,
    recv_ids: KVec<u64>,
    /// Receives taken from the SRQ, by sequence (empty without an SRQ).
    shared: KVVec<Option<RecvWqe>>,
    /// The last send WQE parsed (for the core, for transmission or placement), with
    /// its sequence; every send WQE is parsed in this one place.
    send_cache: KBox<(Option<u64>, SendWqe)>,
    /// The last receive WQE's scatter list parsed for placement (by sequence).
    recv_cache: KBox<(Option<u64>, SgeList)>,
    /// The QP entered the error state: once the core has flushed what it holds, the
    /// rest of the rings is flushed here.
    failed: bool,
    /// The send ring may hold WQEs not handed to the core yet (the doorbell rang, or
    /// the core had no room for all of them).
    send_pending: bool,
    /// The QP entered SQD: once the send WQEs the core holds complete, the QP says
    /// so ([`Qp::sq_drained`]).
    draining: bool,
    /// The QP is in RTR and no request of the peer has reached it yet: the first one
    /// raises `IB_EVENT_COMM_EST` ([`Bound::request_arrived`]).
    comm_est_pending: bool,
}

/// Why a send WQE cannot be handed to the core.
enum Refused {
    /// The core's queue is full or the QP is not sending: try again later.
    Later,
    /// The WQE is bad: complete it with this status and fail the QP.
    Fail(WcStatus),
}

impl Bound {
    pub(crate) fn new(qp: Arc<DriverQp<MetaRoceDriver>>, id: QpId, access: Access) -> Result<Self> {
        let mut send_slots = KVec::with_capacity(MAX_SEND_WR, GFP_KERNEL_ACCOUNT)?;
        send_slots.resize(MAX_SEND_WR, SendSlot::default(), GFP_KERNEL_ACCOUNT)?;
        let mut recv_ids = KVec::with_capacity(MAX_RECV_WR, GFP_KERNEL_ACCOUNT)?;
        recv_ids.resize(MAX_RECV_WR, 0, GFP_KERNEL_ACCOUNT)?;
        let mut shared = KVVec::new();
        if qp.srq().is_some() {
            shared.resize(MAX_RECV_WR, None, GFP_KERNEL_ACCOUNT)?;
        }
        Ok(Self {
            qp,
            id,
            access,
            sq_seq: 0,
            sq_done: 0,
            rq_seq: 0,
            rq_done: 0,
            send_slots,
            recv_ids,
            shared,
            send_cache: KBox::new((None, SendWqe::EMPTY), GFP_KERNEL_ACCOUNT)?,
            recv_cache: KBox::new((None, SgeList::EMPTY), GFP_KERNEL_ACCOUNT)?,
            failed: false,
            send_pending: false,
            draining: false,
            // Bound at INIT -> RTR.
            comm_est_pending: true,
        })
    }

    /// The verbs QP.
    pub(crate) fn qp(&self) -> &Arc<DriverQp<MetaRoceDriver>> {
        &self.qp
    }

    /// The rights the QP grants its peer (`qp_access_flags`).
    pub(crate) fn access(&self) -> Access {
        self.access
    }

    /// The core gave the QP stream `id` ([`ConnCtx::bind`](crate::conn::ConnCtx::bind)).
    pub(crate) fn set_id(&mut self, id: QpId) {
        self.id = id;
    }

    /// The doorbell rang, or the core may have room again: look at the send ring.
    pub(crate) fn mark_send_pending(&mut self) {
        self.send_pending = true;
    }

    /// The QP reached RTS (again) with `access`: it sends, drains nothing, and no
    /// longer waits for the peer's first request to raise `IB_EVENT_COMM_EST`.
    pub(crate) fn ready_to_send(&mut self, access: Access) {
        self.access = access;
        self.send_pending = true;
        self.draining = false;
        self.comm_est_pending = false;
    }

    /// The QP entered SQD.
    pub(crate) fn start_draining(&mut self) {
        self.draining = true;
    }

    /// The core failed the QP: once it has flushed what it holds, flush the rest.
    pub(crate) fn core_failed(&mut self) {
        self.qp.set_error();
        self.failed = true;
    }

    /// Send WQEs handed to the core and not completed yet.
    pub(crate) fn outstanding(&self) -> u64 {
        self.sq_seq - self.sq_done
    }

    /// Send and receive work requests taken from the rings and completed, in that
    /// order (`rdma -dd resource show qp`).
    pub(crate) fn ring_counts(&self) -> [u64; 4] {
        [self.sq_seq, self.sq_done, self.rq_seq, self.rq_done]
    }

    /// One line of state for the device's `conns` debugfs file.
    pub(crate) fn write_state(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "  qp {} stream {}: {:?}, send ring {} (core holds {}, seq {}), recv ring {} (seq {}/{}), \
             send_pending={} failed={} draining={}",
            self.qp.qpn(),
            self.id.index(),
            self.qp.state(),
            self.qp.sq_count(),
            self.outstanding(),
            self.sq_seq,
            self.qp.rq_count(),
            self.rq_done,
            self.rq_seq,
            self.send_pending,
            self.failed,
            self.draining,
        )
    }

    /// The local buffer of the send WQE of sequence `seq`, which the core holds.
    pub(crate) fn send_buffer(&mut self, seq: u64) -> Result<LocalBuffer<'_>> {
        if seq < self.sq_done || seq >= self.sq_seq {
            return Err(EINVAL);
        }
        let i = (seq % MAX_SEND_WR as u64) as usize;
        if self.send_slots.get(i).is_some_and(|s| s.sge.is_some()) {
            let sge = self
                .send_slots
                .get(i)
                .and_then(|s| s.sge.as_ref())
                .ok_or(EINVAL)?;
            return Ok(LocalBuffer::Sges(core::slice::from_ref(sge)));
        }
        Ok(match &self.send_wqe(seq)?.payload {
            SendData::Sges(list) => LocalBuffer::Sges(list.as_slice()),
            SendData::Inline { len, data } => LocalBuffer::Inline(data.get(..*len).ok_or(EINVAL)?),
        })
    }

    /// The send WQE of sequence `seq`, which the core holds, parsed from the ring
    /// unless it was the last one parsed.
    fn send_wqe(&mut self, seq: u64) -> Result<&SendWqe> {
        let cache = &mut *self.send_cache;
        if cache.0 != Some(seq) {
            let ahead = u32::try_from(seq - self.sq_done).map_err(|_| EINVAL)?;
            cache.0 = None;
            match self.qp.sq_peek_into(ahead, &mut cache.1) {
                Some(Ok(())) => cache.0 = Some(seq),
                _ => return Err(EINVAL),
            }
        }
        Ok(&cache.1)
    }

    /// The scatter list of the receive WQE of sequence `seq`, which the core holds.
    pub(crate) fn recv_sges(&mut self, seq: u64) -> Result<&SgeList> {
        if self.qp.srq().is_some() {
            if seq < self.rq_done || seq >= self.rq_seq {
                return Err(EINVAL);
            }
            let slot = self.shared.get((seq % MAX_RECV_WR as u64) as usize);
            return slot
                .and_then(Option::as_ref)
                .and_then(|w| w.sges.as_ref())
                .ok_or(EINVAL);
        }
        let cache = &mut *self.recv_cache;
        if cache.0 != Some(seq) {
            if seq < self.rq_done || seq >= self.rq_seq {
                return Err(EINVAL);
            }
            let ahead = u32::try_from(seq - self.rq_done).map_err(|_| EINVAL)?;
            cache.0 = None;
            match self.qp.rq_peek_into(ahead, &mut cache.1) {
                Some((_, true)) => cache.0 = Some(seq),
                _ => return Err(EINVAL),
            }
        }
        Ok(&cache.1)
    }

    /// Takes the QP's next receive for the core (see [`metaroce_proto::Memory`]): from
    /// its SRQ, or the next WQE of its receive ring not handed over yet (it stays in
    /// the ring until it completes). Returns `(sequence, length)`; `None` when there is
    /// none or the core's receive window is full.
    pub(crate) fn take_recv(&mut self) -> Option<(u64, u32)> {
        if self.failed || self.rq_seq - self.rq_done >= MAX_RECV_WR as u64 {
            return None;
        }
        let seq = self.rq_seq;
        let i = (seq % MAX_RECV_WR as u64) as usize;
        // Too many SGEs: a zero-length buffer, which any SEND overflows
        // (IBV_WC_LOC_LEN_ERR).
        let len = |l: &SgeList| l.total_len().min(u64::from(MAX_MSG_LEN)) as u32;
        let len = match self.qp.srq() {
            Some(srq) => {
                let w = srq.take()?;
                *self.shared.get_mut(i)? = Some(w);
                w.sges.as_ref().map_or(0, len)
            }
            None => {
                // Parsed into the cache: the message's data is placed next.
                let cache = &mut *self.recv_cache;
                cache.0 = None;
                let (wr_id, fits) = self
                    .qp
                    .rq_peek_into((seq - self.rq_done) as u32, &mut cache.1)?;
                *self.recv_ids.get_mut(i)? = wr_id;
                if fits {
                    cache.0 = Some(seq);
                }
                len(&cache.1)
            }
        };
        self.rq_seq += 1;
        Some((seq, len))
    }

    /// Hands send WQEs the user posted since the last call to the core. A WQE that
    /// cannot execute completes with its error once everything before it completed,
    /// and fails the QP.
    pub(crate) fn sync_send(&mut self, dev: &Device<MetaRoceDriver>, conn: &mut Conn) {
        if !self.send_pending || self.failed || self.qp.state() != QpState::Rts {
            return;
        }
        let count = u64::from(self.qp.sq_count());
        while self.sq_seq - self.sq_done < count {
            let ahead = (self.sq_seq - self.sq_done) as u32;
            // Parsed into the cache: the core asks for its payload next.
            self.send_cache.0 = None;
            let Some(peeked) = self.qp.sq_peek_into(ahead, &mut self.send_cache.1) else {
                break;
            };
            let w = &self.send_cache.1;
            let refused = match peeked {
                Ok(()) => match self.post(dev, conn, w) {
                    Ok(signaled) => {
                        let i = (self.sq_seq % MAX_SEND_WR as u64) as usize;
                        let sge = match &w.payload {
                            SendData::Sges(list) if list.as_slice().len() == 1 => {
                                list.as_slice().first().copied()
                            }
                            _ => None,
                        };
                        let wr_id = w.wr_id;
                        if let Some(slot) = self.send_slots.get_mut(i) {
                            *slot = SendSlot {
                                wr_id,
                                signaled,
                                sge,
                            };
                        }
                        self.send_cache.0 = Some(self.sq_seq);
                        self.sq_seq += 1;
                        continue;
                    }
                    Err(r) => r,
                },
                Err(_) => Refused::Fail(WcStatus::LocQpOpErr),
            };
            let Refused::Fail(status) = refused else {
                break;
            };
            // In order: only once the core holds nothing older.
            if self.sq_seq != self.sq_done {
                break;
            }
            let (wr_id, opcode) = match &peeked {
                Ok(()) => (
                    self.send_cache.1.wr_id,
                    self.send_cache.1.opcode.wc_opcode(),
                ),
                Err(b) => (b.wr_id, WcOpcode::Send),
            };
            let wc = WorkCompletion {
                status,
                ..WorkCompletion::flushed(wr_id, opcode, self.qp.qpn())
            };
            self.qp.sq_advance();
            self.sq_seq += 1;
            self.sq_done += 1;
            let _ = self.qp.push_send(&wc);
            self.fail(conn);
            break;
        }
        // WQEs left behind (the core was full, or an error waits for older ones to
        // complete) are tried again at the next run.
        self.send_pending = self.sq_seq - self.sq_done < count;
    }

    /// Hands `w` to the core; returns whether its completion is signaled.
    fn post(
        &self,
        dev: &Device<MetaRoceDriver>,
        conn: &mut Conn,
        w: &SendWqe,
    ) -> Result<bool, Refused> {
        let opcode = core_opcode(w.opcode).ok_or(Refused::Fail(WcStatus::LocQpOpErr))?;
        if w.length > u64::from(MAX_MSG_LEN) {
            return Err(Refused::Fail(WcStatus::LocLenErr));
        }
        let local = match opcode {
            Opcode::Read | Opcode::CompareSwap | Opcode::FetchAdd => Access::LOCAL_WRITE,
            _ => Access::LOCAL_READ,
        };
        if let SendData::Sges(list) = &w.payload {
            if check_sges(dev, self.qp.pd(), list.as_slice(), local).is_err() {
                return Err(Refused::Fail(WcStatus::LocProtErr));
            }
        } else if local == Access::LOCAL_WRITE {
            return Err(Refused::Fail(WcStatus::LocQpOpErr));
        }
        if opcode.is_atomic() && w.length < 8 {
            return Err(Refused::Fail(WcStatus::LocLenErr));
        }
        let signaled = self.qp.sq_sig_all() || w.send_flags & SEND_SIGNALED != 0;
        let wr = WorkRequest {
            wr_id: self.sq_seq,
            opcode,
            len: w.length as u32,
            remote_addr: w.remote_addr,
            rkey: w.rkey,
            imm: u32::from_be(w.ex),
            compare_add: w.compare_add,
            swap: w.swap,
            solicited: w.send_flags & SEND_SOLICITED != 0,
            // The application waits for a signaled completion: no ACK delay for it.
            ack_req: signaled,
        };
        match conn.post_send(self.id, wr) {
            Ok(()) => Ok(signaled),
            Err(PostError::Invalid) => Err(Refused::Fail(WcStatus::LocQpOpErr)),
            Err(_) => Err(Refused::Later),
        }
    }

    /// Writes the completion the core reported for this QP and releases its ring slot.
    pub(crate) fn complete(&mut self, c: &Completion) {
        let status = wc_status(c.status);
        let opcode = wc_opcode(c.opcode);
        let qpn = self.qp.qpn();
        match opcode {
            WcOpcode::Recv | WcOpcode::RecvRdmaWithImm => {
                if c.wr_id != self.rq_done {
                    pr_warn!("metaroce: receive completion out of order on QP {}\n", qpn);
                    return;
                }
                let i = (c.wr_id % MAX_RECV_WR as u64) as usize;
                let wr_id = match self.shared.get_mut(i) {
                    Some(slot) => slot.take().map_or(0, |w| w.wr_id),
                    None => self.recv_ids.get(i).copied().unwrap_or(0),
                };
                let wc = WorkCompletion {
                    wr_id,
                    status,
                    opcode,
                    byte_len: c.byte_len,
                    ex: c.imm.map_or(0, u32::to_be),
                    qp_num: qpn,
                    src_qp: 0,
                    wc_flags: if c.imm.is_some() { WC_WITH_IMM } else { 0 },
                    pkey_index: 0,
                    port_num: 1,
                    network_hdr_type: 0,
                };
                // The slot is released before the completion is visible, as rdma_rxe
                // does: an application that reposts on seeing it finds room.
                self.qp.rq_advance();
                self.rq_done += 1;
                let _ = self.qp.push_recv(&wc, c.solicited);
            }
            _ => {
                if c.wr_id != self.sq_done {
                    pr_warn!("metaroce: send completion out of order on QP {}\n", qpn);
                    return;
                }
                let i = (c.wr_id % MAX_SEND_WR as u64) as usize;
                let slot = self.send_slots.get(i).copied().unwrap_or_default();
                self.qp.data().counters.count_send_status(status);
                // Release the ring slot first (see the receive case above).
                self.qp.sq_advance();
                self.sq_done += 1;
                if slot.signaled || status != WcStatus::Success {
                    let wc = WorkCompletion {
                        wr_id: slot.wr_id,
                        status,
                        opcode,
                        byte_len: c.byte_len,
                        ex: 0,
                        qp_num: qpn,
                        src_qp: 0,
                        wc_flags: 0,
                        pkey_index: 0,
                        port_num: 1,
                        network_hdr_type: 0,
                    };
                    let _ = self.qp.push_send(&wc);
                }
            }
        }
    }

    /// Moves the QP to the error state: the core flushes what it holds, in order.
    pub(crate) fn fail(&mut self, conn: &mut Conn) {
        self.qp.set_error();
        self.comm_est_pending = false;
        let _ = conn.qp_to_error(self.id);
        if !self.failed && self.qp.srq().is_some() {
            // No further receive is taken from the SRQ for this QP.
            self.qp.raise_event(QpEvent::LastWqeReached);
        }
        self.failed = true;
    }

    /// The peer's first request reached this QP (the core's
    /// [`Event::FirstRequest`](metaroce_proto::Event::FirstRequest)): in RTR it raises
    /// `IB_EVENT_COMM_EST`, the connection manager's cue when its RTU is late.
    pub(crate) fn request_arrived(&mut self) {
        if self.comm_est_pending {
            self.comm_est_pending = false;
            self.qp.raise_event(QpEvent::CommEst);
        }
    }

    /// In SQD: the send queue has drained once every WQE handed to the core completed.
    pub(crate) fn check_drained(&mut self) {
        if self.draining && self.sq_seq == self.sq_done {
            self.draining = false;
            self.qp.sq_drained();
        }
    }

    /// After an error: once the core has completed everything it held, flushes what is
    /// left in the rings (WQEs it never saw, and any posted since).
    pub(crate) fn flush_rest(&mut self) {
        if !self.failed {
            return;
        }
        if self.sq_seq == self.sq_done {
            let n = self.qp.flush_send_queue() as u64;
            self.sq_seq += n;
            self.sq_done += n;
        }
        if self.rq_seq == self.rq_done {
            let n = self.qp.flush_recv_queue() as u64;
            self.rq_seq += n;
            self.rq_done += n;
        }
    }
}
