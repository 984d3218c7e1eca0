// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Building worlds: topologies, transports, and the standard parameters.
//!
//! The defaults model a small RoCE fabric: 100 Gb/s NICs and links, 4 KiB MTU,
//! about 8 us of base round trip, switch queues of 1 MiB with ECN marking above
//! 100 KiB.

use metaroce_proto::Config;

use crate::clock::{Time, US};
use crate::endpoint::Endpoint;
use crate::gbn::{GbnConfig, GbnHost};
use crate::host::{HostConfig, MetaHost};
use crate::link::LinkConfig;
use crate::network::{Network, NetworkConfig};
use crate::world::World;

/// 100 Gb/s.
pub const GBPS_100: u64 = 100_000_000_000;

/// Which transport every host runs.
#[derive(Clone, Copy, Debug)]
pub enum Transport {
    /// The MetaRoCE core.
    Meta(HostConfig),
    /// The RoCEv2 go-back-N baseline.
    Gbn(GbnConfig),
}

impl Transport {
    /// MetaRoCE with the core's default configuration over `paths` paths.
    pub fn meta(paths: u8) -> Self {
        let mut c = Config::new(1);
        c.paths = paths;
        Transport::Meta(HostConfig::new(c))
    }

    /// MetaRoCE with the settings this simulator suggests for the core (see
    /// the report): no path window cut on random loss (`loss_beta` = 1024;
    /// the core's default already never cuts the connection window on loss,
    /// `conn_loss_beta` = 1024), no connection-level ECN cut either
    /// (`conn_beta` = 1024, now also the core's default), an
    /// initial connection window of 8 packets instead of the core's 16 MSS
    /// (and 1 packet per path instead of 16), and receivers that hand out
    /// 95% of their downlink as fair shares whenever two or more senders are
    /// active, keeping headroom to drain a standing queue.
    pub fn meta_suggested(paths: u8) -> Self {
        let mut c = Config::new(1);
        c.paths = paths;
        c.aimd.loss_beta = 1024;
        c.aimd.conn_beta = 1024;
        c.aimd.init_conn_cwnd = 8 * u64::from(c.mtu);
        c.aimd.init_path_cwnd = c.mtu;
        let mut h = HostConfig::new(c);
        h.fair_headroom_permille = 950;
        Transport::Meta(h)
    }

    /// The baseline with its defaults.
    pub fn gbn() -> Self {
        Transport::Gbn(GbnConfig::new())
    }

    /// Short name for tables.
    pub fn name(&self) -> &'static str {
        match self {
            Transport::Meta(_) => "MetaRoCE",
            Transport::Gbn(g) if g.dcqcn.is_some() => "GBN+DCQCN",
            Transport::Gbn(_) => "GBN",
        }
    }
}

/// A core link with the standard queue: 1 MiB, ECN above 100 KiB.
pub fn fabric_link(rate_bps: u64, delay_ns: Time) -> LinkConfig {
    let mut l = LinkConfig::new(rate_bps, delay_ns);
    l.queue_bytes = 1 << 20;
    l.ecn_threshold_bytes = 100 << 10;
    l
}

/// Two hosts joined by `paths` equal-cost 100 Gb/s paths of 3 us each way
/// (plus 0.5 us of downlink): base RTT about 8 us plus serialization.
pub fn pair_network(paths: usize) -> NetworkConfig {
    NetworkConfig {
        hosts: 2,
        nic_rate_bps: GBPS_100,
        paths: vec![fabric_link(GBPS_100, 3 * US); paths],
        downlink: fabric_link(GBPS_100, US / 2),
        ecmp_seed: 0xEC3F,
        multiplane: None,
    }
}

