// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! End-to-end correctness of the MetaRoCE core in the simulator: every byte
//! delivered equals every byte sent, and every work request completes exactly
//! once and in order per QP, under loss, reordering, duplication, corruption,
//! path failure and incast, for many seeds.

mod common;

use common::*;
use metaroce_sim::clock::{MS, US};
use metaroce_sim::network::PathFault;
use metaroce_sim::scenario::{build_world, incast_network, pair_network, Transport};
use metaroce_sim::workload::FlowSpec;

/// spec: MR-CMP-1, MR-CMP-3, MR-CMP-4, MR-CMP-5, MR-ATOM-1, MR-PLC-6
#[test]
fn lossless_one_and_eight_paths() {
    for paths in [1, 8] {
        run_pair(paths, Faults::default(), 1, 40, 64 << 10);
    }
}

/// spec: MR-SACK-17, MR-RTX-1, MR-RTX-2, MR-CMP-4, MR-CMP-5, MR-ATOM-1
#[test]
fn loss_sweep_many_seeds() {
    for (loss, seeds) in [(0.001, 6), (0.01, 12), (0.05, 12), (0.20, 6)] {
        for paths in [1, 8] {
            for seed in 0..seeds {
                run_pair(
                    paths,
                    Faults {
                        loss,
                        ..Default::default()
                    },
                    100 + seed,
                    24,
                    48 << 10,
                );
            }
        }
    }
}

/// spec: MR-CMP-1, MR-CMP-2, MR-CMP-3
#[test]
fn heavy_reordering() {
    for seed in 0..6 {
        // Up to 20 us of jitter per hop: far more than the 8 us base RTT.
        let f = Faults {
            jitter_ns: 20 * US,
            ..Default::default()
        };
        run_pair(8, f, 200 + seed, 24, 48 << 10);
        run_pair(1, f, 300 + seed, 12, 48 << 10);
    }
}

/// spec: MR-CMP-5, MR-ATOM-1, MR-SEC-5
#[test]
fn duplication_and_corruption() {
    for seed in 0..6 {
        let f = Faults {
            dup: 0.05,
            corrupt: 0.05,
            ..Default::default()
        };
        run_pair(8, f, 400 + seed, 24, 48 << 10);
        run_pair(1, f, 500 + seed, 12, 48 << 10);
    }
}

#[test]
fn all_faults_together() {
    for seed in 0..16 {
        let f = Faults {
            loss: 0.03,
            dup: 0.02,
            corrupt: 0.02,
            jitter_ns: 10 * US,
            ..Default::default()
        };
        run_pair(
            if seed % 2 == 0 { 8 } else { 3 },
            f,
            600 + seed,
            24,
            48 << 10,
        );
    }
}

/// spec: MR-VAL-1, MR-PLC-1
/// Random path counts (1..=16), fault mixes and message mixes.
/// spec: MR-CMP-4, MR-CMP-5, MR-ATOM-1
#[test]
fn random_configurations() {
    for seed in 0..32u64 {
        let mut r = metaroce_sim::rng::Rng::derive(seed, 0xC0F);
        let paths = 1 + r.below(16) as u8;
        let f = Faults {
            loss: [0.0, 0.001, 0.01, 0.05, 0.1][r.below(5) as usize],
            dup: [0.0, 0.01, 0.05][r.below(3) as usize],
            corrupt: [0.0, 0.01][r.below(2) as usize],
            jitter_ns: [0, 2 * US, 10 * US][r.below(3) as usize],
            stall: [(0, 0), (0, 0), (MS, 300 * US)][r.below(3) as usize],
        };
        run_pair(
            paths,
            f,
            1500 + seed,
            8 + r.below(24) as usize,
            1 + r.below(96 << 10) as u32,
        );
    }
}

