// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! A unidirectional link: a FIFO output queue, a serializer and a wire.
//!
//! A datagram offered to the link is tail-dropped if the queue is full, marked
//! CE if the queue is above the ECN threshold and the datagram is ECN-capable,
//! serialized at the link rate behind everything queued before it, and then
//! delivered after the propagation delay plus an optional random jitter (which
//! reorders datagrams). Faults are applied with seeded probabilities: loss on
//! the wire (after the datagram used its slot), duplication, and bit flips.
//! A blackholed link silently drops everything offered to it.
//!
//! The queue is never materialized: with one FIFO serializer, the backlog at
//! time `t` is exactly the bytes still to serialize, `(busy_until - t) * rate`.

use crate::clock::Time;
use crate::datagram::{Datagram, Ecn};
use crate::rng::Rng;

/// Static parameters of a link.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkConfig {
    /// Line rate in bits per second.
    pub rate_bps: u64,
    /// Propagation delay in nanoseconds.
    pub delay_ns: Time,
    /// Queue capacity in bytes (tail drop beyond it).
    pub queue_bytes: u64,
    /// ECN marking threshold in bytes of backlog (`u64::MAX`: never mark).
    pub ecn_threshold_bytes: u64,
    /// Probability that a datagram is lost on the wire.
    pub loss: f64,
    /// Probability that a datagram is delivered twice.
    pub dup: f64,
    /// Probability that one bit of a datagram is flipped.
    pub corrupt: f64,
    /// Extra delay drawn uniformly from `0..=jitter_ns` per datagram (reordering).
    pub jitter_ns: Time,
    /// Keep the link FIFO despite jitter (variable delay without reordering on this link).
    pub jitter_fifo: bool,
    /// A stall of `stall.1` ns at the start of every `stall.0` ns (0: none): what would
    /// arrive during it arrives at its end, in order, as from a host whose softirqs or
    /// virtual CPU were held back.
    pub stall: (Time, Time),
}

impl LinkConfig {
    /// A fault-free link of `rate_bps` and `delay_ns` with a deep queue and no ECN.
    pub const fn new(rate_bps: u64, delay_ns: Time) -> Self {
        LinkConfig {
            rate_bps,
            delay_ns,
            queue_bytes: 16 << 20,
            ecn_threshold_bytes: u64::MAX,
            loss: 0.0,
            dup: 0.0,
            corrupt: 0.0,
            jitter_ns: 0,
            jitter_fifo: false,
            stall: (0, 0),
        }
    }

    /// Nanoseconds to serialize `bytes` at this link's rate (rounded up).
    pub fn serialize_ns(&self, bytes: usize) -> Time {
        if self.rate_bps == 0 {
            return 0;
        }
        ((bytes as u128 * 8 * 1_000_000_000).div_ceil(u128::from(self.rate_bps))) as Time
    }
}

/// Counters of one link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Datagrams offered to the link.
    pub offered: u64,
    /// Datagrams delivered (duplicates counted once more each).
    pub delivered: u64,
    /// Bytes (wire length) serialized.
    pub bytes: u64,
    /// Tail drops at a full queue.
    pub queue_drops: u64,
    /// Random losses on the wire.
    pub lost: u64,
    /// Drops while blackholed.
    pub blackholed: u64,
    /// Datagrams marked CE.
    pub ecn_marked: u64,
    /// Duplicates created.
    pub duplicated: u64,
    /// Datagrams with a bit flipped.
    pub corrupted: u64,
    /// Largest backlog seen, bytes.
    pub peak_queue_bytes: u64,
    /// When a datagram was last offered.
    pub last_offer_at: Option<Time>,
}

/// Width of a [`QueueHist`] bucket, bytes.
pub const QUEUE_BUCKET_BYTES: u64 = 8 << 10;
/// Buckets of a [`QueueHist`]: backlogs up to 1 MiB, the last bucket holds the rest.
pub const QUEUE_BUCKETS: usize = 128;