/// `senders + 1` hosts; host 0 receives. Core paths are fast enough that the
/// receiver's 100 Gb/s downlink is the only bottleneck.
pub fn incast_network(senders: usize, paths: usize) -> NetworkConfig {
    let core_rate = GBPS_100 * (senders as u64).div_ceil(paths as u64).max(1);
    let mut core = fabric_link(core_rate, 3 * US);
    core.queue_bytes = 64 << 20;
    NetworkConfig {
        hosts: senders + 1,
        nic_rate_bps: GBPS_100,
        paths: vec![core; paths],
        downlink: fabric_link(GBPS_100, US / 2),
        ecmp_seed: 0xEC3F,
        multiplane: None,
    }
}

/// A world of `net.hosts` hosts all running `transport`.
pub fn build_world(net: NetworkConfig, transport: Transport, seed: u64) -> World {
    let n = net.hosts;
    let hosts: Vec<Box<dyn Endpoint>> = (0..n)
        .map(|i| -> Box<dyn Endpoint> {
            match transport {
                Transport::Meta(cfg) => Box::new(MetaHost::new(
                    i,
                    cfg,
                    seed.wrapping_add(i as u64 * 0x1_0001),
                )),
                Transport::Gbn(cfg) => Box::new(GbnHost::new(i, cfg)),
            }
        })
        .collect();
    World::new(Network::new(net, seed), hosts)
}

/// Base round-trip time of the standard topologies (propagation and one
/// full-size packet's serialization per hop), used to express times in RTTs.
pub const BASE_RTT_NS: Time = 8_700;

/// A world of `transport` hosts where MetaRoCE receivers advertise a fair
/// share of their 100 Gb/s downlink.
pub fn build_world_with_hints(net: NetworkConfig, mut transport: Transport, seed: u64) -> World {
    if let Transport::Meta(h) = &mut transport {
        if h.fair_share_bps == 0 {
            h.fair_share_bps = net.downlink.rate_bps / 8;
        }
    }
    build_world(net, transport, seed)
}

/// Outcome of one run.
#[derive(Clone, Debug, Default)]
pub struct RunResult {
    /// The drive's error, if it failed.
    pub error: Option<String>,
    /// Flows with a failed work request.
    pub failed_flows: usize,
    /// Correctness errors found by the checks.
    pub check_errors: usize,
    /// Payload bytes of all flows.
    pub bytes: u64,
    /// Time the last flow finished.
    pub elapsed_ns: Time,
    /// Payload bytes sent, including retransmissions.
    pub sent_bytes: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Paths retired.
    pub paths_retired: u64,
    /// Finish time of each flow.
    pub finish: Vec<Option<Time>>,
}

impl RunResult {
    /// Goodput in Gb/s.
    pub fn goodput_gbps(&self) -> f64 {
        if self.elapsed_ns == 0 {
            0.0
        } else {
            self.bytes as f64 * 8.0 / self.elapsed_ns as f64
        }
    }

    /// Bytes sent beyond the payload.
    pub fn retransmitted_bytes(&self) -> u64 {
        self.sent_bytes.saturating_sub(self.bytes)
    }

    /// Whether every flow completed successfully.
    pub fn ok(&self) -> bool {
        self.error.is_none() && self.failed_flows == 0 && self.check_errors == 0
    }
}

/// Drives `w` (limits generous enough for the baseline's 67 ms timeouts) and summarizes it.
pub fn finish_run(w: &mut World) -> RunResult {
    let limits = crate::world::DriveLimits {
        stall_ns: 2_000 * crate::clock::MS,
        max_events: 200_000_000,
        max_time: 120_000 * crate::clock::MS,
    };
    let r = w.drive(limits);
    let checks = w.check();
    let stats: Vec<_> = w.hosts.iter().map(|h| h.stats()).collect();
    RunResult {
        error: r.as_ref().err().map(|e| format!("{e:?}")),
        failed_flows: checks
            .iter()
            .filter(|c| c.errors.iter().any(|e| e.contains("failed")))
            .count(),
        check_errors: checks.iter().map(|c| c.errors.len()).sum(),
        bytes: w.flows.iter().map(|f| f.total_bytes()).sum(),
        elapsed_ns: w
            .finished_at
            .iter()
            .flatten()
            .copied()
            .max()
            .unwrap_or(w.now()),
        sent_bytes: stats.iter().map(|s| s.payload_bytes).sum(),
        timeouts: stats.iter().map(|s| s.timeouts).sum(),
        paths_retired: stats.iter().map(|s| s.paths_retired).sum(),
        finish: w.finished_at.clone(),
    }
}

