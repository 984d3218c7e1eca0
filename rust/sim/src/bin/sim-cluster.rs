// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! `make sim-cluster`: MetaRoCE and RoCEv2 (go-back-N with DCQCN) on multiplane
//! leaf-spine fabrics and three-tier fat trees (issue 38): permutation, all-to-all
//! (to 4,032 connections) and ring all-reduce traffic against the ideal, goodput
//! against the number of planes, a whole plane failing mid-run, a link flapping,
//! random loss from 0.1% to 10%, incast of up to 1000 senders into one port with the
//! receiver's rate hints on and off, and the queues and drops the packets met. Meta's
//! published figures stand beside the tables they compare with. Deterministic per
//! seed; prints Markdown tables and each run's wall time.
//!
//! ```text
//! sim-cluster [--hosts N] [--mib M] [--seed S] [--only SECTION[,SECTION...]]
//! ```
//!
//! Sections: planes, alltoall, scale, failure, loss, fattree, ring, incast (all by
//! default); the queues table covers the sections that ran.

use std::time::Instant;

use metaroce_sim::clock::{Time, US};
use metaroce_sim::cluster::{
    fat_tree_network, meta_probing, multiplane_network, ring_all_reduce, run, run_with_faults,
    with_spine_loss, ClusterResult, Faults, Flap, Pattern,
};
use metaroce_sim::dcqcn::DcqcnConfig;
use metaroce_sim::gbn::GbnConfig;
use metaroce_sim::network::NetworkConfig;
use metaroce_sim::scenario::{incast_with, Transport, BASE_RTT_NS, GBPS_100};

const SECTIONS: [&str; 8] = [
    "planes", "alltoall", "scale", "failure", "loss", "fattree", "ring", "incast",
];

struct Opts {
    hosts: usize,
    mib: u64,
    seed: u64,
    only: Vec<String>,
}

impl Opts {
    fn runs(&self, section: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|s| s == section)
    }
}

fn usage() -> ! {
    eprintln!(
        "usage: sim-cluster [--hosts N] [--mib M] [--seed S] [--only SECTION[,SECTION...]]\n\
         sections: {}",
        SECTIONS.join(", ")
    );
    std::process::exit(2);
}

