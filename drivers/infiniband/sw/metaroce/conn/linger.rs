// SPDX-License-Identifier: GPL-2.0

//! A connection after its last QP (spec [MR-CONN-16]): if a closed QP of it still
//! acknowledges what it received (spec [MR-QP-8]), it lingers, as a TCP socket waits
//! in TIME-WAIT, so that the peer's retransmission of a request whose last ACK was
//! lost is acknowledged rather than dropped (`ibv_rc_pingpong` destroys its QP as soon
//! as its last receive completes; the peer's last SEND would fail with a retry error).
//!
//! A lingering connection is found by its connection id only: no QP binds to it, an
//! `OPEN` from its peer's address does not reach it (unless it carries the peer's
//! known id: a retransmission), a probe of its peer goes unanswered, and it does not
//! count among the device's open connections. It ends when its peer has been quiet for
//! [`LINGER_QUIET_NS`], after [`LINGER_MAX_NS`] at most, or when the device needs its
//! place; the engine's reaper frees it then ([`crate::engine::Engine::reap`]).

use super::{ConnCtx, Serialized};
use crate::driver::MetaRoceDriver;
use kernel::sync::{atomic::Relaxed, Arc};
use metaroce_proto::Instant as CoreInstant;
use rdma::device::Device;

/// A lingering connection ends once its peer has been quiet this long: a peer
/// retransmits within its RTO (at most 40 ms when it has RTT samples, backed off a few
/// times if our ACKs are lost as well).
pub(crate) const LINGER_QUIET_NS: u64 = 500_000_000;

/// ... and this long after its last QP went, however busy the peer (it may be sending
/// what no closed QP received).
pub(crate) const LINGER_MAX_NS: u64 = 2_000_000_000;

impl ConnCtx {
    /// The last QP went: lingers if a closed QP of the connection still acknowledges
    /// what it received (and the connection is not closed). Returns whether it does;
    /// if not, the caller retires it. Process context.
    pub(crate) fn start_linger(self: &Arc<Self>) -> bool {
        {
            let st = self.state.lock();
            if st.dead || self.is_closed() || !st.conn.has_closed_qps() {
                return false;
            }
            self.linger_since
                .store(rdma::clock::local_ns().max(1), Relaxed);
        }
        // Its timer takes the linger's end from the next run ([`Self::linger_end`]).
        self.kick();
        true
    }

    /// Whether the connection lingers ([`Self::start_linger`]).
    pub(crate) fn is_lingering(&self) -> bool {
        self.linger_since.load(Relaxed) != 0
    }

    /// Whether the connection takes new QPs and datagrams from its peer's address:
    /// neither closed nor lingering.
    pub(crate) fn is_open(&self) -> bool {
        !self.is_closed() && !self.is_lingering()
    }

    /// When the linger ends ([`rdma::clock::local_ns`]), if the connection lingers.
    fn linger_end(&self) -> Option<u64> {
        let since = self.linger_since.load(Relaxed);
        (since != 0).then(|| {
            let heard = self.heard_at.load(Relaxed).max(since);
            heard
                .saturating_add(LINGER_QUIET_NS)
                .min(since.saturating_add(LINGER_MAX_NS))
        })
    }

    /// Whether the linger has ended (or the connection closed: its peer sent CLOSE):
    /// the engine frees the connection.
    pub(crate) fn linger_over(&self) -> bool {
        self.linger_end()
            .is_some_and(|end| self.is_closed() || rdma::clock::local_ns() >= end)
    }

    /// In a run: asks the engine to free the connection once its linger has ended, or
    /// returns the end as a deadline of the core's clock for the connection's timer.
    pub(super) fn watch_linger(
        &self,
        dev: &Device<MetaRoceDriver>,
        st: &Serialized,
    ) -> Option<CoreInstant> {
        let end = self.linger_end()?;
        if st.dead {
            return None;
        }
        if self.linger_over() {
            dev.data().net().engine().reap();
            return None;
        }
        Some(CoreInstant::from_nanos(end.saturating_sub(self.epoch)))
    }
}
