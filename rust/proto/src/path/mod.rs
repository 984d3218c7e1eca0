// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Paths: each one a UDP source port with its own sequence, window and RTT.
//!
//! A connection sprays packets over up to [`MAX_PATHS`](crate::constants::MAX_PATHS)
//! paths. Each path has its own PSN sequence (never reused), in-flight record,
//! RTT estimate and loss/ECN counters, so the sender can tell a congested path
//! from a broken one. A path that keeps timing out is retired: its source port
//! is re-rolled (a new ECMP route), its window restarts and its unacknowledged
//! data is retransmitted on whatever path has room.
//!
//= Documentation/metaroce/spec.rst#multipath

pub(crate) mod inflight;
mod rtt;
mod view;

pub use rtt::RttEstimator;
pub use view::{PathState, PathView};

use crate::timer::Instant;
use inflight::Inflight;
use pin_init::{init, Init};

/// Counters of one path (sender side).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathStats {
    /// Data packets sent (first transmissions and retransmissions).
    pub sent: u64,
    /// Of those, retransmissions.
    pub retransmitted: u64,
    /// Packets acknowledged.
    pub acked: u64,
    /// Packets declared lost by a SACK gap or a probe timeout.
    pub lost: u64,
    /// Probe timeouts that declared packets lost ([MR-RTX-15]).
    pub probes: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Of those, found spurious: a packet they declared lost was acknowledged.
    pub spurious_timeouts: u64,
    /// ECN-CE marks echoed by the receiver.
    pub ecn_marks: u64,
    /// Times the path was retired and its port re-rolled.
    pub retired: u64,
}

/// A path's health epochs ([MR-PATH-8]): its counters when the current one
/// began, how many in a row it was worse than the other paths, and the last.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Health {
    pub(crate) sent: u64,
    pub(crate) bad: u64,
    pub(crate) worse: u8,
    /// Its last epoch's bad packets and packets sent ((0, 0): none yet).
    pub(crate) last: (u64, u64),
    /// When its current pace epoch began (the first ACK after the path got its
    /// port) and its packets sent then ([MR-PATH-14]).
    pub(crate) pace_since: Option<Instant>,
    pub(crate) pace_sent: u64,
    /// How long its last pace epoch took, in nanoseconds, and its packets
    /// ((0, 0): none yet on this port).
    pub(crate) pace: (u64, u64),
}

/// Sender-side state of one path.
#[derive(Clone, Debug)]
pub(crate) struct TxPath {
    pub(crate) sport: u16,
    pub(crate) inflight: Inflight,
    pub(crate) rtt: RttEstimator,
    pub(crate) rto_deadline: Option<Instant>,
    /// When its packets are overdue without a timeout ([MR-RTX-15]; only with
    /// `Config::tail_probe`).
    pub(crate) probe_deadline: Option<Instant>,
    /// The next PSN when the last timeout fired: the PSNs before it that the
    /// timeout declared lost prove it spurious if acknowledged.
    pub(crate) timeout_end: Option<u32>,
    pub(crate) backoff: u32,
    pub(crate) consecutive_rto: u32,
    /// Probe timeouts that declared packets lost since the path's last
    /// acknowledgement ([MR-RTX-15]): they retire it as timeouts would.
    pub(crate) silent_probes: u32,
    pub(crate) ce_echo: u16,
    /// The receiver's duplicate count last seen (ACK path block `dup_count`).
    pub(crate) dup_echo: u8,
    /// Loss-detection threshold in PSNs: the configured one, doubled for every
    /// reordering the path has shown ([MR-SACK-21]).
    pub(crate) reorder_threshold: u32,
    /// The latest cumulative PSN the peer reported for this path.
    pub(crate) peer_cum: u32,
    /// When the last `PATH_FLOOR` for this path was sent, until the peer's
    /// cumulative PSN reaches its value (the floor was answered).
    pub(crate) floor_sent_at: Option<Instant>,
    /// The value of the last `PATH_FLOOR` for this path.
    pub(crate) floor_value: u32,
    pub(crate) stats: PathStats,
    pub(crate) health: Health,
}

impl TxPath {
    /// The probe timeout ([MR-RTX-15]): twice the smoothed RTT and the receiver's
    /// longest ACK hold; before the path's first RTT sample, from `conn_rtt` (the
    /// connection's, over all its paths: a retired path's new route), and `None`
    /// while neither has a sample.
    pub(crate) fn probe_timeout(&self, ack_hold: u64, conn_rtt: &RttEstimator) -> Option<u64> {
        let rtt = if self.rtt.has_sample() {
            &self.rtt
        } else if conn_rtt.has_sample() {
            conn_rtt
        } else {
            return None;
        };
        Some(rtt.srtt_or(0).saturating_mul(2).saturating_add(ack_hold))
    }

    /// A fresh path on source port `sport` whose first PSN is `first_psn`,
    /// built in place (the in-flight ring is 6 KiB).
    pub(crate) fn init(sport: u16, first_psn: u32) -> impl Init<Self> {
        init!(TxPath {
            sport,
            inflight <- Inflight::init(first_psn),
            rtt: RttEstimator::default(),
            rto_deadline: None,
            probe_deadline: None,
            timeout_end: None,
            backoff: 0,
            consecutive_rto: 0,
            silent_probes: 0,
            ce_echo: 0,
            dup_echo: 0,
            reorder_threshold: 1,
            peer_cum: first_psn,
            floor_sent_at: None,
            floor_value: first_psn,
            stats: PathStats::default(),
            health: Health::default(),
        })
    }

    /// Makes this a fresh path (as [`TxPath::init`]) in place, declaring a
    /// packet lost `reorder_threshold` PSNs below the highest acknowledged one.
    pub(crate) fn reset(&mut self, sport: u16, first_psn: u32, reorder_threshold: u32) {
        self.sport = sport;
        self.inflight.reset(first_psn);
        self.rtt = RttEstimator::default();
        self.rto_deadline = None;
        self.probe_deadline = None;
        self.timeout_end = None;
        self.backoff = 0;
        self.consecutive_rto = 0;
        self.ce_echo = 0;
        self.dup_echo = 0;
        self.reorder_threshold = reorder_threshold;
        self.peer_cum = first_psn;
        self.floor_sent_at = None;
        self.floor_value = first_psn;
        self.stats = PathStats::default();
        self.health = Health::default();
    }

    /// Whether the peer's cumulative PSN is stuck below PSNs this side has
    /// already resolved (abandoned holes): a `PATH_FLOOR` would advance it.
    pub(crate) fn floor_needed(&self) -> bool {
        crate::psn::seq_diff(self.inflight.una(), self.peer_cum) > 0
    }

    /// Whether this path, on the port `dead` of a path retired as dead, has
    /// just finished a health epoch there ([MR-PATH-13]).
    pub(crate) fn dead_port_alive(&self, dead: u16) -> bool {
        dead != 0 && self.sport == dead && self.consecutive_rto == 0
    }

    /// Whether the path's last timeout declared `psn` lost ([`Self::timeout_end`]).
    pub(crate) fn lost_by_timeout(&self, psn: u32) -> bool {
        self.timeout_end
            .is_some_and(|end| crate::psn::seq_diff(psn, end) < 0)
    }
}

/// A UDP source port in the dynamic range 49152..=65535 from 16 random bits.
pub(crate) fn port_from(r: u32) -> u16 {
    0xC000 | (r as u16 & 0x3FFF)
}