/// The backlog each datagram offered to a link found ahead of it (a tail drop finds
/// a full queue), in buckets of [`QUEUE_BUCKET_BYTES`]: the queue as packets see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueHist {
    counts: [u64; QUEUE_BUCKETS],
}

impl Default for QueueHist {
    fn default() -> Self {
        QueueHist {
            counts: [0; QUEUE_BUCKETS],
        }
    }
}

impl QueueHist {
    /// Counts one datagram that found `backlog` bytes queued.
    pub fn record(&mut self, backlog: u64) {
        let b = (backlog / QUEUE_BUCKET_BYTES).min(QUEUE_BUCKETS as u64 - 1) as usize;
        self.counts[b] += 1;
    }

    /// Adds `other`'s counts.
    pub fn merge(&mut self, other: &QueueHist) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
    }

    /// Datagrams counted.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The backlog at or below which a fraction `q` (0..=1) of the datagrams found
    /// the queue: the upper edge of the bucket holding that quantile, bytes (0 when
    /// nothing was counted).
    pub fn quantile(&self, q: f64) -> u64 {
        let total = self.total();
        if total == 0 {
            return 0;
        }
        let want = ((total as f64 * q.clamp(0.0, 1.0)).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= want {
                return (i as u64 + 1) * QUEUE_BUCKET_BYTES;
            }
        }
        QUEUE_BUCKETS as u64 * QUEUE_BUCKET_BYTES
    }
}

/// What became of an offered datagram.
#[derive(Debug)]
pub enum Outcome {
    /// Dropped (full queue, loss or blackhole).
    Dropped,
    /// Arrives at the far end at the given times (two entries when duplicated).
    Delivered(Vec<(Time, Datagram)>),
}

/// A link and its state.
#[derive(Clone, Debug)]
pub struct Link {
    /// Parameters (may be changed between events, e.g. to add loss mid-run).
    pub cfg: LinkConfig,
    /// Counters.
    pub stats: LinkStats,
    /// Whether the link silently drops everything.
    pub blackholed: bool,
    /// The backlog each offered datagram found.
    pub queue_seen: QueueHist,
    busy_until: Time,
    last_arrival: Time,
    rng: Rng,
}

impl Link {
    /// A link with its own random stream.
    pub fn new(cfg: LinkConfig, rng: Rng) -> Self {
        Link {
            cfg,
            stats: LinkStats::default(),
            blackholed: false,
            queue_seen: QueueHist::default(),
            busy_until: 0,
            last_arrival: 0,
            rng,
        }
    }

    /// Bytes waiting to be serialized at `now`.
    pub fn backlog_bytes(&self, now: Time) -> u64 {
        let ns = self.busy_until.saturating_sub(now);
        (u128::from(ns) * u128::from(self.cfg.rate_bps) / 8 / 1_000_000_000) as u64
    }

    /// Offers `d` to the link at `now`.
    pub fn offer(&mut self, now: Time, mut d: Datagram) -> Outcome {
        self.stats.offered += 1;
        self.stats.last_offer_at = Some(now);
        if self.blackholed {
            self.stats.blackholed += 1;
            return Outcome::Dropped;
        }
        let len = d.wire_len();
        let backlog = self.backlog_bytes(now);
        self.queue_seen.record(backlog);
        if backlog + len as u64 > self.cfg.queue_bytes {
            self.stats.queue_drops += 1;
            return Outcome::Dropped;
        }
        if backlog > self.cfg.ecn_threshold_bytes && d.ecn != Ecn::NotEct {
            if d.ecn == Ecn::Ect {
                self.stats.ecn_marked += 1;
            }
            d.ecn = Ecn::Ce;
        }
        self.stats.peak_queue_bytes = self.stats.peak_queue_bytes.max(backlog + len as u64);
        let start = self.busy_until.max(now);
        self.busy_until = start + self.cfg.serialize_ns(len);
        self.stats.bytes += len as u64;
        if self.rng.chance(self.cfg.loss) {
            self.stats.lost += 1;
            return Outcome::Dropped;
        }
        if self.rng.chance(self.cfg.corrupt) {
            self.stats.corrupted += 1;
            let bit = self.rng.next_u64();
            d.flip_bit(bit);
        }
        let mut out = Vec::with_capacity(1);
        let copies = if self.rng.chance(self.cfg.dup) { 2 } else { 1 };
        if copies == 2 {
            self.stats.duplicated += 1;
            let at = self.arrival();
            out.push((at, d.clone()));
        }
        let at = self.arrival();
        out.push((at, d));
        self.stats.delivered += copies;
        Outcome::Delivered(out)
    }

