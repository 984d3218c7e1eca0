// SPDX-License-Identifier: GPL-2.0

//! The protocol core's connection as the driver instantiates it ([`Conn`]), and the
//! configuration it gets from the device's settings and the verbs attributes of the
//! QP that opens it ([`config`], [`retransmission`]).
//!
//! The bottom of the connection side of the driver: it imports no other file of it
//! but the driver's limits, so that the files using the connection (`conn`, `bound`,
//! `trace`, `engine`) need not import each other for it.

use crate::driver::MAX_QP;
use kernel::prelude::*;
use metaroce_proto::{cc::Aimd, rto_from_local_ack_timeout, Config, Connection, QpSlot, QpStore};
use rdma::qp::QpAttributes;

/// Data packets a receiver acknowledges at once. ACKs cost a software transport
/// nearly as much as data packets; the sender asks for an immediate ACK whenever it
/// waits for one (`ACK_REQ`: a signaled completion, a full window, a retransmission).
pub(crate) const ACK_EVERY: u32 = 8;

/// The longest a receiver holds an ACK back ([MR-SACK-10]): long enough that the
/// delay timer seldom fires while data flows (with 1 ms, READ requests arriving every
/// half millisecond under TCG each cost the requester a run and half an ACK). The core
/// holds it back a quarter of the shortest retransmission timeout at most, and adds it
/// to the RTO.
pub(crate) const ACK_DELAY_NS: u64 = 2_000_000;

/// The most QPs one connection carries (a device's `max_qp`).
pub(crate) const MAX_QPS_PER_CONN: usize = MAX_QP as usize;

/// A connection's QP slots: allocated one by one as QPs bind, never freed before
/// the connection (a slot's index is its QP's id), reused after an unbind.
#[derive(Default)]
pub(crate) struct QpSlots(KVec<KBox<QpSlot>>);

impl QpSlots {
    /// Adds `slot` as the next QP slot.
    pub(crate) fn push(&mut self, slot: KBox<QpSlot>) -> Result {
        self.0.push(slot, GFP_ATOMIC)?;
        Ok(())
    }
}

impl QpStore for QpSlots {
    fn len(&self) -> usize {
        self.0.len()
    }

    fn get(&self, i: usize) -> Option<&QpSlot> {
        self.0.get(i).map(|b| &**b)
    }

    fn get_mut(&mut self, i: usize) -> Option<&mut QpSlot> {
        self.0.get_mut(i).map(|b| &mut **b)
    }
}

/// A connection of the driver: the default controller, QP slots grown on demand.
pub(crate) type Conn = Connection<Aimd, QpSlots>;

/// The configuration of a new connection `id` whose first QP has `attrs`, sending
/// datagrams of up to `mtu` payload bytes.
pub(crate) fn config(id: u32, mtu: u32, attrs: &QpAttributes) -> Config {
    let mut cfg = Config::new(id);
    cfg.paths = u8::try_from(rdma::params::paths()).unwrap_or(u8::MAX);
    cfg.mtu = mtu;
    // `retry_cnt`, `rnr_retry` and `timeout` are RTS attributes: these are defaults
    // until the QP gets there (ConnCtx::ready_to_send).
    let (limit, initial, min) = retransmission(attrs);
    cfg.retry_limit = limit.max(7);
    cfg.rto_initial_ns = initial;
    cfg.rto_min_ns = min;
    cfg.rnr_retry = 7;
    cfg.ack_every = ACK_EVERY;
    cfg.ack_delay_ns = ACK_DELAY_NS;
    cfg.pacing_burst_ns = u64::from(rdma::params::pacing_burst_us()) * 1000;
    cfg.path_burst = rdma::params::path_burst();
    // Percent to 1/1024 units (the core clamps it to 1024..=4096).
    cfg.pacing_gain = rdma::params::pacing_gain_pct().saturating_mul(1024) / 100;
    cfg.window_ack_req = match rdma::params::window_ack_req() {
        0 => u32::MAX,
        n => n,
    };
    cfg.tail_probe = rdma::params::tail_probe();
    cfg
}

/// A QP's retry budget and retransmission timer from its verbs attributes: the
/// `retry_cnt`, and the initial and smallest RTO in ns from its local ACK timeout
/// ([`rto_from_local_ack_timeout`]: the IB spec's timeout, floored at a quarter of it).
pub(crate) fn retransmission(attrs: &QpAttributes) -> (u8, u64, u64) {
    let (initial, min) = rto_from_local_ack_timeout(attrs.timeout);
    (attrs.retry_cnt, initial, min)
}
