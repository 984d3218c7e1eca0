// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! ECN/loss AIMD with a window per path and one per connection.
//!
//! Increase: slow start below `ssthresh`, then one MSS per window of acked
//! bytes (about one MSS per RTT). Decrease: multiply by a fixed-point factor
//! (1/1024 units) on ECN-CE echo or loss, at most once per SRTT per window;
//! a timeout collapses the path window to its minimum. All integer.
//!
//= Documentation/metaroce/spec.rst#aimd

use super::{CongestionControl, Signal};
use crate::constants::{MAX_PATHS, SACK_BITS};
use crate::timer::Instant;
use pin_init::{init, init_array_from_fn, Init};

/// AIMD parameters. Factors are in 1/1024 units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AimdConfig {
    /// Bytes per full packet (additive increase step).
    pub mss: u32,
    /// Initial path window, bytes.
    pub init_path_cwnd: u32,
    /// Smallest path window, bytes.
    pub min_path_cwnd: u32,
    /// Largest path window, bytes.
    pub max_path_cwnd: u32,
    /// Initial connection window, bytes.
    pub init_conn_cwnd: u64,
    /// Smallest connection window, bytes.
    pub min_conn_cwnd: u64,
    /// Largest connection window, bytes.
    pub max_conn_cwnd: u64,
    /// Path window factor on ECN-CE (1/1024).
    pub ecn_beta: u32,
    /// Path window factor on loss (1/1024).
    pub loss_beta: u32,
    /// Connection window factor when a path window is cut on ECN-CE (1/1024).
    /// 1024 (no cut) by default: a mark trims only the path that saw it. A
    /// cut here on every path's mark, with the connection window growing one
    /// MSS per round trip, let the connection window rather than the links
    /// set the rate of paths on independently marked links.
    pub conn_beta: u32,
    /// Connection window factor when a path window is cut on loss (1/1024).
    /// Loss on a lossy fabric is mostly not congestion: it is left to the
    /// path windows by default (1024 = no cut).
    pub conn_loss_beta: u32,
    /// A loss cut is made at most once per this many SRTTs of the path (ECN
    /// cuts: once per SRTT). Random loss then cannot hold a window below
    /// about `8 * loss_interval_srtts` packets (`loss_beta` = 7/8, one packet
    /// per round trip of additive increase).
    pub loss_interval_srtts: u32,
}

impl AimdConfig {
    /// Defaults for a given MSS.
    pub const fn for_mss(mss: u32) -> Self {
        let mss = if mss == 0 { 1 } else { mss };
        AimdConfig {
            mss,
            init_path_cwnd: mss.saturating_mul(16),
            min_path_cwnd: mss,
            max_path_cwnd: mss.saturating_mul(SACK_BITS as u32),
            init_conn_cwnd: (mss as u64).saturating_mul(16),
            min_conn_cwnd: (mss as u64).saturating_mul(2),
            max_conn_cwnd: (mss as u64).saturating_mul((SACK_BITS * MAX_PATHS) as u64),
            ecn_beta: 512,
            loss_beta: 896,
            conn_beta: 1024,
            conn_loss_beta: 1024,
            loss_interval_srtts: 4,
        }
    }
}

impl AimdConfig {
    /// The same configuration for segments of `mss` bytes: every window
    /// keeps its size in segments (factors are unchanged).
    pub fn rescaled(self, mss: u32) -> Self {
        let mss = mss.max(1);
        let old = u64::from(self.mss.max(1));
        if u64::from(mss) == old {
            return self;
        }
        let scale64 = |v: u64| {
            let q = v.saturating_mul(u64::from(mss)) / old;
            if v > 0 {
                q.max(1)
            } else {
                0
            }
        };
        let scale32 = |v: u32| u32::try_from(scale64(u64::from(v))).unwrap_or(u32::MAX);
        AimdConfig {
            mss,
            init_path_cwnd: scale32(self.init_path_cwnd),
            min_path_cwnd: scale32(self.min_path_cwnd),
            max_path_cwnd: scale32(self.max_path_cwnd),
            init_conn_cwnd: scale64(self.init_conn_cwnd),
            min_conn_cwnd: scale64(self.min_conn_cwnd),
            max_conn_cwnd: scale64(self.max_conn_cwnd),
            ..self
        }
    }
}

