// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Connection configuration.

use crate::cc::AimdConfig;
use crate::constants::{MAX_DATA_HEADER_LEN, MAX_PATHS};
use crate::timer::Instant;

/// `rto_max` is at least this many times `rto_initial` ([`Config::rto_max_floor`]).
pub(crate) const RTO_MAX_PER_INITIAL: u64 = 8;
/// The largest [`Config::path_burst`].
pub const MAX_PATH_BURST: u32 = 64;

/// The default [`Config::pacing_gain`] (1/1024 units): 1, the window's own rate (5/4
/// was measured no better in the simulator and undecided in the VM).
pub const DEFAULT_PACING_GAIN: u32 = 1024;

/// The largest [`Config::pacing_gain`] (1/1024 units): 4.
pub const MAX_PACING_GAIN: u32 = 4096;

/// The initial and the smallest retransmission timeout, in ns, for the verbs "local
/// ACK timeout" `timeout` (`4.096 us << timeout`; 0, infinite in verbs, is taken as
/// 14, perftest's default, and above 24 as 24): the initial RTO is that timeout, as
/// the IB spec has it (at least 1 ms, at most 1 s), and the adaptive RTO never goes
/// below a quarter of it (at least 0.1 ms, at most 40 ms); 14 gives 67 ms and
/// 16.8 ms. The RTO may grow to 8 times the initial one ([`Config::rto_max_ns`]).
///
/// A software transport's queues grow by milliseconds within one round trip when a
/// window opens (more so in an emulated VM), faster than the RTT estimate follows:
/// a shorter floor retransmitted up to 9% of the data of a 64 KiB `ib_write_bw`
/// spuriously in the driver. Losses are recovered from SACK well before that.
//= Documentation/metaroce/spec.rst#rto
pub fn rto_from_local_ack_timeout(timeout: u8) -> (u64, u64) {
    const DEFAULT: u8 = 14;
    let t = if timeout == 0 {
        DEFAULT
    } else {
        timeout.min(24)
    };
    let ns = 4096u64 << t;
    (
        ns.clamp(1_000_000, 1_000_000_000),
        (ns / 4).clamp(100_000, 40_000_000),
    )
}

/// Per-connection settings. Times are nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// This side's connection id (non-zero; the peer puts it in `dst_conn`).
    pub local_conn_id: u32,
    /// The peer's connection id, or 0 if not yet known (then the first packets
    /// carry `OPEN` and the id is learned from the peer's first packet).
    pub peer_conn_id: u32,
    /// Paths (UDP source ports) to spray over, 1..=[`MAX_PATHS`].
    pub paths: u8,
    /// Largest payload per packet, bytes.
    pub mtu: u32,
    /// RTO before the first RTT sample.
    pub rto_initial_ns: u64,
    /// Smallest RTO.
    pub rto_min_ns: u64,
    /// Largest RTO (after backoff).
    pub rto_max_ns: u64,
    /// Consecutive timeouts per path (without progress anywhere) allowed before
    /// every outstanding work request fails with `RetryExcErr`
    /// (verbs `retry_cnt`; the budget scales with the path count). Also each
    /// new QP's own limit ([`Connection::set_retry_limit`](crate::Connection::set_retry_limit)).
    pub retry_limit: u8,
    /// RNR retries per work request before `RnrRetryExcErr`; 7 means unlimited (verbs `rnr_retry`).
    pub rnr_retry: u8,
    /// RNR delay this side advertises in its RNR NAKs, in 10 us units (at least 1).
    pub rnr_timer: u8,
    /// A packet is lost when a packet this many PSNs later on its path is acknowledged.
    pub reorder_threshold: u32,
    /// Consecutive timeouts after which a path is retired and its port re-rolled.
    pub path_retire_rtos: u32,
    /// Acknowledge at least every this many data packets.
    pub ack_every: u32,
    /// Data packets a sender puts on one path before it moves on to the next
    /// (round robin, [MR-PATH-3]); 1 sprays packet by packet. More lets a driver
    /// hand a path's packets to the network as one burst (UDP GSO).
    pub path_burst: u32,
    /// A data packet after which a window has no room for another asks for an
    /// ACK ([MR-SACK-20]) only when that window holds at most this many full
    /// packets: a larger window keeps the sender busy until the receiver's
    /// `ack_every` ACK arrives, and asking at every full window would make the
    /// receiver ACK each of the sender's runs, however short.
    pub window_ack_req: u32,
    /// Longest time to hold back an acknowledgement (at most `rto_min_ns / 4`
    /// is used).
    pub ack_delay_ns: u64,
    /// Inbound rate this side offers the peer (fair share), bytes/s; 0 = no hint.
    pub rate_hint_bps: u64,
    /// Probe timeouts ([MR-RTX-15]): a path whose packets stay unacknowledged
    /// for `2 * srtt + ack_hold` declares those sent that long ago lost, as its
    /// SACK loss detection would, instead of waiting for its RTO. Off by default.
    pub tail_probe: bool,
    /// Pace transmissions at `min(peer hint, window / SRTT)`.
    pub pacing: bool,
    /// Pacing credit that may accumulate while idle.
    pub pacing_burst_ns: u64,
    /// The window term of the pacing rate is `pacing_gain / 1024` times
    /// `window / SRTT` (at least 1024: pacing never holds the window back).
    pub pacing_gain: u32,
    /// Congestion control parameters for the default controller. Its `mss` is
    /// taken from `mtu` by [`sanitized`](Self::sanitized), which rescales the
    /// windows (set in bytes for the old `mss`) to keep their size in packets.
    pub aimd: AimdConfig,
}

