// SPDX-License-Identifier: GPL-2.0

//! Where and when a connection runs: its work item's CPU, the send doorbell that runs
//! it in the caller's context or leaves it to the work item, and the receive path
//! that queues datagrams for the next run or runs it at once for a datagram its
//! sender waits on.

use super::{ConnCtx, INBOX_LEN, INBOX_MIN};
use crate::driver::MetaRoceDriver;
use kernel::{
    alloc::flags::__GFP_NOWARN,
    cpu::CpuId,
    prelude::*,
    sync::{atomic::Relaxed, Arc},
    workqueue,
};
use metaroce_proto::QpId;
use rdma::{device::Device, udp::OwnedDatagram};

/// [`ConnCtx::app_cpu`] while the connection does not stream.
pub(super) const NO_CPU: u32 = u32::MAX;

/// Datagrams received and sent in one run from which a connection carries a stream.
pub(super) const STREAM_BATCH: usize = 4;

/// Outstanding send work requests from which a QP's doorbell leaves the transmission
/// to the work item on another CPU ([`ConnCtx::doorbell`]).
const STREAMING_DEPTH: u64 = 4;

impl ConnCtx {
    /// Queues the work item (no-op if it is already queued) on the high-priority
    /// bottom-half workqueue: it runs in softirq context, like a tasklet, without
    /// waiting for a worker thread to be scheduled.
    ///
    /// It runs on the CPU that queues it, except in a stream. While a QP streams, it
    /// runs on the CPU after the application's, so that receive, timers and
    /// transmission leave the application its CPU (veth, for one, receives on the
    /// sending CPU). While the connection carries a stream otherwise (the receiver of
    /// a WRITE or SEND, the responder of a READ), it runs on the CPU after the one
    /// that queues it (that received) if that CPU runs a user task (a SEND receiver
    /// polling for its receives): it would take that task's time. On a CPU that runs
    /// no user task it stays, sparing a cross-CPU kick per run.
    pub(crate) fn kick(self: &Arc<Self>) {
        let queue = workqueue::system_bh_highpri();
        let busy = || self.in_stream.load(Relaxed) && rdma::work::cpu_runs_user_task();
        let home =
            CpuId::from_u32(self.app_cpu.load(Relaxed)).or_else(|| busy().then(CpuId::current));
        let _ = match home {
            Some(cpu) => rdma::work::enqueue_after::<Arc<Self>, 0>(queue, cpu, self.clone()),
            None => queue.enqueue::<Arc<Self>, 0>(self.clone()),
        };
    }

    /// The send doorbell of QP `id`: the QP's new WQEs are for the core to take.
    ///
    /// A QP with few requests outstanding runs the connection now, in the caller's
    /// context: a request-response exchange pays no queueing. A QP that keeps
    /// [`STREAMING_DEPTH`] or more outstanding is streaming: the doorbell queues the
    /// work item on the CPU after the application's ([`Self::kick`]), so the
    /// application goes on posting while another CPU transmits, and the doorbells rung
    /// meanwhile cost one run.
    ///
    /// While the connection streams, a doorbell that finds it running (its work item
    /// on the other CPU) does not wait for that run: it flags the connection for the
    /// next one and queues the work item, and the application goes back to posting.
    pub(crate) fn doorbell(self: &Arc<Self>, dev: &Device<MetaRoceDriver>, id: QpId) {
        let mut st = match self.state.try_lock() {
            Some(st) => st,
            None if self.app_cpu.load(Relaxed) != NO_CPU => {
                self.rung.store(true, Relaxed);
                self.kick();
                return;
            }
            None => self.state.lock(),
        };
        let mut streaming = false;
        if let Some(b) = st.qps.get_mut(id.index()).and_then(Option::as_mut) {
            b.mark_send_pending();
            streaming = b.outstanding() >= STREAMING_DEPTH;
        }
        if streaming {
            drop(st);
            self.app_cpu.store(CpuId::current().as_u32(), Relaxed);
            self.kick();
            return;
        }
        self.app_cpu.store(NO_CPU, Relaxed);
        self.drive(dev, &mut st);
    }

    /// Takes a received datagram (softirq context); `awaited` if its sender waits on
    /// what it triggers ([`metaroce_proto::wire::Header::is_awaited`]).
    ///
    /// The work item runs the connection after the current receive batch: one run per
    /// batch ([`Self::kick`]). An awaited datagram of a connection that carries no
    /// stream (a request-response exchange: the ACK asked for, the response or the
    /// acknowledgement a lone work request waits on) is handled now, unless another
    /// CPU runs the connection: a round trip pays no queueing. The body of a stream
    /// waits for the batch, as do the ACKs and responses of a streaming QP.
    ///
    /// The work item is queued under the inbox's lock: once [`Self::shutdown`] has set
    /// [`Self::shut`] under it, no receive queues the work again after the flush.
    ///
    /// A full inbox doubles (an atomic allocation) up to [`INBOX_LEN`] datagrams; the
    /// datagram is dropped, and counted as `rx_inbox_full`, when it holds that many or
    /// the allocation fails.
    pub(crate) fn deliver(self: &Arc<Self>, d: OwnedDatagram, awaited: bool) {
        let mut inbox = self.inbox.lock();
        if self.shut.load(Relaxed) {
            return;
        }
        let len = inbox.len();
        if len == inbox.capacity() && len < INBOX_LEN {
            // The push below drops the datagram if this fails (no warning: it is
            // counted).
            let more = len.max(INBOX_MIN).min(INBOX_LEN - len);
            let _ = inbox.reserve(more, GFP_ATOMIC | __GFP_NOWARN);
        }
        if inbox.push_within_capacity(d).is_err() {
            self.counters.inbox_drops.fetch_add(1, Relaxed);
        }
        if awaited && !self.in_stream.load(Relaxed) && self.app_cpu.load(Relaxed) == NO_CPU {
            drop(inbox);
            if let Some(mut st) = self.state.try_lock() {
                self.run_locked(&mut st);
                return;
            }
            inbox = self.inbox.lock();
            if self.shut.load(Relaxed) {
                return;
            }
        }
        self.kick();
        drop(inbox);
    }
}
