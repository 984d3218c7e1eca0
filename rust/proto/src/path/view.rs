// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! A read-only snapshot of one sender path, for counters and debugging.
//!
//= Documentation/metaroce/spec.rst#path-retirement

use super::{PathStats, TxPath};

/// Where a path stands in the sender's state diagram ([MR-PATH-5]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathState {
    /// No timeout since its last acknowledgement.
    Active,
    /// One or more consecutive timeouts: retired at `path_retire_rtos`.
    Suspect,
    /// Retired (new source port) and nothing acknowledged on the new port yet.
    Retired,
}

impl PathState {
    /// The state's name: `active`, `suspect` or `retired`.
    pub fn name(self) -> &'static str {
        match self {
            PathState::Active => "active",
            PathState::Suspect => "suspect",
            PathState::Retired => "retired",
        }
    }
}

/// One path of a connection as the sender sees it
/// ([`Connection::path_view`](crate::Connection::path_view)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathView {
    /// Current UDP source port.
    pub sport: u16,
    /// State.
    pub state: PathState,
    /// Congestion window in bytes.
    pub window: u32,
    /// Smoothed RTT in ns (0 before the first sample on this port).
    pub srtt_ns: u64,
    /// Bytes in flight (headers and payload).
    pub bytes_in_flight: u32,
    /// Counters since the connection started.
    pub stats: PathStats,
}

impl PathView {
    pub(crate) fn of(p: &TxPath, window: u32) -> Self {
        let state = if p.consecutive_rto > 0 {
            PathState::Suspect
        } else if p.stats.retired > 0 && !p.rtt.has_sample() {
            PathState::Retired
        } else {
            PathState::Active
        };
        PathView {
            sport: p.sport,
            state,
            window,
            srtt_ns: p.rtt.srtt_or(0),
            bytes_in_flight: p.inflight.bytes_in_flight,
            stats: p.stats,
        }
    }
}
