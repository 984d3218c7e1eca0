// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The VM's fabric (selftests/lib_fabric.sh) in the simulator: one connection
//! of 8 paths over K links of 20 Mbit/s with an ECN-marking queue, the
//! driver's timers and ACK policy. Over 4 links it should move about 4 times
//! its one-link rate: a mark trims only the path that saw it ([MR-CC-16]).

use metaroce_proto::cc::AimdConfig;
use metaroce_proto::constants::UDP_PORT;
use metaroce_proto::Config;
use metaroce_sim::clock::US;
use metaroce_sim::host::HostConfig;
use metaroce_sim::network::NetworkConfig;
use metaroce_sim::scenario::{self, build_world, fabric_link, Transport};
use metaroce_sim::workload::FlowSpec;

/// Goodput in Mbit/s of 16 MiB of WRITEs over `k` links, with `conn_beta`.
fn run(k: usize, conn_beta: u32, seed: u64) -> f64 {
    run_mib(k, conn_beta, seed, 16)
}

/// The VM's fabric: `hosts` hosts over `k` links of 20 Mbit/s, each marking
/// ECN above fq_codel's 5 ms target.
fn fabric(hosts: usize, k: usize, seed: u64) -> NetworkConfig {
    let mbit = 1_000_000u64;
    let mut l = fabric_link(20 * mbit, 300 * US);
    l.ecn_threshold_bytes = 12_500;
    NetworkConfig {
        hosts,
        nic_rate_bps: 1000 * mbit,
        paths: vec![l; k],
        downlink: fabric_link(1000 * mbit, 50 * US),
        ecmp_seed: 0xEC3F + seed,
        multiplane: None,
    }
}

/// The driver's settings (engine.rs: PATHS, ACK_EVERY, ACK_DELAY_NS, the RTO of
/// local ACK timeout 14, a 1500-byte MTU).
fn driver_config() -> Config {
    let mut c = Config::new(1);
    c.paths = 8;
    c.mtu = 1392;
    c.aimd = AimdConfig::for_mss(1392);
    (c.rto_initial_ns, c.rto_min_ns) = metaroce_proto::rto_from_local_ack_timeout(14);
    c.ack_every = 8;
    c.ack_delay_ns = 2_000_000;
    c
}

/// Goodput in Mbit/s of `mib` MiB of WRITEs over `k` links, with `conn_beta`.
fn run_mib(k: usize, conn_beta: u32, seed: u64, mib: usize) -> f64 {
    let net = fabric(2, k, seed);
    let mut c = driver_config();
    c.aimd.conn_beta = conn_beta;
    let mut w = build_world(net, Transport::Meta(HostConfig::new(c)), seed);
    w.add_flow(FlowSpec::writes(0, 1, mib, 1 << 20, true));
    let r = scenario::finish_run(&mut w);
    assert!(
        r.error.is_none() && r.failed_flows == 0 && r.check_errors == 0,
        "{r:?}"
    );
    let links: Vec<usize> = w.hosts[0]
        .path_ports(1)
        .iter()
        .map(|&p| w.net.ecmp_link(0, 1, p, UDP_PORT))
        .collect();
    let mib: Vec<u64> = (0..k)
        .map(|i| w.net.core_link(i, 0).stats.bytes >> 20)
        .collect();
    let mbps = r.goodput_gbps() * 1000.0;

    std::println!(
        "K={k} conn_beta={conn_beta} seed {seed}: {mbps:.1} Mbit/s, MiB per link {mib:?}, paths on links {links:?}, {} moves", r.paths_retired
    );
    mbps
}

