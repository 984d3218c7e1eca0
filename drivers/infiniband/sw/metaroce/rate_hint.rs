// SPDX-License-Identifier: GPL-2.0

//! The receiver's fair-share rate hint (spec [MR-CC-12], [MR-CC-14]): a device
//! shares its inbound capacity equally among the peers that sent it data within
//! [`ACTIVE_WINDOW_NS`], and every ACK of its connections carries that share.
//!
//! Capacity is the module parameter `rx_capacity_mbps`, or when 0 the netdev's link
//! speed read when the device was created (ethtool's; no hint if unknown). The
//! parameter `rate_hints=N` makes every ACK carry hint 0. Both are read at every
//! run, so writing them takes effect at once.
//!
//! Connections run on many CPUs under their own locks. Each stamps the time it last
//! placed data ([`crate::conn::ConnCtx::data_at`]); the first run after
//! [`REFRESH_NS`] counts the active ones under the device's connection table lock
//! (bounded by `max_conns`) and stores the count; every run reads it. Nothing
//! allocates and no run waits for another.

use kernel::sync::atomic::{Atomic, Relaxed};
use metaroce_proto::cc::{share_bps, FairShare};

/// A peer that placed data within this long is an active sender. Longer than the
/// round trips of an emulated VM (milliseconds) and the gaps of a paced sender.
pub(crate) const ACTIVE_WINDOW_NS: u64 = 50_000_000;

/// Active senders are counted again at most this often (the spec asks for once per
/// RTT at least).
pub(crate) const REFRESH_NS: u64 = 1_000_000;

/// Bytes per second in one Mb/s (also the unit of the hint on the wire).
const MBPS: u64 = 1_000_000 / 8;

/// A device's share of its inbound capacity.
pub(crate) struct RateShare {
    /// The netdev's link speed at the device's creation, Mb/s (0: unknown).
    link_mbps: u32,
    /// Active senders as last counted.
    active: Atomic<u64>,
    /// When they were ([`rdma::clock::local_ns`]).
    counted_at: Atomic<u64>,
}

impl RateShare {
    pub(crate) fn new(link_mbps: Option<u32>) -> Self {
        Self {
            link_mbps: link_mbps.unwrap_or(0),
            active: Atomic::new(0),
            counted_at: Atomic::new(0),
        }
    }

    /// Inbound capacity in bytes/s: `rx_capacity_mbps`, else the link speed; 0 if
    /// neither is known.
    pub(crate) fn capacity_bps(&self) -> u64 {
        let mbps = match rdma::params::rx_capacity_mbps() {
            0 => self.link_mbps,
            m => m,
        };
        u64::from(mbps) * MBPS
    }

    /// The hint for the ACKs sent now (`now` in [`rdma::clock::local_ns`]), bytes/s,
    /// 0 = none. `count_active(since)` counts the connections that placed data at or
    /// after `since`; it runs at most once per [`REFRESH_NS`], on one CPU.
    pub(crate) fn hint(&self, now: u64, count_active: impl FnOnce(u64) -> u64) -> u64 {
        if !rdma::params::rate_hints() {
            return 0;
        }
        let capacity = self.capacity_bps();
        if capacity == 0 {
            return 0;
        }
        let last = self.counted_at.load(Relaxed);
        if now.saturating_sub(last) >= REFRESH_NS
            && self.counted_at.cmpxchg(last, now, Relaxed).is_ok()
        {
            let n = count_active(now.saturating_sub(ACTIVE_WINDOW_NS));
            self.active.store(n, Relaxed);
        }
        share_bps(
            capacity,
            self.active.load(Relaxed),
            FairShare::<1>::DEFAULT_HEADROOM_PERMILLE,
        )
    }
}
