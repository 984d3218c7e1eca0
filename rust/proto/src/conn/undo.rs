// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Spurious path timeouts told by duplicates ([MR-CC-18]).
//!
//! A timeout whose packets were only late is proven spurious when an ACK names
//! one of them before its data is sent again ([MR-CC-17]). Mostly the data is
//! sent again first: the late ACK then names PSNs already resolved, and only
//! the receiver's duplicate counts tell. When every packet that a run of
//! timeouts had the sender send again comes back as a duplicate, the windows
//! those timeouts cut are restored, as TCP undoes a timeout from D-SACKs
//! (RFC 3708, Linux `undo_retrans`).
//!
//= Documentation/metaroce/spec.rst#late-packets

use crate::constants::MAX_PATHS;
use crate::timer::Instant;

/// The timeouts of a run, per path.
pub(crate) type PathTimeouts = [u8; MAX_PATHS];

/// The timeouts since the last resolved run, and their retransmissions not yet
/// reported back as duplicates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct TimeoutUndo {
    /// The timeouts of each path.
    timeouts: PathTimeouts,
    /// Retransmissions of packets the timeouts declared lost, less the
    /// duplicates reported since.
    resent: u32,
    /// Whether any was sent again.
    any_resent: bool,
    /// After this the run is over: the duplicates of its retransmissions would
    /// have been reported.
    until: Instant,
}

impl TimeoutUndo {
    /// Path `path` timed out at `now`; its retransmissions come back as
    /// duplicates within `window_ns` if it was spurious.
    pub(crate) fn on_timeout(&mut self, path: usize, now: Instant, window_ns: u64) {
        if self.active() && now > self.until {
            *self = Self::default();
        }
        if let Some(n) = self.timeouts.get_mut(path) {
            *n = n.saturating_add(1);
            self.until = now.add_nanos(window_ns);
        }
    }

    fn active(&self) -> bool {
        self.timeouts.iter().any(|&n| n > 0)
    }

    /// A packet a timeout had declared lost was sent again.
    pub(crate) fn on_resent(&mut self) {
        if self.active() {
            self.resent = self.resent.saturating_add(1);
            self.any_resent = true;
        }
    }

    /// Path `path`'s timeout was proven spurious otherwise ([MR-CC-17]).
    pub(crate) fn forget(&mut self, path: usize) {
        if let Some(n) = self.timeouts.get_mut(path) {
            *n = 0;
        }
        if !self.active() {
            *self = Self::default();
        }
    }

    /// The receiver reported `dups` more duplicates. Once every retransmission
    /// of the run has come back as a duplicate, ends the run and returns its
    /// timeouts, which were spurious.
    pub(crate) fn on_duplicates(&mut self, dups: u32, now: Instant) -> Option<PathTimeouts> {
        if !self.active() {
            return None;
        }
        if now > self.until {
            *self = Self::default();
            return None;
        }
        self.resent = self.resent.saturating_sub(dups);
        if !self.any_resent || self.resent > 0 {
            return None;
        }
        let timeouts = self.timeouts;
        *self = Self::default();
        Some(timeouts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(us: u64) -> Instant {
        Instant::from_nanos(us * 1000)
    }

    /// Timeouts `n` on each path of `paths`, none elsewhere.
    fn on(paths: &[(usize, u8)]) -> Option<PathTimeouts> {
        let mut t = PathTimeouts::default();
        for &(p, n) in paths {
            t[p] = n;
        }
        Some(t)
    }

    // spec: MR-CC-18
    #[test]
    fn every_retransmission_a_duplicate_undoes_the_run() {
        let mut u = TimeoutUndo::default();
        assert_eq!(
            u.on_duplicates(5, t(1)),
            None,
            "no timeout, nothing to undo"
        );
        u.on_timeout(2, t(10), 1_000_000);
        u.on_timeout(5, t(20), 1_000_000);
        u.on_timeout(5, t(25), 1_000_000);
        u.on_resent();
        u.on_resent();
        u.on_resent();
        assert_eq!(
            u.on_duplicates(2, t(30)),
            None,
            "one retransmission not yet back"
        );
        assert_eq!(u.on_duplicates(1, t(40)), on(&[(2, 1), (5, 2)]));
        assert_eq!(u, TimeoutUndo::default(), "the run ended");
    }

    #[test]
    fn a_retransmission_that_was_needed_keeps_the_cut() {
        let mut u = TimeoutUndo::default();
        u.on_timeout(0, t(10), 1_000_000);
        u.on_resent();
        u.on_resent();
        assert_eq!(u.on_duplicates(1, t(100)), None);
        // The second one filled a real hole: no duplicate within the window.
        assert_eq!(
            u.on_duplicates(1, t(2000)),
            None,
            "too late: the run is over"
        );
        // A new run starts clean.
        u.on_timeout(1, t(3000), 1_000_000);
        u.on_resent();
        assert_eq!(u.on_duplicates(1, t(3100)), on(&[(1, 1)]));
    }

    #[test]
    fn nothing_sent_again_proves_nothing() {
        let mut u = TimeoutUndo::default();
        u.on_timeout(3, t(10), 1_000_000);
        assert_eq!(u.on_duplicates(4, t(20)), None);
        u.on_resent();
        u.on_timeout(40, t(30), 1_000_000);
        assert_eq!(
            u.on_duplicates(1, t(40)),
            on(&[(3, 1)]),
            "an out-of-range path counts nothing"
        );
    }

    #[test]
    fn a_timeout_proven_spurious_otherwise_is_not_undone_twice() {
        let mut u = TimeoutUndo::default();
        u.on_timeout(1, t(10), 1_000_000);
        u.on_timeout(2, t(10), 1_000_000);
        u.on_resent();
        u.forget(1);
        assert_eq!(u.on_duplicates(1, t(20)), on(&[(2, 1)]));
        u.on_timeout(1, t(30), 1_000_000);
        u.on_resent();
        u.forget(1);
        assert_eq!(u, TimeoutUndo::default());
    }
}