// spec: MR-CC-16, MR-CC-3, MR-CC-1
#[test]
fn one_connection_fills_four_marking_links() {
    let one = run(1, 1024, 1);
    assert!(one > 0.85 * 20.0, "one link: {one:.1} Mbit/s");
    let mut sum = 0.0;
    for seed in 1..4 {
        let four = run(4, 1024, seed);
        // Seed 1 leaves one link without a path (an ECMP collision).
        assert!(four > 2.8 * one, "seed {seed}: {four:.1} Mbit/s");
        sum += four;
    }
    assert!(sum / 3.0 > 3.3 * one, "mean {:.1} Mbit/s", sum / 3.0);
    // The old default (a fifth of the connection window per path mark)
    // held the same connection well below that (48.1 against 73.8 Mbit/s
    // with 512-packet pace epochs, 56.1 with 256: moves hide part of it).
    let old = run(4, 819, 2);
    let new = run(4, 1024, 2);
    assert!(old < 0.85 * new, "conn_beta 819: {old:.1} Mbit/s");
}

// spec: MR-PATH-14, MR-CC-16
#[test]
fn paths_move_off_crowded_links() {
    // Long enough runs for the moves: 48 MiB, about 6 s on 4 links.
    let one = run_mib(1, 1024, 1, 48);
    let mut sum = 0.0;
    for seed in 1..9 {
        let four = run_mib(4, 1024, seed, 48);
        // Seeds 1 and 8 start with a link without a path (3 links' worth,
        // 3.0 times one link) and stay there without the moves: 3.19 and
        // 3.4 times one link with 512-packet pace epochs, 3.55 and 3.69
        // with 256; moves must never cost more than they win.
        assert!(four > 3.5 * one, "seed {seed}: {four:.1} Mbit/s");
        sum += four;
    }
    // 3.73 without the moves ([MR-PATH-14]), 3.82 with 512-packet pace
    // epochs, 3.90 with 256.
    assert!(
        sum / 8.0 > 3.85 * one,
        "mean {:.2} times one link",
        sum / 8.0 / one
    );
}

/// Goodput in Mbit/s and Jain's index of `n` senders' 4 MiB of WRITEs each into
/// one receiver over one link of the VM's fabric, rate hints (the link's rate
/// as the receiver's capacity) on or off.
fn incast(n: usize, hints: bool, seed: u64) -> (f64, f64) {
    let mut h = HostConfig::new(driver_config());
    if hints {
        h.fair_share_bps = 20_000_000 / 8;
    }
    let mut w = build_world(fabric(n + 1, 1, seed), Transport::Meta(h), seed);
    let mib = 4;
    for s in 1..=n {
        w.add_flow(FlowSpec::writes(s, 0, mib, 1 << 20, true));
    }
    let r = scenario::finish_run(&mut w);
    assert!(
        r.error.is_none() && r.failed_flows == 0 && r.check_errors == 0,
        "{r:?}"
    );
    let rates: Vec<f64> = r
        .finish
        .iter()
        .flatten()
        .map(|&t| (mib << 20) as f64 * 8.0 / t as f64 * 1000.0)
        .collect();
    let mbps = r.goodput_gbps() * 1000.0;
    let jain = metaroce_sim::workload::jain(&rates);
    std::println!(
        "incast {n}:1 hints {hints} seed {seed}: {mbps:.1} Mbit/s, Jain {jain:.3}, per sender {rates:.2?} Mbit/s, link drops {} marks {}",
        w.net.core_link(0, 1).stats.queue_drops,
        w.net.core_link(0, 1).stats.ecn_marked
    );
    (mbps, jain)
}

// spec: MR-CC-3, MR-CC-11, MR-CC-12
#[test]
fn incast_fills_one_marking_link() {
    // The VM's incast cells: 4 and 8 senders of 8 paths each into one
    // 20 Mbit/s link with a marking queue, hints on and off. The core
    // fills the link (18.4 Mbit/s of payload, 92%; every packet marked, no
    // drop) and shares it evenly either way (the hint, 4.75 Mbit/s at 4:1,
    // is above what ECN leaves each sender): the 40-50% of the link the VM
    // measured (2026-12-04) is not the protocol's.
    for n in [4, 8] {
        for hints in [true, false] {
            let (mbps, jain) = incast(n, hints, 1);
            assert!(mbps > 0.9 * 20.0, "{n}:1 hints {hints}: {mbps:.1} Mbit/s");
            assert!(jain > 0.95, "{n}:1 hints {hints}: Jain {jain:.3}");
        }
    }
}
