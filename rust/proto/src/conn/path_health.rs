// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Steering away from paths that stay worse than the others ([MR-PATH-8]).
//!
//! Each path is judged once per [`HEALTH_EPOCH`] packets it sent, on its *bad*
//! packets: lost, or acknowledged with an ECN-CE mark. It is worse in that epoch
//! when it had at least [`MIN_BAD`] of them and their share is at least
//! [`WORSE_FACTOR`] times that of the best other path's last epoch (or of
//! [`FLOOR_PER_EPOCH`] bad packets per epoch, if more). A path worse in
//! [`WORSE_EPOCHS`] epochs in a row is retired as after timeouts ([MR-PATH-5]):
//! a new source port, so another ECMP route (off a lossy or hot link, or off a
//! link it shares with other paths while a link of another path is clear); its
//! RTT restarts and its PSNs continue ([MR-PATH-6]). Unlike a dead path it keeps
//! its window: it still delivers, and its window adapts to the new route.
//!
//! Loss or marking spread evenly over the paths (random loss, or the
//! receiver's own link congested) makes no path worse, nor does any until
//! another path finished an epoch. A path that lands on a bad link again is
//! moved again two epochs later.
//!
//! A link that failed may come back, and nothing tells the sender: its paths
//! were moved off it to random ports, and random ports return to it only by
//! chance. So the port of the last path retired as dead ([MR-PATH-5]) is tried
//! again ([MR-PATH-13]) after the connection sent [`PROBE_AFTER`] more packets:
//! the path that did worst in its last epoch moves to it, keeping its window.
//! If the link is still dead, that path times out and is retired again, and the
//! next try waits twice as long (at most [`PROBE_MAX_SHIFT`] doublings); once a
//! path on the port finishes a health epoch, the port is alive again.
//!
//= Documentation/metaroce/spec.rst#path-retirement

use super::store::QpStore;
use super::Connection;
use crate::cc::CongestionControl;
use crate::path::PathStats;
use crate::Instant;

/// Packets a path sends between two judgements.
pub(crate) const HEALTH_EPOCH: u64 = 512;
/// Bad packets in an epoch below which a path is never worse.
pub(crate) const MIN_BAD: u64 = 4;
/// How many times the best other path's share of bad packets a worse path has.
pub(crate) const WORSE_FACTOR: u64 = 4;
/// The best other path counts as having at least this many bad packets per epoch.
pub(crate) const FLOOR_PER_EPOCH: u64 = 1;
/// Worse epochs in a row that retire a path.
pub(crate) const WORSE_EPOCHS: u8 = 2;

/// Packets the connection sends before it tries a dead path's port again.
pub(crate) const PROBE_AFTER: u64 = 2 * HEALTH_EPOCH;
/// Doublings of [`PROBE_AFTER`] after tries that found the port still dead.
pub(crate) const PROBE_MAX_SHIFT: u8 = 2;

/// Packets a path sends in a pace epoch: the time they take, per packet, is
/// what a rebalancing compares ([MR-PATH-14]). Shorter than [`HEALTH_EPOCH`]
/// (whose count of bad packets needs many packets to mean anything) so that a
/// connection of a few seconds finds an idle link in time: at 20 Mbit/s per link
/// a 512-packet epoch of one of 8 paths takes about 0.6 s. (128 packets with a
/// factor of 1.6, to stay above their noise, found idle links sooner in the
/// simulator, but left 3 paths against 2 on a link, 1.5, unmoved: the VM's
/// fabric.sh saw a repaired link stay empty.)
pub(crate) const PACE_EPOCH: u64 = 256;
/// Pace epochs finished, per path, between two rebalancings ([MR-PATH-14]).
pub(crate) const REBALANCE_EPOCHS: u32 = 1;
/// How many times as long as the quickest path's the slowest path's last pace
/// epoch took (per packet) when a rebalancing moves it, as a fraction.
pub(crate) const REBALANCE_FACTOR: (u64, u64) = (7, 5);

/// The source port of the last path retired as dead, and when to try it again
/// ([MR-PATH-13]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct DeadPort {
    /// The port (0: none).
    pub(crate) port: u16,
    /// The connection's packet count at which to try it; `None` while a path
    /// is on it.
    pub(crate) due: Option<u64>,
    /// Tries that found it dead, in a row.
    pub(crate) shift: u8,
}

impl DeadPort {
    /// A path on `port` was retired as dead when the connection had sent `sent`
    /// packets.
    pub(crate) fn on_dead(&mut self, port: u16, sent: u64) {
        let shift = if port == self.port && self.port != 0 {
            self.shift.saturating_add(1).min(PROBE_MAX_SHIFT)
        } else {
            0
        };
        *self = DeadPort {
            port,
            due: Some(sent.saturating_add(PROBE_AFTER << shift)),
            shift,
        };
    }
}

