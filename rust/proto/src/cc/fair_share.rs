// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The receiver's fair share: inbound capacity split among active senders.
//!
//! A device keeps one [`FairShare`] over its connections (the driver or
//! simulator owns it and serializes access), reports each received data packet,
//! and sets every connection's advertised hint with
//! [`Connection::set_rate_hint`](crate::Connection::set_rate_hint). A sender is
//! active if it delivered data within the last `window_ns`.
//!
//= Documentation/metaroce/spec.rst#rate-hint

use crate::timer::Instant;

/// Equal split of inbound capacity among up to `N` senders.
///
/// While two or more senders are active, only `headroom_permille` / 1000 of
/// the capacity is handed out (95% by default): senders that all run at
/// their hint then drain, rather than keep, a queue built up before the
/// hints arrived (incast).
#[derive(Clone, Debug)]
pub struct FairShare<const N: usize> {
    capacity_bps: u64,
    window_ns: u64,
    headroom_permille: u64,
    last_seen: [Option<Instant>; N],
}

impl<const N: usize> FairShare<N> {
    /// Share of the capacity handed out while two or more senders are active, per mille.
    pub const DEFAULT_HEADROOM_PERMILLE: u64 = 950;

    /// Capacity in bytes per second; senders idle longer than `window_ns` do not count.
    pub fn new(capacity_bps: u64, window_ns: u64) -> Self {
        FairShare {
            capacity_bps,
            window_ns,
            headroom_permille: Self::DEFAULT_HEADROOM_PERMILLE,
            last_seen: [None; N],
        }
    }

    /// The same with another share handed out to two or more senders (per
    /// mille, at most 1000 = the whole capacity).
    pub fn with_headroom(mut self, permille: u64) -> Self {
        self.headroom_permille = permille.min(1000);
        self
    }

    /// Sender `slot` delivered data at `now`. Out-of-range slots are ignored.
    pub fn on_receive(&mut self, slot: usize, now: Instant) {
        if let Some(s) = self.last_seen.get_mut(slot) {
            *s = Some(now);
        }
    }

    /// Number of senders active at `now`.
    pub fn active(&self, now: Instant) -> u64 {
        self.last_seen.iter().fold(0u64, |n, s| {
            let active = s.is_some_and(|t| now.nanos_since(t) <= self.window_ns);
            n.saturating_add(u64::from(active))
        })
    }

    /// Each active sender's share in bytes per second.
    pub fn share_bps(&self, now: Instant) -> u64 {
        share_bps(self.capacity_bps, self.active(now), self.headroom_permille)
    }
}

/// Each of `active` senders' share of `capacity_bps` (bytes/s), handing out
/// `headroom_permille` / 1000 of it while two or more are active ([MR-CC-12],
/// [MR-CC-14]); the whole capacity to one sender or none. For a receiver that
/// counts its active senders itself (the driver, across CPUs).
pub fn share_bps(capacity_bps: u64, active: u64, headroom_permille: u64) -> u64 {
    let cap = if active >= 2 {
        capacity_bps.saturating_mul(headroom_permille.min(1000)) / 1000
    } else {
        capacity_bps
    };
    cap / active.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_among_active() {
        let mut f = FairShare::<4>::new(1000, 100).with_headroom(1000);
        assert_eq!(f.share_bps(Instant::ZERO), 1000);
        f.on_receive(0, Instant::from_nanos(10));
        f.on_receive(1, Instant::from_nanos(20));
        f.on_receive(9, Instant::from_nanos(20));
        assert_eq!(f.share_bps(Instant::from_nanos(50)), 500);
        assert_eq!(f.share_bps(Instant::from_nanos(115)), 1000);
    }

    // spec: MR-CC-12, MR-CC-14
    #[test]
    fn share_of_counted_senders() {
        // 40 Mbit/s = 5 MB/s among 2 and 3 senders, 95% handed out.
        assert_eq!(share_bps(5_000_000, 0, 950), 5_000_000);
        assert_eq!(share_bps(5_000_000, 1, 950), 5_000_000);
        assert_eq!(share_bps(5_000_000, 2, 950), 2_375_000);
        assert_eq!(share_bps(5_000_000, 3, 950), 1_583_333);
        assert_eq!(share_bps(u64::MAX, u64::MAX, u64::MAX), 0);
        assert_eq!(share_bps(0, 4, 950), 0);
    }

    // spec: MR-CC-14
    #[test]
    fn headroom_only_with_two_or_more_senders() {
        let mut f = FairShare::<4>::new(100_000, 100);
        f.on_receive(0, Instant::from_nanos(10));
        assert_eq!(f.share_bps(Instant::from_nanos(20)), 100_000);
        f.on_receive(1, Instant::from_nanos(20));
        assert_eq!(f.share_bps(Instant::from_nanos(30)), 95_000 / 2);
    }
}