#[test]
fn corruption_without_checksum_never_panics() {
    // Bit flips reach the core (as if the UDP checksum were off): it must
    // validate, never panic, and the run must end (bytes may then differ).
    for seed in 0..4 {
        let f = Faults {
            corrupt: 0.05,
            ..Default::default()
        };
        let mut t = Transport::meta(8);
        if let Transport::Meta(h) = &mut t {
            h.verify_checksum = false;
        }
        let mut w = build_world(faulty_pair(8, f), t, 700 + seed);
        w.add_flow(mixed_flow(0, 1, 16, 32 << 10, seed));
        let _ = w.drive(limits());
    }
}

/// spec: MR-CC-17, MR-CC-18
#[test]
fn stalls_longer_than_the_rto_are_undone() {
    // Every 1 ms nothing arrives for 300 us, three times the 100 us minimum RTO, as
    // when a virtual CPU is held back: timeouts fire with nothing lost, and are
    // undone, mostly after the data was sent again.
    for seed in 0..4 {
        let f = Faults {
            stall: (MS, 300 * US),
            ..Default::default()
        };
        let w = run_pair(8, f, 1600 + seed, 400, 64 << 10);
        let (timeouts, spurious) = w.hosts.iter().map(|h| h.stats()).fold((0, 0), |(t, s), h| {
            (t + h.timeouts, s + h.spurious_timeouts)
        });
        assert!(timeouts > 0, "seed {seed}: the stalls caused no timeout");
        assert!(
            spurious * 10 >= timeouts * 9,
            "seed {seed}: {spurious} of {timeouts} timeouts undone"
        );
    }
}

/// spec: MR-PATH-5, MR-PATH-6, MR-PATH-7, MR-RTX-7
#[test]
fn blackholed_path_mid_transfer() {
    for seed in 0..4u64 {
        let mut w = build_world(pair_network(8), Transport::meta(8), 800 + seed);
        w.add_flow(FlowSpec::writes(0, 1, 48, 64 << 10, true));
        w.add_flow(FlowSpec::writes(1, 0, 8, 64 << 10, true));
        // A path that carries traffic (ECMP decides which ports land on it).
        w.schedule_fault(PathFault {
            path: seed as usize % 8,
            down_at: 30 * US,
            up_at: None,
        });
        drive_ok(&mut w, &format!("blackhole seed {seed}"));
    }
}

#[test]
fn blackhole_then_recovery() {
    for seed in 0..3u64 {
        let mut w = build_world(pair_network(8), Transport::meta(8), 900 + seed);
        w.add_flow(FlowSpec::writes(0, 1, 48, 64 << 10, true));
        for k in 0..4 {
            w.schedule_fault(PathFault {
                path: k,
                down_at: 20 * US,
                up_at: Some(400 * US),
            });
        }
        drive_ok(&mut w, &format!("blackhole+recovery seed {seed}"));
    }
}

/// spec: MR-RTX-5, MR-RTX-8
#[test]
fn single_path_outage_recovers() {
    // One path only, down for 3 ms: the core must ride it out (retries with
    // backoff), not fail the work requests.
    let mut w = build_world(pair_network(1), Transport::meta(1), 1000);
    w.add_flow(FlowSpec::writes(0, 1, 16, 64 << 10, true));
    w.schedule_fault(PathFault {
        path: 0,
        down_at: 20 * US,
        up_at: Some(3 * MS),
    });
    drive_ok(&mut w, "single path outage");
}

/// spec: MR-RTX-8, MR-CMP-6
#[test]
fn dead_network_fails_with_retry_exceeded_not_livelock() {
    // Every path down for good: the work requests must fail (RETRY_EXC_ERR),
    // and the bounded drive must end.
    let mut w = build_world(pair_network(2), Transport::meta(2), 1100);
    w.add_flow(FlowSpec::writes(0, 1, 4, 64 << 10, true));
    for k in 0..2 {
        w.schedule_fault(PathFault {
            path: k,
            down_at: 0,
            up_at: None,
        });
    }
    let r = w.drive(limits());
    let (src, _) = w.flow_logs(0);
    let statuses: Vec<_> = src
        .map(|l| l.send.iter().map(|c| c.wc.status).collect())
        .unwrap_or_default();
    assert!(r.is_ok(), "drive: {r:?}, completions {statuses:?}");
    assert_eq!(
        statuses.first(),
        Some(&metaroce_proto::WcStatus::RetryExcErr),
        "{statuses:?}"
    );
    assert_eq!(statuses.len(), 4);
}