/// A path's bad packets so far: declared lost by SACK, or ECN-CE marked.
pub(crate) fn bad(s: &PathStats) -> u64 {
    s.lost.saturating_add(s.ecn_marks)
}

/// Whether `a_bad / a_sent < b_bad / b_sent` (`a_sent`, `b_sent` > 0).
fn lower(a_bad: u64, a_sent: u64, b_bad: u64, b_sent: u64) -> bool {
    u128::from(a_bad).saturating_mul(u128::from(b_sent))
        < u128::from(b_bad).saturating_mul(u128::from(a_sent))
}

impl<C: CongestionControl, S: QpStore> Connection<C, S> {
    /// Judges every path whose epoch is over; retires those that stayed worse.
    pub(crate) fn check_path_health(&mut self, now: Instant) {
        let n = usize::from(self.cfg.paths).min(self.paths.len());
        if n < 2 {
            return;
        }
        for i in 0..n {
            let Some(p) = self.paths.get_mut(i) else {
                return;
            };
            // Pace epochs ([MR-PATH-14]), timed from the first ACK on the port.
            let since = *p.health.pace_since.get_or_insert(now);
            let paced = p.stats.sent.saturating_sub(p.health.pace_sent);
            if paced >= PACE_EPOCH {
                p.health.pace = (now.nanos_since(since), paced);
                p.health.pace_since = Some(now);
                p.health.pace_sent = p.stats.sent;
                self.judged = self.judged.saturating_add(1);
            }
            let Some(p) = self.paths.get_mut(i) else {
                return;
            };
            let sent = p.stats.sent.saturating_sub(p.health.sent);
            if sent < HEALTH_EPOCH {
                continue;
            }
            let here = bad(&p.stats).saturating_sub(p.health.bad);
            // The other path with the lowest share of bad packets in its last epoch.
            let mut best: Option<(u64, u64)> = None;
            for (j, q) in self.paths.iter().enumerate().take(n) {
                let (b, s) = q.health.last;
                if j != i && s > 0 && best.is_none_or(|(bb, bs)| lower(b, s, bb, bs)) {
                    best = Some((b, s));
                }
            }
            let x = |a: u64, b: u64, c: u64| {
                u128::from(a)
                    .saturating_mul(u128::from(b))
                    .saturating_mul(u128::from(c))
            };
            // here / sent >= WORSE_FACTOR * max(bb / bs, FLOOR_PER_EPOCH / HEALTH_EPOCH)
            let worse = best.is_some_and(|(bb, bs)| {
                here >= MIN_BAD
                    && x(here, bs, 1) >= x(WORSE_FACTOR, bb, sent)
                    && x(here, HEALTH_EPOCH, 1) >= x(WORSE_FACTOR, FLOOR_PER_EPOCH, sent)
            });
            let Some(p) = self.paths.get_mut(i) else {
                return;
            };
            p.health.last = (here, sent);
            p.health.sent = p.stats.sent;
            p.health.bad = bad(&p.stats);
            p.health.worse = if worse {
                p.health.worse.saturating_add(1)
            } else {
                0
            };
            if p.dead_port_alive(self.dead_port.port) {
                // A whole epoch on the port that died: it lives again.
                self.dead_port = DeadPort::default();
            }
            if p.health.worse >= WORSE_EPOCHS {
                self.retire_path(i, false);
            }
        }
        self.try_dead_port(n);
        if self.judged >= REBALANCE_EPOCHS.saturating_mul(n as u32) {
            self.judged = 0;
            self.rebalance(n);
        }
    }

    /// Moves the path whose last pace epoch took longest for its packets to a
    /// new port when it took [`REBALANCE_FACTOR`] times as long as the quickest
    /// path's ([MR-PATH-14]): its link carries more of the connection's paths, or
    /// other traffic, while some link may carry none of them.
    fn rebalance(&mut self, n: usize) {
        // (path, ns, packets) of the slowest and of the quickest.
        let mut slow: Option<(usize, u64, u64)> = None;
        let mut quick: Option<(u64, u64)> = None;
        for i in 0..n {
            let Some(p) = self.paths.get(i) else {
                break;
            };
            let (ns, s) = p.health.pace;
            if ns == 0 || s == 0 {
                // No pace epoch on its port yet (just moved, or dead): left out.
                continue;
            }
            if slow.is_none_or(|(_, a, b)| lower(a, b, ns, s)) {
                slow = Some((i, ns, s));
            }
            if quick.is_none_or(|(a, b)| lower(ns, s, a, b)) {
                quick = Some((ns, s));
            }
        }
        let (Some((i, sn, ss)), Some((qn, qs))) = (slow, quick) else {
            return;
        };
        // sn / ss >= (REBALANCE_FACTOR.0 / REBALANCE_FACTOR.1) * qn / qs
        let (num, den) = REBALANCE_FACTOR;
        let crowded = u128::from(sn)
            .saturating_mul(u128::from(qs))
            .saturating_mul(u128::from(den))
            >= u128::from(qn)
                .saturating_mul(u128::from(ss))
                .saturating_mul(u128::from(num));
        if crowded {
            self.retire_path(i, false);
        }
    }