/// A bulk transfer: `bytes` of WRITEs in `msg` byte messages from host 0 to 1
/// over `paths` paths, with `loss` on every core link (both directions) and
/// `jitter_ns` of random extra delay per packet.
pub fn bulk(
    transport: Transport,
    paths: usize,
    loss: f64,
    jitter_ns: Time,
    bytes: u64,
    msg: u32,
    seed: u64,
) -> RunResult {
    bulk_with_stats(transport, paths, loss, jitter_ns, bytes, msg, seed).0
}

/// `bytes` of WRITEs in `msg` byte messages from host 0 to 1 over `net`: the run, the
/// ACKs the receiver sent and the data packets the sender sent.
fn writes_with_stats(
    net: NetworkConfig,
    transport: Transport,
    bytes: u64,
    msg: u32,
    seed: u64,
) -> (RunResult, u64, u64) {
    let mut w = build_world_with_hints(net, transport, seed);
    w.add_flow(crate::workload::FlowSpec::writes(
        0,
        1,
        (bytes / u64::from(msg)) as usize,
        msg,
        false,
    ));
    let r = finish_run(&mut w);
    let (acks, data) = (w.hosts[1].stats().acks, w.hosts[0].stats().data_packets);
    (r, acks, data)
}

/// [`bulk`], also returning the ACKs the receiver sent and the data packets the
/// sender sent.
pub fn bulk_with_stats(
    transport: Transport,
    paths: usize,
    loss: f64,
    jitter_ns: Time,
    bytes: u64,
    msg: u32,
    seed: u64,
) -> (RunResult, u64, u64) {
    let mut net = pair_network(paths);
    for p in &mut net.paths {
        p.loss = loss;
        p.jitter_ns = jitter_ns;
    }
    writes_with_stats(net, transport, bytes, msg, seed)
}

/// [`reordering`], also returning the ACKs the receiver sent and the data packets
/// the sender sent.
pub fn reordering_with_stats(
    transport: Transport,
    jitter_ns: Time,
    fifo: bool,
    bytes: u64,
    msg: u32,
    seed: u64,
) -> (RunResult, u64, u64) {
    let mut net = pair_network(8);
    for (k, p) in net.paths.iter_mut().enumerate() {
        p.delay_ns = (k as Time + 1) * US;
        p.jitter_ns = jitter_ns;
        p.jitter_fifo = fifo;
    }
    writes_with_stats(net, transport, bytes, msg, seed)
}

/// Heavy reordering: 8 paths whose one-way delays differ (1 to 8 us) plus up
/// to `jitter_ns` of random delay per packet on each core link. With `fifo`,
/// each path stays in order (reordering only across paths, as spraying
/// causes); without, packets also overtake each other on one path (as netem's
/// jitter does).
pub fn reordering(
    transport: Transport,
    jitter_ns: Time,
    fifo: bool,
    bytes: u64,
    msg: u32,
    seed: u64,
) -> RunResult {
    reordering_with_stats(transport, jitter_ns, fifo, bytes, msg, seed).0
}

/// Result of the blackhole experiment.
#[derive(Clone, Debug, Default)]
pub struct BlackholeResult {
    /// The run without the fault.
    pub clean: RunResult,
    /// The run with the fault.
    pub faulty: RunResult,
    /// The blackholed core path (the busiest one in the clean run).
    pub path: usize,
    /// When the path went dark.
    pub fault_at: Time,
    /// Last time data was offered to the dead link, minus `fault_at`.
    pub reroute_ns: Option<Time>,
    /// Lowest delivered rate in a 10 us window after the fault, relative to before it.
    pub dip: f64,
    /// Longest time after the fault in which no byte was placed (within 2 ms of it).
    pub stall_ns: Time,
}