/// spec: MR-CONN-5, MR-CONN-7, MR-CONN-8
#[test]
fn unknown_peer_ids_open_handshake_under_loss() {
    for seed in 0..4 {
        let f = Faults {
            loss: 0.02,
            ..Default::default()
        };
        let mut t = Transport::meta(4);
        if let Transport::Meta(h) = &mut t {
            h.known_peer_ids = false;
        }
        let mut w = build_world(faulty_pair(4, f), t, 1200 + seed);
        w.add_flow(mixed_flow(0, 1, 16, 32 << 10, seed));
        drive_ok(&mut w, &format!("open handshake seed {seed}"));
    }
}

/// Both sides open at once with unknown peer ids, under loss, duplication and
/// reordering: `OPEN` packets that arrive after the peer has shown that it
/// knows our id are dropped (MR-CONN-13), and their data is sent again.
/// spec: MR-CONN-5, MR-CONN-7, MR-CONN-13
#[test]
fn unknown_peer_ids_simultaneous_open_with_reordering() {
    for seed in 0..4 {
        let f = Faults {
            loss: 0.02,
            dup: 0.02,
            jitter_ns: 20 * US,
            ..Default::default()
        };
        let mut t = Transport::meta(4);
        if let Transport::Meta(h) = &mut t {
            h.known_peer_ids = false;
        }
        let mut w = build_world(faulty_pair(4, f), t, 1250 + seed);
        w.add_flow(mixed_flow(0, 1, 16, 32 << 10, seed));
        w.add_flow(mixed_flow(1, 0, 16, 32 << 10, seed + 100));
        drive_ok(&mut w, &format!("simultaneous open seed {seed}"));
    }
}

#[test]
fn incast_sixteen_to_one() {
    for seed in 0..2 {
        let mut net = incast_network(16, 8);
        if seed == 1 {
            // Random loss on top of congestion drops.
            for p in &mut net.paths {
                p.loss = 0.01;
            }
        }
        let mut w = build_world(net, Transport::meta(8), 1300 + seed);
        for s in 1..=16 {
            w.add_flow(FlowSpec::writes(s, 0, 8, 32 << 10, true));
        }
        drive_ok(&mut w, &format!("incast seed {seed}"));
        assert!(w.net.downlink(0).stats.peak_queue_bytes <= 1 << 20);
    }
}

/// spec: MR-CONN-6, MR-CMP-1, MR-CMP-4
#[test]
fn many_qps_on_one_connection() {
    let f = Faults {
        loss: 0.02,
        jitter_ns: 5 * US,
        ..Default::default()
    };
    let mut w = build_world(faulty_pair(8, f), Transport::meta(8), 1400);
    for i in 0..12 {
        let (a, b) = if i % 3 == 0 { (1, 0) } else { (0, 1) };
        w.add_flow(mixed_flow(a, b, 10, 16 << 10, 1400 + i));
    }
    drive_ok(&mut w, "12 QPs");
}

#[test]
fn deterministic_for_a_seed() {
    let f = Faults {
        loss: 0.02,
        dup: 0.01,
        jitter_ns: 5 * US,
        ..Default::default()
    };
    let a = run_pair(8, f, 42, 16, 32 << 10);
    let b = run_pair(8, f, 42, 16, 32 << 10);
    assert_eq!((a.now(), a.events()), (b.now(), b.events()));
    let c = run_pair(8, f, 43, 16, 32 << 10);
    assert_ne!((a.now(), a.events()), (c.now(), c.events()));
}