    fn arrival(&mut self) -> Time {
        let jitter = if self.cfg.jitter_ns > 0 {
            self.rng.below(self.cfg.jitter_ns + 1)
        } else {
            0
        };
        let mut at = self.busy_until + self.cfg.delay_ns + jitter;
        if self.cfg.jitter_fifo {
            at = at.max(self.last_arrival);
        }
        let (every, stall) = self.cfg.stall;
        if every > 0 && at % every < stall {
            at += stall - at % every;
        }
        self.last_arrival = self.last_arrival.max(at);
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dgram(len: usize, ecn: Ecn) -> Datagram {
        Datagram::new(0, 1, 1000, 2000, ecn, vec![0; len])
    }

    #[test]
    fn serializes_fifo_and_marks_above_threshold() {
        let mut cfg = LinkConfig::new(8_000_000_000, 1000); // 1 byte/ns
        cfg.ecn_threshold_bytes = 150;
        cfg.queue_bytes = 402;
        let mut l = Link::new(cfg, Rng::new(1));
        let mut arrivals = Vec::new();
        for _ in 0..5 {
            match l.offer(0, dgram(134 - crate::datagram::WIRE_OVERHEAD, Ecn::Ect)) {
                Outcome::Delivered(v) => arrivals.extend(v.into_iter().map(|(t, d)| (t, d.ecn))),
                Outcome::Dropped => arrivals.push((0, Ecn::NotEct)),
            }
        }
        // 134-byte wire frames at 1 byte/ns: 134, 268, 402 (marked: backlog 268 > 150).
        assert_eq!(arrivals[0], (1134, Ecn::Ect));
        assert_eq!(arrivals[1], (1268, Ecn::Ect));
        assert_eq!(arrivals[2], (1402, Ecn::Ce));
        assert_eq!(l.stats.queue_drops, 2);
        assert_eq!(l.backlog_bytes(134), 268);
        // Every datagram found under 8 KiB queued.
        assert_eq!(l.queue_seen.total(), 5);
        assert_eq!(l.queue_seen.quantile(0.99), QUEUE_BUCKET_BYTES);
    }

    #[test]
    fn queue_quantiles_are_bucket_edges() {
        let mut h = QueueHist::default();
        assert_eq!(h.quantile(0.5), 0);
        for _ in 0..98 {
            h.record(0);
        }
        h.record(20 << 10);
        h.record(64 << 20);
        assert_eq!(h.quantile(0.5), 8 << 10);
        assert_eq!(h.quantile(0.99), 24 << 10);
        assert_eq!(h.quantile(1.0), 1 << 20);
        let mut m = QueueHist::default();
        m.merge(&h);
        assert_eq!(m, h);
    }

    #[test]
    fn blackhole_drops_everything() {
        let mut l = Link::new(LinkConfig::new(1_000_000_000, 10), Rng::new(1));
        l.blackholed = true;
        assert!(matches!(
            l.offer(0, dgram(10, Ecn::NotEct)),
            Outcome::Dropped
        ));
        assert_eq!(l.stats.blackholed, 1);
    }
}
