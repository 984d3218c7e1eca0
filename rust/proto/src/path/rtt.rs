// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Per-path RTT estimate and retransmission timeout (RFC 6298, integer ns).
//!
//! Samples are unambiguous because a PSN is never reused.
//!
//= Documentation/metaroce/spec.rst#rtt

/// Smoothed RTT and variance in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RttEstimator {
    srtt: u64,
    rttvar: u64,
    min: u64,
    samples: u64,
}

impl RttEstimator {
    /// Adds one sample.
    pub fn update(&mut self, sample_ns: u64) {
        let r = sample_ns.max(1);
        if self.samples == 0 {
            self.srtt = r;
            self.rttvar = r / 2;
            self.min = r;
        } else {
            let err = self.srtt.abs_diff(r);
            self.rttvar = (self.rttvar.saturating_mul(3).saturating_add(err)) / 4;
            self.srtt = (self.srtt.saturating_mul(7).saturating_add(r)) / 8;
            self.min = self.min.min(r);
        }
        self.samples = self.samples.saturating_add(1);
    }

    /// Smoothed RTT, or `initial` before the first sample.
    pub fn srtt_or(&self, initial: u64) -> u64 {
        if self.samples == 0 {
            initial
        } else {
            self.srtt
        }
    }

    /// Smallest sample seen (0 before any).
    pub fn min_rtt(&self) -> u64 {
        self.min
    }

    /// Whether any sample was taken.
    pub fn has_sample(&self) -> bool {
        self.samples > 0
    }

    /// Retransmission timeout: `srtt + max(4 * rttvar, granularity) + ack_hold`,
    /// clamped to `[min, max]`; `initial` before the first sample. Samples exclude
    /// the time the peer held its ACK back, so the timeout adds the longest it may
    /// (`ack_hold`), as QUIC's probe timeout adds `max_ack_delay` (RFC 9002).
    pub fn rto(&self, initial: u64, min: u64, max: u64, ack_hold: u64) -> u64 {
        let base = if self.samples == 0 {
            initial
        } else {
            self.srtt
                .saturating_add(self.rttvar.saturating_mul(4).max(1_000))
                .saturating_add(ack_hold)
        };
        base.clamp(min, max.max(min))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // spec: MR-RTX-3, MR-RTX-4
    #[test]
    fn first_sample_and_smoothing() {
        let mut r = RttEstimator::default();
        assert_eq!(r.rto(1_000_000, 100_000, 10_000_000, 0), 1_000_000);
        r.update(10_000);
        assert_eq!(r.srtt_or(0), 10_000);
        // 10us + 4 * 5us = 30us, clamped to the 100us minimum.
        assert_eq!(r.rto(0, 100_000, 10_000_000, 0), 100_000);
        assert_eq!(r.rto(0, 1_000, 10_000_000, 0), 30_000);
        assert_eq!(r.rto(0, 1_000, 10_000_000, 5_000), 35_000);
        r.update(18_000);
        assert_eq!(r.srtt_or(0), 11_000);
        assert_eq!(r.min_rtt(), 10_000);
    }

    #[test]
    fn extreme_values_do_not_overflow() {
        let mut r = RttEstimator::default();
        r.update(u64::MAX);
        r.update(0);
        r.update(u64::MAX);
        assert!(r.rto(0, 1, u64::MAX, u64::MAX) >= 1);
    }
}