impl Default for AimdConfig {
    fn default() -> Self {
        Self::for_mss(4096)
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Window {
    cwnd: u64,
    ssthresh: u64,
    acc: u64,
    last_decrease: Option<Instant>,
    /// `(cwnd, ssthresh)` before the timeouts since the last other change.
    before_timeout: Option<(u64, u64)>,
}

impl Window {
    fn new(init: u64) -> Self {
        Window {
            cwnd: init,
            ssthresh: u64::MAX,
            acc: 0,
            last_decrease: None,
            before_timeout: None,
        }
    }

    fn increase(&mut self, bytes: u64, mss: u64, max: u64) {
        if self.cwnd < self.ssthresh {
            self.cwnd = self.cwnd.saturating_add(bytes);
        } else {
            self.acc = self.acc.saturating_add(bytes);
            if self.cwnd > 0 && self.acc >= self.cwnd {
                self.acc = self.acc.saturating_sub(self.cwnd);
                self.cwnd = self.cwnd.saturating_add(mss);
            }
        }
        self.cwnd = self.cwnd.min(max);
    }

    fn decrease(&mut self, beta: u32, min: u64, interval_ns: u64, now: Instant) -> bool {
        if let Some(t) = self.last_decrease {
            if now.nanos_since(t) < interval_ns {
                return false;
            }
        }
        self.cwnd = (self.cwnd.saturating_mul(u64::from(beta)) / 1024).max(min);
        self.ssthresh = self.cwnd;
        self.acc = 0;
        self.last_decrease = Some(now);
        self.before_timeout = None;
        true
    }
}

/// The default controller.
#[derive(Clone, Debug)]
pub struct Aimd {
    cfg: AimdConfig,
    paths: [Window; MAX_PATHS],
    conn: Window,
}

impl Aimd {
    /// A controller with every window at its initial size.
    pub fn new(cfg: AimdConfig) -> Self {
        Aimd {
            cfg,
            paths: [Window::new(u64::from(cfg.init_path_cwnd)); MAX_PATHS],
            conn: Window::new(cfg.init_conn_cwnd),
        }
    }

    /// [`Aimd::new`] as an in-place initializer (the controller is about
    /// 750 bytes), for [`Connection::init`](crate::Connection::init).
    pub fn init(cfg: AimdConfig) -> impl Init<Self> {
        init!(Aimd {
            cfg,
            paths <- init_array_from_fn(|_| Window::new(u64::from(cfg.init_path_cwnd))),
            conn: Window::new(cfg.init_conn_cwnd),
        })
    }
}

impl CongestionControl for Aimd {
    fn on_sent(&mut self, _path: usize, _bytes: u32, _now: Instant) {}

    fn on_ack(&mut self, path: usize, bytes: u32, _srtt_ns: u64, _now: Instant) {
        let mss = u64::from(self.cfg.mss);
        if let Some(w) = self.paths.get_mut(path) {
            w.increase(u64::from(bytes), mss, u64::from(self.cfg.max_path_cwnd));
        }
        self.conn
            .increase(u64::from(bytes), mss, self.cfg.max_conn_cwnd);
    }

    fn on_congestion(&mut self, path: usize, signal: Signal, srtt_ns: u64, now: Instant) {
        let min = u64::from(self.cfg.min_path_cwnd);
        let Some(w) = self.paths.get_mut(path) else {
            return;
        };
        let conn_beta = match signal {
            Signal::Ecn(_) if w.decrease(self.cfg.ecn_beta, min, srtt_ns, now) => {
                self.cfg.conn_beta
            }
            Signal::Loss(_) => {
                let interval =
                    srtt_ns.saturating_mul(u64::from(self.cfg.loss_interval_srtts.max(1)));
                if !w.decrease(self.cfg.loss_beta, min, interval, now) {
                    return;
                }
                self.cfg.conn_loss_beta
            }
            Signal::Timeout => {
                w.before_timeout.get_or_insert((w.cwnd, w.ssthresh));
                w.ssthresh = (w.cwnd / 2).max(min);
                w.cwnd = min;
                w.acc = 0;
                w.last_decrease = Some(now);
                return;
            }
            _ => return,
        };
        if conn_beta < 1024 {
            self.conn
                .decrease(conn_beta, self.cfg.min_conn_cwnd, srtt_ns, now);
        }
    }

    fn on_spurious_timeout(&mut self, path: usize) {
        if let Some(w) = self.paths.get_mut(path) {
            if let Some((cwnd, ssthresh)) = w.before_timeout.take() {
                w.cwnd = w.cwnd.max(cwnd);
                w.ssthresh = ssthresh;
            }
        }
    }

    fn on_path_reset(&mut self, path: usize) {
        if let Some(w) = self.paths.get_mut(path) {
            *w = Window::new(u64::from(self.cfg.min_path_cwnd).saturating_mul(2));
        }
    }

    fn path_window(&self, path: usize) -> u32 {
        self.paths
            .get(path)
            .map_or(0, |w| u32::try_from(w.cwnd).unwrap_or(u32::MAX))
    }

    fn conn_window(&self) -> u64 {
        self.conn.cwnd
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(us: u64) -> Instant {
        Instant::from_nanos(us * 1000)
    }

    // spec: MR-CC-2, MR-CC-4
    #[test]
    fn slow_start_then_linear() {
        let mut a = Aimd::new(AimdConfig::for_mss(1000));
        assert_eq!(a.path_window(0), 16_000);
        a.on_ack(0, 4000, 10_000, t(1));
        assert_eq!(a.path_window(0), 20_000);
        a.on_congestion(0, Signal::Loss(1000), 10_000, t(2));
        assert_eq!(a.path_window(0), 17_500);
        // Additive: one MSS per window's worth of acked bytes.
        a.on_ack(0, 17_500, 10_000, t(3));
        assert_eq!(a.path_window(0), 18_500);
    }

    // spec: MR-CC-3, MR-CC-5, MR-CC-16
    #[test]
    fn decrease_once_per_rtt() {
        let mut a = Aimd::new(AimdConfig::for_mss(1000));
        let conn = a.conn_window();
        a.on_congestion(1, Signal::Ecn(3), 10_000, t(100));
        assert_eq!(a.path_window(1), 8000);
        a.on_congestion(1, Signal::Ecn(3), 10_000, t(105));
        assert_eq!(a.path_window(1), 8000);
        a.on_congestion(1, Signal::Ecn(3), 10_000, t(111));
        assert_eq!(a.path_window(1), 4000);
        assert_eq!(a.conn_window(), conn, "by default ECN trims only the path");
    }

    // spec: MR-CC-7, MR-CC-8
    #[test]
    fn timeout_and_floor() {
        let mut a = Aimd::new(AimdConfig::for_mss(1000));
        a.on_congestion(2, Signal::Timeout, 0, t(1));
        assert_eq!(a.path_window(2), 1000);
        for i in 0..10 {
            a.on_congestion(2, Signal::Ecn(1), 0, t(2 + i));
        }
        assert_eq!(a.path_window(2), 1000);
        assert_eq!(a.path_window(99), 0);
        a.on_path_reset(2);
        assert_eq!(a.path_window(2), 2000);
    }

    // spec: MR-CC-17
    #[test]
    fn spurious_timeouts_are_undone_until_another_decrease() {
        let mut a = Aimd::new(AimdConfig::for_mss(1000));
        a.on_ack(0, 4000, 10_000, t(1));
        a.on_congestion(0, Signal::Timeout, 10_000, t(2));
        a.on_congestion(0, Signal::Timeout, 10_000, t(3));
        assert_eq!(a.path_window(0), 1000);
        a.on_ack(0, 1000, 10_000, t(4));
        a.on_spurious_timeout(0);
        assert_eq!(
            a.path_window(0),
            20_000,
            "the window before the first timeout"
        );
        a.on_spurious_timeout(0);
        assert_eq!(a.path_window(0), 20_000);
        // A loss or ECN cut in between makes the old window stale.
        a.on_congestion(1, Signal::Timeout, 10_000, t(5));
        a.on_congestion(1, Signal::Ecn(1), 10_000, t(200));
        a.on_spurious_timeout(1);
        assert_eq!(a.path_window(1), 1000);
    }

    // spec: MR-CC-15, MR-CC-16
    #[test]
    fn loss_cuts_path_rarely_and_not_the_connection() {
        let mut cfg = AimdConfig::for_mss(1000);
        cfg.conn_beta = 819;
        let mut a = Aimd::new(cfg);
        let conn = a.conn_window();
        a.on_congestion(0, Signal::Loss(1000), 10_000, t(100));
        assert_eq!(a.path_window(0), 14_000);
        // Within 4 SRTTs of the last loss cut: ignored; after: cut again.
        a.on_congestion(0, Signal::Loss(1000), 10_000, t(130));
        assert_eq!(a.path_window(0), 14_000);
        a.on_congestion(0, Signal::Loss(1000), 10_000, t(141));
        assert_eq!(a.path_window(0), 12_250);
        assert_eq!(
            a.conn_window(),
            conn,
            "random loss does not shrink the connection window"
        );
        // ECN cuts both when `conn_beta` < 1024.
        a.on_congestion(1, Signal::Ecn(1), 10_000, t(200));
        assert_eq!(a.conn_window(), conn * 819 / 1024);
    }

    // spec: MR-CC-13
    #[test]
    fn rescaled_keeps_packets() {
        let c = AimdConfig::for_mss(4096).rescaled(1024);
        assert_eq!(c, AimdConfig::for_mss(1024));
        assert_eq!(
            AimdConfig::for_mss(4096).rescaled(4096),
            AimdConfig::for_mss(4096)
        );
    }
}
