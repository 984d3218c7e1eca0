// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Shared helpers of the simulator's integration tests.

#![allow(dead_code)]

use metaroce_sim::clock::{Time, MS};
use metaroce_sim::link::LinkConfig;
use metaroce_sim::network::NetworkConfig;
use metaroce_sim::rng::Rng;
use metaroce_sim::scenario::{build_world, pair_network, Transport};
use metaroce_sim::workload::{FlowSpec, MsgSpec, Op};
use metaroce_sim::world::{DriveLimits, World};

/// Faults applied to every core link.
#[derive(Clone, Copy, Debug, Default)]
pub struct Faults {
    pub loss: f64,
    pub dup: f64,
    pub corrupt: f64,
    pub jitter_ns: Time,
    /// Every `stall.0` ns, nothing arrives for `stall.1` ns ([`LinkConfig::stall`]).
    pub stall: (Time, Time),
}

impl Faults {
    pub fn apply(&self, l: &mut LinkConfig) {
        l.loss = self.loss;
        l.dup = self.dup;
        l.corrupt = self.corrupt;
        l.jitter_ns = self.jitter_ns;
        l.stall = self.stall;
    }
}

/// A pair network of `paths` paths with `faults` on every core link.
pub fn faulty_pair(paths: usize, faults: Faults) -> NetworkConfig {
    let mut net = pair_network(paths);
    for p in &mut net.paths {
        faults.apply(p);
    }
    net
}

/// `count` messages with every opcode and random lengths up to `max_len`.
pub fn mixed_flow(src: usize, dst: usize, count: usize, max_len: u32, seed: u64) -> FlowSpec {
    let mut r = Rng::derive(seed, 0xF10);
    let msgs = (0..count)
        .map(|_| {
            let op = match r.below(10) {
                0..=3 => Op::Write,
                4..=5 => Op::Send,
                6 => Op::WriteImm,
                7..=8 => Op::Read,
                _ => Op::FetchAdd,
            };
            let len = if op == Op::FetchAdd {
                8
            } else {
                1 + r.below(u64::from(max_len)) as u32
            };
            MsgSpec { op, len }
        })
        .collect();
    FlowSpec {
        src,
        dst,
        msgs,
        verify: true,
        after: None,
    }
}

/// Limits for tests: the stall bound is far above any RTO the core uses.
pub fn limits() -> DriveLimits {
    DriveLimits {
        stall_ns: 500 * MS,
        max_events: 5_000_000,
        max_time: 20_000 * MS,
    }
}

/// Drives `w` and asserts every flow completed correctly; returns the finish time.
pub fn drive_ok(w: &mut World, what: &str) -> Time {
    let r = w.drive(limits());
    let errors = w.errors();
    assert!(
        r.is_ok() && errors.is_empty(),
        "{what}: drive {r:?} after {} events; errors: {:#?}; stats: {:#?}",
        w.events(),
        &errors[..errors.len().min(10)],
        w.hosts.iter().map(|h| h.stats()).collect::<Vec<_>>()
    );
    r.unwrap()
}

/// Runs one mixed flow each way between two hosts over `paths` paths with `faults`.
pub fn run_pair(paths: u8, faults: Faults, seed: u64, count: usize, max_len: u32) -> World {
    let mut w = build_world(
        faulty_pair(paths as usize, faults),
        Transport::meta(paths),
        seed,
    );
    w.add_flow(mixed_flow(0, 1, count, max_len, seed));
    w.add_flow(mixed_flow(1, 0, count / 2, max_len, seed ^ 0xBEEF));
    drive_ok(
        &mut w,
        &format!("paths {paths} faults {faults:?} seed {seed}"),
    );
    w
}