impl Config {
    /// Defaults for a connection whose local id is `local_conn_id`.
    pub const fn new(local_conn_id: u32) -> Self {
        Config {
            local_conn_id,
            peer_conn_id: 0,
            paths: 8,
            mtu: 4096,
            rto_initial_ns: 1_000_000,
            rto_min_ns: 100_000,
            rto_max_ns: 100_000_000,
            retry_limit: 7,
            rnr_retry: 7,
            rnr_timer: 10,
            reorder_threshold: 3,
            path_retire_rtos: 2,
            ack_every: 4,
            path_burst: 1,
            window_ack_req: u32::MAX,
            ack_delay_ns: 10_000,
            rate_hint_bps: 0,
            tail_probe: false,
            pacing: true,
            pacing_burst_ns: 20_000,
            pacing_gain: DEFAULT_PACING_GAIN,
            aimd: AimdConfig::for_mss(4096),
        }
    }

    /// The configuration with out-of-range values clamped.
    pub fn sanitized(mut self) -> Self {
        self.paths = self.paths.clamp(1, MAX_PATHS as u8);
        self.mtu = self
            .mtu
            .clamp(64, u32::from(u16::MAX) - MAX_DATA_HEADER_LEN as u32);
        self.rto_min_ns = self.rto_min_ns.max(1_000);
        self.rto_max_ns = self.rto_max_floor();
        self.rnr_timer = self.rnr_timer.max(1);
        self.reorder_threshold = self.reorder_threshold.max(1);
        self.path_retire_rtos = self.path_retire_rtos.max(1);
        self.ack_every = self.ack_every.max(1);
        self.path_burst = self.path_burst.clamp(1, MAX_PATH_BURST);
        self.pacing_gain = self.pacing_gain.clamp(1024, MAX_PACING_GAIN);
        self.window_ack_req = self.window_ack_req.max(2);
        // The AIMD segment is the payload MTU: windows set for another MSS
        // keep their size in packets.
        //= Documentation/metaroce/spec.rst#aimd
        self.aimd = self.aimd.rescaled(self.mtu);
        if self.local_conn_id == 0 {
            self.local_conn_id = 1;
        }
        self
    }

