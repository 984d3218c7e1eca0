// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! A DCQCN reaction point, simplified: the baseline's congestion control.
//!
//! The receiver sends a CNP when a CE-marked packet arrives (at most one per
//! `cnp_interval_ns` per QP). On a CNP the sender remembers its rate as the
//! target and cuts the current rate by `alpha / 2`; alpha tracks how often CNPs
//! come. Every `timer_ns` without a CNP, alpha decays and the rate recovers:
//! `F` stages of fast recovery (halfway to the target), then additive, then
//! hyper increase of the target. Timer-driven only (no byte counter).

use crate::clock::{Time, US};

/// Reaction point parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DcqcnConfig {
    /// Line rate, bits per second (also the starting rate).
    pub line_rate_bps: f64,
    /// Smallest rate, bits per second.
    pub min_rate_bps: f64,
    /// Alpha gain `g`.
    pub g: f64,
    /// Additive increase of the target, bits per second.
    pub rai_bps: f64,
    /// Hyper increase of the target, bits per second.
    pub rhai_bps: f64,
    /// Rate increase and alpha decay period.
    pub timer_ns: Time,
    /// Fast recovery stages before additive increase.
    pub fast_recovery_stages: u32,
    /// Least time between CNPs a receiver sends for one QP.
    pub cnp_interval_ns: Time,
}

impl DcqcnConfig {
    /// Parameters after the DCQCN paper, with increases scaled to the line rate.
    pub fn for_line_rate(line_rate_bps: f64) -> Self {
        DcqcnConfig {
            line_rate_bps,
            min_rate_bps: line_rate_bps / 1000.0,
            g: 1.0 / 256.0,
            rai_bps: line_rate_bps * 0.005,
            rhai_bps: line_rate_bps * 0.05,
            timer_ns: 55 * US,
            fast_recovery_stages: 5,
            cnp_interval_ns: 50 * US,
        }
    }
}

/// One QP's reaction point.
#[derive(Clone, Debug)]
pub struct Dcqcn {
    cfg: DcqcnConfig,
    rc: f64,
    rt: f64,
    alpha: f64,
    stage: u32,
    next_timer: Option<Time>,
    /// CNPs received.
    pub cnps: u64,
}

impl Dcqcn {
    /// At line rate, no congestion seen.
    pub fn new(cfg: DcqcnConfig) -> Self {
        Dcqcn {
            cfg,
            rc: cfg.line_rate_bps,
            rt: cfg.line_rate_bps,
            alpha: 1.0,
            stage: 0,
            next_timer: None,
            cnps: 0,
        }
    }

    /// Current sending rate, bits per second.
    pub fn rate_bps(&self) -> f64 {
        self.rc
    }

    /// A CNP arrived.
    pub fn on_cnp(&mut self, now: Time) {
        self.cnps += 1;
        self.rt = self.rc;
        self.rc = (self.rc * (1.0 - self.alpha / 2.0)).max(self.cfg.min_rate_bps);
        self.alpha = (1.0 - self.cfg.g) * self.alpha + self.cfg.g;
        self.stage = 0;
        self.next_timer = Some(now + self.cfg.timer_ns);
    }

    /// When [`on_timeout`](Self::on_timeout) is due.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.next_timer
    }

    /// Runs the periodic alpha decay and rate increase.
    pub fn on_timeout(&mut self, now: Time) {
        while let Some(t) = self.next_timer.filter(|&t| t <= now) {
            self.alpha *= 1.0 - self.cfg.g;
            self.stage += 1;
            let f = self.cfg.fast_recovery_stages;
            if self.stage > 2 * f {
                self.rt += self.cfg.rhai_bps;
            } else if self.stage > f {
                self.rt += self.cfg.rai_bps;
            }
            self.rt = self.rt.min(self.cfg.line_rate_bps);
            self.rc = ((self.rt + self.rc) / 2.0).min(self.cfg.line_rate_bps);
            let at_line = self.rc >= self.cfg.line_rate_bps * 0.999;
            self.next_timer = if at_line && self.alpha < 0.01 {
                None
            } else {
                Some(t + self.cfg.timer_ns)
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_then_recover() {
        let mut d = Dcqcn::new(DcqcnConfig::for_line_rate(100e9));
        d.on_cnp(0);
        assert!((d.rate_bps() - 50e9).abs() < 1e6);
        d.on_timeout(55 * US);
        assert!((d.rate_bps() - 75e9).abs() < 1e6);
        d.on_timeout(100 * 55 * US);
        assert!(d.rate_bps() > 99e9);
    }
}