fn parse() -> Opts {
    let mut o = Opts {
        hosts: 32,
        mib: 32,
        seed: 1,
        only: Vec::new(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let Some(v) = args.next() else { usage() };
        let n = || v.parse::<u64>().unwrap_or_else(|_| usage());
        match a.as_str() {
            "--hosts" => o.hosts = n() as usize,
            "--mib" => o.mib = n(),
            "--seed" => o.seed = n(),
            "--only" => {
                o.only = v.split(',').map(str::to_owned).collect();
                if o.only.iter().any(|s| !SECTIONS.contains(&s.as_str())) {
                    usage();
                }
            }
            _ => usage(),
        }
    }
    o
}

fn gbn_dcqcn() -> Transport {
    let mut g = GbnConfig::new();
    g.dcqcn = Some(DcqcnConfig::for_line_rate(GBPS_100 as f64));
    Transport::Gbn(g)
}

fn cell(r: &ClusterResult, wall: f64) -> String {
    if r.run.failed_flows > 0 {
        return format!(
            "{} of {} connections failed (retries exhausted), {:.1} s",
            r.run.failed_flows, r.connections, wall
        );
    }
    if r.run.error.is_some() || r.run.check_errors > 0 {
        return format!(
            "failed ({:?}, {} check errors)",
            r.run.error, r.run.check_errors
        );
    }
    let retx = r.run.sent_bytes.saturating_sub(r.run.bytes) as f64 / r.run.bytes.max(1) as f64;
    format!(
        "{:.0}% ({} us, Jain {:.2}, retx {:.1}%, {:.1} s)",
        100.0 * r.of_ideal(),
        r.run.elapsed_ns / 1000,
        r.jain(),
        100.0 * retx,
        wall
    )
}

fn timed(f: impl FnOnce() -> ClusterResult) -> (ClusterResult, f64) {
    let t = Instant::now();
    let r = f();
    (r, t.elapsed().as_secs_f64())
}

fn main() {
    let o = parse();
    let bytes = o.mib << 20;
    let leaves = (o.hosts / 8).max(2);
    let mut queues = Vec::new();
    println!(
        "# Multiplane leaf-spine fabrics: {} hosts on {leaves} leaves per plane, 100 Gb/s per \
         host port and link, 1 MiB queues marking ECN above 100 KiB; {} MiB per host in 1 MiB \
         WRITEs; seed {}\n",
        o.hosts, o.mib, o.seed
    );
    println!("Cells: completion time of the ideal over the run's (100% = the physical limit), the run's completion time, Jain's fairness index over the connections' completion times, bytes retransmitted, wall time.\n");
    if o.runs("planes") {
        println!("## Goodput against planes (permutation: every flow crosses the spines)\n");
        println!("| planes | connections | MetaRoCE (16 paths) | RoCEv2 GBN+DCQCN |");
        println!("|---|---|---|---|");
        for planes in [1, 2, 4, 8] {
            let c = Case::permutation(planes);
            let (m, mw, g, gw) = runs(&o, leaves, c);
            println!(
                "| {planes} | {} | {} | {} |",
                m.connections,
                cell(&m, mw),
                cell(&g, gw)
            );
            if planes == 4 {
                queues.push(("permutation, 4 planes".to_string(), m, g));
            }
        }
    }
    if o.runs("alltoall") {
        println!("\n## All-to-all, 4 planes\n");
        println!("| connections | MetaRoCE (16 paths) | RoCEv2 GBN+DCQCN |");
        println!("|---|---|---|");
        let c = Case {
            pattern: Pattern::AllToAll,
            msg: 1 << 16,
            ..Case::permutation(4)
        };
        let (m, mw, g, gw) = runs(&o, leaves, c);
        println!(
            "| {} | {} | {} |",
            m.connections,
            cell(&m, mw),
            cell(&g, gw)
        );
        queues.push((format!("all-to-all, {} hosts", o.hosts), m, g));
    }
    if o.runs("scale") {
        scale(&o, &mut queues);
    }
    if o.runs("failure") {
        println!("\n## Plane 0 of 4 fails for good at 25% of the ideal time (permutation)\n");
        println!("Meta reports autonomous recovery from plane failure on hardware. The ideal: every host at 4 x 100 Gb/s until the failure, at 3 x 100 Gb/s after it.\n");
        println!(
            "Recovery: the fabric's goodput in 10 us windows until the first connection \
             completes; how long after the failure it stayed below half of the last window \
             before it (round trips of {:.1} us), and its lowest window.\n",
            BASE_RTT_NS as f64 / 1e3
        );
        println!(
            "| | MetaRoCE (16 paths) | with probe timeouts ([MR-RTX-15]) | RoCEv2 GBN+DCQCN |"
        );
        println!("|---|---|---|---|");
        // The ideal time at 4 x 100 Gb/s, in ns, a quarter of it.
        let at = (bytes * 8 / 400 / 4).max(10 * US);
        let c = Case {
            fail_at: Some(at),
            ..Case::permutation(4)
        };
        let (m, mw, g, gw) = runs(&o, leaves, c);
        let (p, pw) = timed(|| {
            let net = multiplane_network(o.hosts, 4, leaves);
            run(
                meta_probing(16),
                net,
                c.pattern,
                bytes,
                c.msg,
                c.fail_at,
                o.seed,
            )
        });
        println!(
            "| completion | {} | {} | {} |",
            cell(&m, mw),
            cell(&p, pw),
            cell(&g, gw)
        );
        let recovery = |r: &ClusterResult| match r.recovery {
            Some(rc) => format!(
                "below half for {:.0} us ({:.0} RTTs), lowest {:.0}% of {:.0} Gb/s",
                rc.below_half_ns as f64 / 1e3,
                rc.below_half_ns as f64 / BASE_RTT_NS as f64,
                100.0 * rc.lowest,
                rc.before_gbps
            ),
            None => "-".into(),
        };
        println!(
            "| recovery | {} | {} | {} |",
            recovery(&m),
            recovery(&p),
            recovery(&g)
        );
        // One leaf-spine link of plane 0 flapping: down 50 us of every 200 us.
        let flap = Faults {
            plane_at: None,
            flap: Some(Flap {
                plane: 0,
                leaf: 0,
                spine: 0,
                from_ns: 100 * US,
                period_ns: 200 * US,
                down_ns: 50 * US,
            }),
        };
        let one = |t: fn() -> Transport| {
            timed(|| {
                let net = multiplane_network(o.hosts, 4, leaves);
                run_with_faults(t(), net, c.pattern, bytes, c.msg, flap, o.seed)
            })
        };
        let (fm, fmw) = one(|| Transport::meta(16));
        let (fp, fpw) = one(|| meta_probing(16));
        let (fg, fgw) = one(gbn_dcqcn);
        println!(
            "| a link flapping (leaf 0 - spine 0 of plane 0, down 50 us of every 200 us from 100 us on) | {} | {} | {} |",
            cell(&fm, fmw),
            cell(&fp, fpw),
            cell(&fg, fgw)
        );
    }
    if o.runs("loss") {
        loss(&o, leaves, &mut queues);
    }
    if o.runs("fattree") {
        fat_tree(&o, &mut queues);
    }
    if o.runs("ring") {
        ring(&o, &mut queues);
    }
    if o.runs("incast") {
        incast(&o);
    }
    if !queues.is_empty() {
        println!(
            "\n## Queues and drops\n\nOver every switch port that carried traffic (leaf-spine, \
             spine-core and host-facing links; not the hosts' own ports): the backlog that 50%, \
             99% and 99.9% of the datagrams found ahead of them (8 KiB buckets; queues hold 1 \
             MiB and mark ECN above 100 KiB), the datagrams tail-dropped, and the drop rate of \
             the 99th-percentile and of the worst port. Random loss is not a drop.\n"
        );
        println!(
            "| run | transport | queue p50 / p99 / p99.9 | drops | port drop rate p99 / max |"
        );
        println!("|---|---|---|---|---|");
        for (label, m, g) in &queues {
            for (name, r) in [("MetaRoCE", m), ("RoCEv2 GBN+DCQCN", g)] {
                let q = &r.queues;
                println!(
                    "| {label} | {name} | {} / {} / {} KiB | {} of {} ({:.3}%) | {:.3}% / {:.3}% |",
                    q.seen[0] >> 10,
                    q.seen[1] >> 10,
                    q.seen[2] >> 10,
                    q.drops,
                    q.offered,
                    100.0 * q.drops as f64 / q.offered.max(1) as f64,
                    100.0 * q.link_drop_rate[0],
                    100.0 * q.link_drop_rate[1]
                );
            }
        }
    }
}

/// A labelled pair of runs for the queues table.
type Queues = Vec<(String, ClusterResult, ClusterResult)>;

/// Hosts of the all-to-all at scale: 64 x 63 = 4,032 connections, Meta's "up to
/// 4,000".
const SCALE_HOSTS: usize = 64;

fn scale(o: &Opts, queues: &mut Queues) {
    let mib = (o.mib / 2).max(1);
    println!(
        "\n## All-to-all at {} connections: goodput against planes\n",
        SCALE_HOSTS * (SCALE_HOSTS - 1)
    );
    println!(
        "{SCALE_HOSTS} hosts on 8 leaves, {mib} MiB per host in 64 KiB WRITEs, spread over its \
         63 peers. Meta reports throughput scaling linearly with the number of planes up to \
         4,000 connections on hardware. Gb/s: goodput per host (its NIC moves planes x 100).\n"
    );
    println!("| planes | MetaRoCE (16 paths) | Gb/s per host | RoCEv2 GBN+DCQCN | Gb/s per host |");
    println!("|---|---|---|---|---|");
    let so = Opts {
        hosts: SCALE_HOSTS,
        mib,
        seed: o.seed,
        only: Vec::new(),
    };
    for planes in [1, 2, 4, 8] {
        let c = Case {
            pattern: Pattern::AllToAll,
            msg: 1 << 16,
            ..Case::permutation(planes)
        };
        let (m, mw, g, gw) = runs(&so, 8, c);
        let per_host = |r: &ClusterResult| {
            if r.run.ok() {
                format!("{:.0}", r.of_ideal() * 100.0 * planes as f64)
            } else {
                "-".into()
            }
        };
        println!(
            "| {planes} | {} | {} | {} | {} |",
            cell(&m, mw),
            per_host(&m),
            cell(&g, gw),
            per_host(&g)
        );
        if planes == 4 {
            queues.push((format!("all-to-all, {SCALE_HOSTS} hosts"), m, g));
        }
    }
}

fn loss(o: &Opts, leaves: usize, queues: &mut Queues) {
    println!(
        "\n## Random loss, 4 planes (permutation): each datagram that crosses the spines is \
         lost with probability p (data and ACKs alike)\n"
    );
    println!(
        "Meta reports about 86% of the clean throughput at 1% loss on hardware, and useful \
         bandwidth at 10%. Cells: against the fluid ideal, as above, then against the same \
         transport's run at p = 0.\n"
    );
    println!(
        "| p | MetaRoCE (16 paths) | of clean | with probe timeouts ([MR-RTX-15]) | of clean | \
         RoCEv2 GBN+DCQCN | of clean |"
    );
    println!("|---|---|---|---|---|---|---|");
    let mut clean = None;
    for (label, loss) in [
        ("0", 0.0),
        ("0.1%", 0.001),
        ("1%", 0.01),
        ("5%", 0.05),
        ("10%", 0.10),
    ] {
        let c = Case {
            loss,
            ..Case::permutation(4)
        };
        let (m, mw, g, gw) = runs(o, leaves, c);
        let (p, pw) = timed(|| {
            let net = with_spine_loss(multiplane_network(o.hosts, 4, leaves), loss);
            run(
                meta_probing(16),
                net,
                c.pattern,
                o.mib << 20,
                c.msg,
                None,
                o.seed,
            )
        });
        let (m0, p0, g0) = *clean.get_or_insert((m.of_ideal(), p.of_ideal(), g.of_ideal()));
        let share = |x: f64, x0: f64| format!("{:.0}%", 100.0 * x / x0.max(f64::MIN_POSITIVE));
        println!(
            "| {label} | {} | {} | {} | {} | {} | {} |",
            cell(&m, mw),
            share(m.of_ideal(), m0),
            cell(&p, pw),
            share(p.of_ideal(), p0),
            cell(&g, gw),
            share(g.of_ideal(), g0)
        );
        if label == "1%" {
            queues.push(("permutation, 4 planes, 1% loss".to_string(), m, g));
        }
    }
}

/// Hosts and pods of the three-tier runs.
const FAT_TREE_HOSTS: usize = 256;
const FAT_TREE_PODS: usize = 4;

fn fat_tree(o: &Opts, queues: &mut Queues) {
    let mib = (o.mib / 4).max(1);
    println!(
        "\n## Three-tier fat trees: {FAT_TREE_HOSTS} hosts in {FAT_TREE_PODS} pods, 2 planes\n"
    );
    println!(
        "Each plane: 8 hosts per leaf, 8 leaves and 8 spines per pod, 8 cores per spine \
         group (64 cores), 100 Gb/s links, non-blocking; a permutation (every flow crosses \
         the cores, 6 hops), {mib} MiB per host in 1 MiB WRITEs, clean and with 1% loss \
         across the fabric.\n"
    );
    println!("| run | MetaRoCE (16 paths) | RoCEv2 GBN+DCQCN |");
    println!("|---|---|---|");
    for loss in [0.0, 0.01] {
        let one = |t: fn() -> Transport| {
            timed(|| {
                let net = with_spine_loss(fat_tree_network(FAT_TREE_HOSTS, 2, FAT_TREE_PODS), loss);
                run(
                    t(),
                    net,
                    Pattern::Permutation,
                    mib << 20,
                    1 << 20,
                    None,
                    o.seed,
                )
            })
        };
        let (m, mw) = one(|| Transport::meta(16));
        let (g, gw) = one(gbn_dcqcn);
        let label = if loss > 0.0 {
            "permutation, 1% loss"
        } else {
            "permutation"
        };
        println!("| {label} | {} | {} |", cell(&m, mw), cell(&g, gw));
        queues.push((format!("three-tier {label}"), m, g));
    }
}

fn ring(o: &Opts, queues: &mut Queues) {
    println!("\n## Ring all-reduce\n");
    println!(
        "NCCL's ring (reduce-scatter, then all-gather): 2 (N - 1) steps, each host sending \
         1/N of the buffer to its successor once it has received the previous step from its \
         predecessor (a WRITE with immediate per step). The ideal: the ring's critical \
         path, each step a chunk at the NIC's rate plus its hop's one-way delay \
         (`cluster::ring_ideal_ns`); pipelining slices of a step, as NCCL does, would \
         beat it. Meta publishes no collective figure.\n"
    );
    println!("| fabric | hosts | buffer | MetaRoCE (16 paths) | RoCEv2 GBN+DCQCN |");
    println!("|---|---|---|---|---|");
    let fabrics: [(&str, usize, u64, NetworkConfig); 2] = [
        (
            "leaf-spine, 4 planes",
            o.hosts,
            o.mib,
            multiplane_network(o.hosts, 4, (o.hosts / 8).max(2)),
        ),
        (
            "three-tier, 4 pods, 2 planes",
            FAT_TREE_HOSTS,
            (o.mib / 4).max(1),
            fat_tree_network(FAT_TREE_HOSTS, 2, FAT_TREE_PODS),
        ),
    ];
    for (label, hosts, mib, net) in fabrics {
        let one = |t: fn() -> Transport| {
            let net = net.clone();
            timed(move || ring_all_reduce(t(), net, mib << 20, o.seed))
        };
        let (m, mw) = one(|| Transport::meta(16));
        let (g, gw) = one(gbn_dcqcn);
        println!(
            "| {label} | {hosts} | {mib} MiB | {} | {} |",
            cell(&m, mw),
            cell(&g, gw)
        );
        queues.push((format!("ring all-reduce, {label}"), m, g));
    }
}

fn incast(o: &Opts) {
    println!(
        "\n## Incast N:1 into one 100 Gb/s port: every sender WRITEs its bytes at once \
         (64 KiB messages) over 8 paths (MetaRoCE), receiver's rate hints on and off\n"
    );
    println!(
        "Meta reports that incast resolves in one or two round trips. Goodput of the port; \
         Jain's index over the senders' finish times; the port's 1 MiB queue (ECN above 100 \
         KiB) as the datagrams found it (50th and 99th percentile) and at its peak; round \
         trips (of {:.1} us) until every 4-RTT window stays fair and until the queue stays at \
         most twice the marking threshold (\"never\": not while all senders were active).\n",
        BASE_RTT_NS as f64 / 1e3
    );
    println!(
        "| N:1 | per sender | hints | goodput | Jain | queue p50 / p99 / peak | drops | CE marks | fair after | queue drained after | wall |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for (n, kib) in [(64, 1024), (256, 256), (1000, 256)] {
        for hints in [true, false] {
            let t = Instant::now();
            let r = incast_with(Transport::meta(8), n, kib << 10, 64 << 10, o.seed, hints);
            let rtts = |t: Option<Time>| {
                t.map_or("never".into(), |t| {
                    format!("{:.0}", t as f64 / BASE_RTT_NS as f64)
                })
            };
            // A run that did not finish has no goodput (its unfinished flows' bytes
            // would count over the finished ones' time).
            let goodput = if r.run.ok() {
                format!("{:.1} Gb/s", r.run.goodput_gbps())
            } else {
                let why = r
                    .run
                    .error
                    .as_deref()
                    .map_or(String::new(), |e| format!(" ({e})"));
                format!("failed: {} of {n} flows{why}", r.run.failed_flows)
            };
            println!(
                "| {n}:1 | {kib} KiB | {} | {goodput} | {:.2} | {} / {} / {} KiB | {} | {} | {} | {} | {:.1} s |",
                if hints { "on" } else { "off" },
                r.jain,
                r.queue_p50 / 1024,
                r.queue_p99 / 1024,
                r.peak_queue / 1024,
                r.drops,
                r.marks,
                rtts(r.fair_ns),
                rtts(r.drained_ns),
                t.elapsed().as_secs_f64()
            );
        }
    }
}

/// One row's settings.
#[derive(Clone, Copy)]
struct Case {
    planes: usize,
    pattern: Pattern,
    msg: u32,
    fail_at: Option<Time>,
    /// Random loss across the spines ([`with_spine_loss`]).
    loss: f64,
}

impl Case {
    /// A clean permutation of 1 MiB WRITEs on `planes` planes.
    fn permutation(planes: usize) -> Self {
        Case {
            planes,
            pattern: Pattern::Permutation,
            msg: 1 << 20,
            fail_at: None,
            loss: 0.0,
        }
    }
}

/// MetaRoCE and RoCEv2 on the same case: each result with its wall time.
fn runs(o: &Opts, leaves: usize, c: Case) -> (ClusterResult, f64, ClusterResult, f64) {
    let (hosts, seed, bytes) = (o.hosts, o.seed, o.mib << 20);
    let one = |t: fn() -> Transport| {
        timed(move || {
            let net = with_spine_loss(multiplane_network(hosts, c.planes, leaves), c.loss);
            run(t(), net, c.pattern, bytes, c.msg, c.fail_at, seed)
        })
    };
    let (m, mw) = one(|| Transport::meta(16));
    let (g, gw) = one(gbn_dcqcn);
    (m, mw, g, gw)
}