    /// The longest an ACK is held back: `ack_delay_ns`, but never long enough to
    /// cause a retransmission timeout at the peer (a quarter of `rto_min_ns`).
    //= Documentation/metaroce/spec.rst#sack
    pub fn ack_hold_ns(&self) -> u64 {
        self.ack_delay_ns.min(self.rto_min_ns / 4)
    }

    /// `rto_max`, raised to `rto_min` and to 8 times `rto_initial`: behind a queue
    /// longer than the initial timeout every packet times out and is sent again
    /// into it, and only a backoff that can outgrow that queue gets an RTT sample
    /// again ([MR-RTX-5]).
    //= Documentation/metaroce/spec.rst#rto
    pub(crate) fn rto_max_floor(&self) -> u64 {
        self.rto_max_ns
            .max(self.rto_min_ns)
            .max(self.rto_initial_ns.saturating_mul(RTO_MAX_PER_INITIAL))
    }

    /// Whether a run of `count` losses (timeouts, or detections for one QP)
    /// that began at `since` exhausts `retry_limit`: more than `retry_limit`
    /// per path, and at least `retry_limit` local ACK timeouts (`rto_initial_ns`)
    /// long, so that an adaptive RTO far below it does not make a peer that is
    /// only slow (a stalled host) look dead.
    //= Documentation/metaroce/spec.rst#rto
    pub(crate) fn retries_exhausted(
        &self,
        retry_limit: u8,
        count: u32,
        since: Instant,
        now: Instant,
    ) -> bool {
        count > u32::from(retry_limit).saturating_mul(u32::from(self.paths))
            && now.nanos_since(since) >= u64::from(retry_limit).saturating_mul(self.rto_initial_ns)
    }

    /// The retransmission timeout of a path with RTT estimate `rtt`, before backoff.
    //= Documentation/metaroce/spec.rst#rtt
    pub(crate) fn rto_ns(&self, rtt: &crate::path::RttEstimator) -> u64 {
        rtt.rto(
            self.rto_initial_ns,
            self.rto_min_ns,
            self.rto_max_ns,
            self.ack_hold_ns(),
        )
    }
}

impl Default for Config {
    fn default() -> Self {
        Self::new(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perftest_default_timeout() {
        // 4.096 us << 14 = 67.1 ms; a quarter of it is the floor.
        assert_eq!(rto_from_local_ack_timeout(14), (67_108_864, 16_777_216));
        // 0 means infinite in verbs: taken as 14.
        assert_eq!(
            rto_from_local_ack_timeout(0),
            rto_from_local_ack_timeout(14)
        );
    }

    #[test]
    fn short_timeouts_clamp_up() {
        // 4.096 us << 1 = 8 us: below what a host's scheduling allows.
        assert_eq!(rto_from_local_ack_timeout(1), (1_000_000, 100_000));
        // 4096 ns << 8 = 1.05 ms: the initial RTO as is, its quarter raised.
        assert_eq!(rto_from_local_ack_timeout(8), (1_048_576, 262_144));
        assert_eq!(rto_from_local_ack_timeout(4), (1_000_000, 100_000));
    }

    #[test]
    fn long_timeouts_clamp_down() {
        // 4096 << 18 = 1.07 s: the initial RTO stops at 1 s, the floor at 40 ms.
        assert_eq!(rto_from_local_ack_timeout(18), (1_000_000_000, 40_000_000));
        for t in 24..=u8::MAX {
            assert_eq!(rto_from_local_ack_timeout(t), (1_000_000_000, 40_000_000));
        }
    }

    #[test]
    fn monotone_and_floor_below_initial() {
        let mut last = (0, 0);
        for t in 1..=u8::MAX {
            let (initial, min) = rto_from_local_ack_timeout(t);
            assert!(initial >= last.0 && min >= last.1, "timeout {t}");
            assert!(min < initial, "timeout {t}");
            last = (initial, min);
        }
    }
}