/// One of 8 paths (the busiest) goes dark at 25% of the clean transfer time and stays dark.
pub fn blackhole(transport: Transport, bytes: u64, msg: u32, seed: u64) -> BlackholeResult {
    let flow =
        crate::workload::FlowSpec::writes(0, 1, (bytes / u64::from(msg)) as usize, msg, false);
    let mut w = build_world_with_hints(pair_network(8), transport, seed);
    w.add_flow(flow.clone());
    let clean = finish_run(&mut w);
    let path = (0..8)
        .max_by_key(|&k| w.net.core_link(k, 0).stats.bytes)
        .unwrap_or(0);
    let fault_at = clean.elapsed_ns / 4;

    let mut w = build_world_with_hints(pair_network(8), transport, seed);
    let sample_ns = 2 * US;
    w.sample(sample_ns, fault_at + 2 * crate::clock::MS, Vec::new(), None);
    w.add_flow(flow);
    w.schedule_fault(crate::network::PathFault {
        path,
        down_at: fault_at,
        up_at: None,
    });
    let faulty = finish_run(&mut w);
    let dead = w.net.core_link(path, 0);
    let reroute_ns = dead.stats.last_offer_at.map(|t| t.saturating_sub(fault_at));
    // Delivered bytes per 10 us window, before and after the fault (samples
    // run until 2 ms after the fault or the end of the transfer).
    let placed: Vec<(Time, u64)> = w.samples.iter().map(|s| (s.at, s.placed[1])).collect();
    let steps = (10 * US / sample_ns) as usize;
    let k0 = placed.partition_point(|(t, _)| *t < fault_at);
    let back = (20 * US / sample_ns) as usize;
    let before = match (k0.checked_sub(back), placed.get(k0)) {
        (Some(a), Some(b)) => (b.1 - placed[a].1) as f64 / (b.0 - placed[a].0).max(1) as f64,
        _ => 0.0,
    };
    let end = faulty.elapsed_ns.saturating_sub(10 * US);
    let mut dip = f64::INFINITY;
    let mut stall = 0;
    let mut k = k0;
    while k + steps < placed.len() && placed[k + steps].0 <= end {
        let (a, b) = (placed[k], placed[k + steps]);
        dip = dip.min((b.1 - a.1) as f64 / (b.0 - a.0).max(1) as f64);
        k += 1;
    }
    let mut last_change = fault_at;
    for w2 in placed[k0..].windows(2) {
        if w2[1].1 != w2[0].1 {
            stall = stall.max(
                w2[1]
                    .0
                    .saturating_sub(last_change)
                    .saturating_sub(sample_ns),
            );
            last_change = w2[1].0;
        }
    }
    if let Some(last) = placed.last() {
        if last.0 < faulty.elapsed_ns {
            // Nothing placed from the last change to the end of sampling.
            stall = stall.max(last.0.saturating_sub(last_change));
        }
    }
    let dip = if before > 0.0 && dip.is_finite() {
        dip / before
    } else {
        0.0
    };
    BlackholeResult {
        clean,
        faulty,
        path,
        fault_at,
        reroute_ns,
        dip,
        stall_ns: stall,
    }
}