    /// Packets sent on all paths so far.
    pub(crate) fn packets_sent(&self) -> u64 {
        // Here and below, plain loops (over indices where the index is needed): in
        // the overflow-checked kernel build the counters of `Take::try_fold` (behind
        // `fold`, `any`) and of `Enumerate` are not proven not to wrap, which leaves
        // panic paths (kcheck/no-panic.sh).
        let mut total = 0u64;
        for p in self.paths.iter().take(usize::from(self.cfg.paths)) {
            total = total.saturating_add(p.stats.sent);
        }
        total
    }

    /// Moves the path that did worst in its last epoch onto the dead port once
    /// its try is due ([MR-PATH-13]).
    fn try_dead_port(&mut self, n: usize) {
        let d = self.dead_port;
        let Some(due) = d.due else {
            return;
        };
        if d.port == 0 || self.packets_sent() < due {
            return;
        }
        for p in self.paths.iter().take(n) {
            if p.sport == d.port {
                // A path drew it again by chance: it is being tried.
                self.dead_port.due = None;
                return;
            }
        }
        // The worst share of bad packets; the first path if none had any.
        let mut worst: (usize, u64, u64) = (0, 0, 1);
        for i in 0..n {
            let Some(p) = self.paths.get(i) else {
                break;
            };
            let (b, s) = p.health.last;
            if s > 0 && lower(worst.1, worst.2, b, s) {
                worst = (i, b, s);
            }
        }
        self.dead_port.due = None;
        self.move_path(worst.0, d.port, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Config, Connection, Instant};
    extern crate std;
    use pin_init::InPlaceInit;
    use std::boxed::Box;

    /// A connection built in place (the only constructor).
    fn boxed(cfg: Config) -> Box<Connection> {
        Box::init(Connection::init_aimd(cfg, Instant::ZERO, 7)).unwrap_or_else(|e| match e {})
    }

    fn conn() -> Box<Connection> {
        let mut cfg = Config::new(1);
        cfg.paths = 2;
        boxed(cfg)
    }

    /// Path `i` sent an epoch with `bad` losses since its last judgement.
    fn epoch(c: &mut Connection, i: usize, bad: u64) {
        let p = &mut c.paths[i];
        p.stats.sent += HEALTH_EPOCH;
        p.stats.lost += bad;
    }

    // spec: MR-PATH-8
    #[test]
    fn a_path_worse_for_two_epochs_moves() {
        a_path_worse_for_two_epochs_moves_();
    }

    fn a_path_worse_for_two_epochs_moves_() {
        let mut c = conn();
        let (port, window) = (c.path_port(0), c.cc().path_window(0));
        // The first round gives the other path's baseline, two worse ones follow.
        for round in 0..3 {
            assert_eq!(c.paths[0].stats.retired, 0, "round {round}");
            epoch(&mut c, 0, 20);
            epoch(&mut c, 1, 1);
            c.check_path_health(Instant::ZERO);
        }
        assert_eq!(c.paths[0].stats.retired, 1);
        assert_ne!(c.path_port(0), port);
        assert_eq!(
            c.cc().path_window(0),
            window,
            "a live path keeps its window"
        );
        assert_eq!(c.paths[1].stats.retired, 0);
        assert!(matches!(
            c.poll_event(),
            Some(crate::Event::PathRetired { path: 0, .. })
        ));
    }

    // spec: MR-PATH-8
    #[test]
    fn even_loss_moves_nothing() {
        even_loss_moves_nothing_();
    }

    fn even_loss_moves_nothing_() {
        let mut c = conn();
        for _ in 0..8 {
            epoch(&mut c, 0, 20);
            epoch(&mut c, 1, 12);
            c.check_path_health(Instant::ZERO);
        }
        // Few losses, or one path, never.
        for _ in 0..8 {
            epoch(&mut c, 0, MIN_BAD - 1);
            epoch(&mut c, 1, 0);
            c.check_path_health(Instant::ZERO);
        }
        assert_eq!(c.paths[0].stats.retired + c.paths[1].stats.retired, 0);
        let mut one = boxed(Config::new(1));
        one.cfg.paths = 1;
        for _ in 0..4 {
            epoch(&mut one, 0, 100);
            one.check_path_health(Instant::ZERO);
        }
        assert_eq!(one.paths[0].stats.retired, 0);
    }

    // spec: MR-PATH-13
    #[test]
    fn a_dead_port_is_tried_again_with_backoff() {
        a_dead_port_is_tried_again_with_backoff_();
    }

    fn a_dead_port_is_tried_again_with_backoff_() {
        let mut c = conn();
        let dead = c.path_port(0).unwrap();
        c.retire_path(0, true);
        assert_ne!(c.path_port(0), Some(dead));
        // Path 1 does worse than path 0 and takes the port once it is due.
        let mut tries = 0;
        let mut gaps = [0u64; 4];
        let mut since = 0;
        for _ in 0..64 {
            epoch(&mut c, 0, 0);
            epoch(&mut c, 1, MIN_BAD - 1);
            since += 2 * HEALTH_EPOCH;
            c.check_path_health(Instant::ZERO);
            assert_ne!(c.path_port(0), Some(dead));
            if c.path_port(1) == Some(dead) {
                gaps[tries] = since;
                tries += 1;
                since = 0;
                // Still dead: the try times out and the path is retired again.
                c.retire_path(1, true);
                if tries == gaps.len() {
                    break;
                }
            }
        }
        assert_eq!(tries, gaps.len(), "tries at {gaps:?}");
        assert_eq!(gaps[0], PROBE_AFTER.max(2 * HEALTH_EPOCH));
        assert!(gaps[1] > gaps[0] && gaps[2] > gaps[1], "{gaps:?}");
        assert_eq!(gaps[3], gaps[2], "the backoff is bounded: {gaps:?}");
        assert_eq!(gaps[2], PROBE_AFTER << PROBE_MAX_SHIFT);
        // Alive: after a whole epoch on the port, it is not tried again.
        let port = c.path_port(1).unwrap();
        c.dead_port = DeadPort::default();
        c.move_path(1, dead, false);
        c.dead_port.port = dead;
        for _ in 0..16 {
            epoch(&mut c, 0, 0);
            epoch(&mut c, 1, 0);
            c.check_path_health(Instant::ZERO);
        }
        assert_eq!(c.dead_port, DeadPort::default());
        assert_eq!(c.path_port(1), Some(dead));
        assert_ne!(port, dead);
    }

    // spec: MR-PATH-14
    #[test]
    fn the_slowest_path_moves_when_much_slower() {
        the_slowest_path_moves_when_much_slower_();
    }

    fn the_slowest_path_moves_when_much_slower_() {
        let ms = |t: u64| Instant::from_nanos(t * 1_000_000);
        let mut cfg = Config::new(1);
        cfg.paths = 4;
        let mut c = boxed(cfg);
        let ports: [_; 4] = core::array::from_fn(|i| c.path_port(i));
        // Pace epochs start at the first ACK and are timed.
        c.check_path_health(ms(10));
        for i in 0..4 {
            c.paths[i].stats.sent += PACE_EPOCH;
        }
        c.check_path_health(ms(110));
        assert!((0..4).all(|i| c.paths[i].health.pace == (100_000_000, PACE_EPOCH)));
        // Path 3's epoch took 1.3 times as long as the others' (3 paths on its
        // link against 2): under the factor, nothing moves.
        let set = |c: &mut Connection, ns: [u64; 4]| {
            for (i, n) in ns.into_iter().enumerate() {
                c.paths[i].health.pace = (n, if n == 0 { 0 } else { PACE_EPOCH });
            }
        };
        set(&mut c, [100, 100, 110, 130]);
        c.rebalance(4);
        assert_eq!(ports, core::array::from_fn(|i| c.path_port(i)));
        // Twice as long (a link for 2 paths against one for 1): it moves, with
        // its window; a path without an epoch on its port is left out.
        let window = c.cc().path_window(3);
        set(&mut c, [0, 100, 110, 200]);
        c.rebalance(4);
        assert_ne!(c.path_port(3), ports[3]);
        assert_eq!(c.cc().path_window(3), window);
        assert_eq!(c.paths[3].stats.retired, 1);
        assert_eq!(
            ports[..3],
            core::array::from_fn::<_, 3, _>(|i| c.path_port(i))
        );
        // Alone, a path is never compared.
        set(&mut c, [0, 0, 0, 500]);
        let now: [_; 4] = core::array::from_fn(|i| c.path_port(i));
        c.rebalance(4);
        assert_eq!(now, core::array::from_fn(|i| c.path_port(i)));
    }
}
