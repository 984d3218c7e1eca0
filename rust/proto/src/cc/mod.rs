// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Congestion control behind a trait, so schemes can be compared.
//!
//! The connection owns one controller that sees every path. It reports sends,
//! acknowledgements and congestion signals, and asks for windows. Pacing is
//! done by the connection at `min(peer rate hint, connection window / SRTT)`.
//!
//= Documentation/metaroce/spec.rst#congestion-control

mod aimd;
mod fair_share;

pub use aimd::{Aimd, AimdConfig};
pub use fair_share::{share_bps, FairShare};

use crate::timer::Instant;

/// A congestion signal on one path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// The receiver echoed this many new ECN-CE marks.
    Ecn(u16),
    /// Bytes declared lost by a SACK gap.
    Loss(u32),
    /// The path's retransmission timer fired.
    Timeout,
}

/// A congestion controller for one connection and all its paths.
pub trait CongestionControl {
    /// `bytes` of data were sent on `path`.
    fn on_sent(&mut self, path: usize, bytes: u32, now: Instant);
    /// `bytes` were newly acknowledged on `path`, whose smoothed RTT is `srtt_ns`.
    fn on_ack(&mut self, path: usize, bytes: u32, srtt_ns: u64, now: Instant);
    /// A congestion signal arrived for `path`.
    fn on_congestion(&mut self, path: usize, signal: Signal, srtt_ns: u64, now: Instant);
    /// A timeout of `path` was spurious: what it declared lost was acknowledged.
    fn on_spurious_timeout(&mut self, path: usize);
    /// `path` was retired and starts afresh.
    fn on_path_reset(&mut self, path: usize);
    /// Congestion window of `path`, in bytes.
    fn path_window(&self, path: usize) -> u32;
    /// Congestion window of the whole connection, in bytes.
    fn conn_window(&self) -> u64;
}