/// Result of an incast experiment.
#[derive(Clone, Debug, Default)]
pub struct IncastResult {
    /// The run.
    pub run: RunResult,
    /// Largest backlog of the receiver's downlink, bytes.
    pub peak_queue: u64,
    /// The backlog half and 99% of the datagrams offered to that downlink found
    /// ahead of them, bytes (bucket edges of [`crate::link::QueueHist`]).
    pub queue_p50: u64,
    /// See `queue_p50`.
    pub queue_p99: u64,
    /// Datagrams dropped at the receiver's downlink.
    pub drops: u64,
    /// Datagrams marked CE there.
    pub marks: u64,
    /// Jain's index over the senders' goodputs (bytes / own finish time).
    pub jain: f64,
    /// Time after which per-sender goodputs stay fair (Jain >= 0.9 over the
    /// bytes placed from each sender in every 4-RTT window while all senders
    /// are active); `None` if never.
    pub fair_ns: Option<Time>,
    /// Time after which the downlink backlog stays at or below twice the ECN
    /// threshold while all senders are active; `None` if never.
    pub drained_ns: Option<Time>,
}

/// `senders` hosts each WRITE `bytes` to host 0 at once; the receiver's downlink is the bottleneck.
pub fn incast(
    transport: Transport,
    senders: usize,
    bytes: u64,
    msg: u32,
    seed: u64,
) -> IncastResult {
    incast_with(transport, senders, bytes, msg, seed, true)
}

/// [`incast`], with the receivers' rate hints on or off (`hints`; MetaRoCE only).
pub fn incast_with(
    transport: Transport,
    senders: usize,
    bytes: u64,
    msg: u32,
    seed: u64,
    hints: bool,
) -> IncastResult {
    let net = incast_network(senders, 8);
    let ecn = net.downlink.ecn_threshold_bytes;
    let mut w = if hints {
        build_world_with_hints(net, transport, seed)
    } else {
        build_world(net, transport, seed)
    };
    let down = 2 * w.net.paths();
    let sample_ns = US;
    w.sample(sample_ns, 2 * crate::clock::MS, vec![down], Some(0));
    for s in 1..=senders {
        w.add_flow(crate::workload::FlowSpec::writes(
            s,
            0,
            (bytes / u64::from(msg)) as usize,
            msg,
            false,
        ));
    }
    let run = finish_run(&mut w);
    let link = &w.net.links[down];
    let rates: Vec<f64> = run
        .finish
        .iter()
        .map(|f| f.map_or(0.0, |t| bytes as f64 / t.max(1) as f64))
        .collect();
    let first_finish = run.finish.iter().flatten().copied().min().unwrap_or(0);
    // Windows of 4 RTTs while every sender is active.
    let win = 4 * BASE_RTT_NS;
    let steps = (win / sample_ns) as usize;
    let samples: Vec<_> = w.samples.iter().filter(|s| s.at <= first_finish).collect();
    let mut windows = Vec::new();
    let mut i = 0;
    while i + steps < samples.len() {
        let (a, b) = (samples[i], samples[i + steps]);
        let rates: Vec<f64> = (1..=senders)
            .map(|h| (b.placed_from[h] - a.placed_from[h]) as f64)
            .collect();
        let drained = samples[i..=i + steps]
            .iter()
            .all(|s| s.backlog[0] <= 2 * ecn);
        windows.push((a.at, crate::workload::jain(&rates) >= 0.9, drained));
        i += steps;
    }
    // The start of the first window after which every window satisfies `ok`.
    let settle =
        |ok: &dyn Fn(&(Time, bool, bool)) -> bool| match windows.iter().rposition(|w| !ok(w)) {
            None => windows.first().map(|w| w.0),
            Some(j) => windows.get(j + 1).map(|w| w.0),
        };
    let fair_ns = settle(&|w| w.1);
    let drained_ns = settle(&|w| w.2);
    IncastResult {
        peak_queue: link.stats.peak_queue_bytes,
        queue_p50: link.queue_seen.quantile(0.5),
        queue_p99: link.queue_seen.quantile(0.99),
        drops: link.stats.queue_drops,
        marks: link.stats.ecn_marked,
        jain: crate::workload::jain(&rates),
        fair_ns,
        drained_ns,
        run,
    }
}
