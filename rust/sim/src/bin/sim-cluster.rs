// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! `make sim-cluster`: MetaRoCE and RoCEv2 (go-back-N with DCQCN) on multiplane
//! leaf-spine fabrics (issue 38): permutation and all-to-all traffic against the
//! fluid ideal, goodput against the number of planes, a whole plane failing mid-run,
//! random loss from 0.1% to 10%, and incast of up to 1000 senders into one port with
//! the receiver's rate hints on and off. Deterministic per seed; prints Markdown tables
//! and each run's wall time.
//!
//! ```text
//! sim-cluster [--hosts N] [--mib M] [--seed S]
//! ```

use std::time::Instant;

use metaroce_sim::clock::{Time, US};
use metaroce_sim::cluster::{
    meta_probing, multiplane_network, run, with_spine_loss, ClusterResult, Pattern,
};
use metaroce_sim::dcqcn::DcqcnConfig;
use metaroce_sim::gbn::GbnConfig;
use metaroce_sim::scenario::{incast_with, Transport, BASE_RTT_NS, GBPS_100};

struct Opts {
    hosts: usize,
    mib: u64,
    seed: u64,
}

fn parse() -> Opts {
    let mut o = Opts {
        hosts: 32,
        mib: 32,
        seed: 1,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let v = args.next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        match a.as_str() {
            "--hosts" => o.hosts = v as usize,
            "--mib" => o.mib = v,
            "--seed" => o.seed = v,
            _ => {
                eprintln!("usage: sim-cluster [--hosts N] [--mib M] [--seed S]");
                std::process::exit(2);
            }
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
    println!(
        "# Multiplane leaf-spine fabrics: {} hosts on {leaves} leaves per plane, 100 Gb/s per \
         host port and link, 1 MiB queues marking ECN above 100 KiB; {} MiB per host in 1 MiB \
         WRITEs; seed {}\n",
        o.hosts, o.mib, o.seed
    );
    println!("Cells: completion time of the fluid ideal over the run's (100% = the physical limit), the run's completion time, Jain's fairness index over the connections' completion times, bytes retransmitted, wall time.\n");
    println!("## Goodput against planes (permutation: every flow crosses the spines)\n");
    println!("| planes | connections | MetaRoCE (16 paths) | RoCEv2 GBN+DCQCN |");
    println!("|---|---|---|---|");
    for planes in [1, 2, 4, 8] {
        let c = Case {
            planes,
            pattern: Pattern::Permutation,
            msg: 1 << 20,
            fail_at: None,
            loss: 0.0,
        };
        let (conns, meta, gbn) = both(&o, leaves, c);
        println!("| {planes} | {conns} | {meta} | {gbn} |");
    }
    println!("\n## All-to-all, 4 planes\n");
    println!("| connections | MetaRoCE (16 paths) | RoCEv2 GBN+DCQCN |");
    println!("|---|---|---|");
    let c = Case {
        planes: 4,
        pattern: Pattern::AllToAll,
        msg: 1 << 16,
        fail_at: None,
        loss: 0.0,
    };
    let (conns, meta, gbn) = both(&o, leaves, c);
    println!("| {conns} | {meta} | {gbn} |");
    println!("\n## Plane 0 of 4 fails for good at 25% of the ideal time (permutation)\n");
    println!("| MetaRoCE (16 paths) | RoCEv2 GBN+DCQCN |");
    println!("|---|---|");
    // The ideal time at 4 x 100 Gb/s, in ns, a quarter of it.
    let at = (bytes * 8 / 400 / 4).max(10 * US);
    let c = Case {
        planes: 4,
        pattern: Pattern::Permutation,
        msg: 1 << 20,
        fail_at: Some(at),
        loss: 0.0,
    };
    let (_, meta, gbn) = both(&o, leaves, c);
    println!("| {meta} | {gbn} |");
    println!(
        "\n## Random loss, 4 planes (permutation): each datagram that crosses the spines is \
         lost with probability p (data and ACKs alike)\n"
    );
    println!(
        "Meta reports about 86% of the clean throughput at 1% loss on hardware. Cells: \
         against the fluid ideal, as above, then against the same transport's run at p = 0.\n"
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
            planes: 4,
            pattern: Pattern::Permutation,
            msg: 1 << 20,
            fail_at: None,
            loss,
        };
        let (m, mw, g, gw) = runs(&o, leaves, c);
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
    }
    println!(
        "\n## Incast N:1 into one 100 Gb/s port: every sender WRITEs its bytes at once \
         (64 KiB messages) over 8 paths (MetaRoCE), receiver's rate hints on and off\n"
    );
    println!(
        "Goodput of the port; Jain's index over the senders' finish times; the port's \
         1 MiB queue (ECN above 100 KiB); round trips (of {:.1} us) until every 4-RTT \
         window stays fair and until the queue stays at most twice the marking \
         threshold (\"never\": not while all senders were active).\n",
        BASE_RTT_NS as f64 / 1e3
    );
    println!(
        "| N:1 | per sender | hints | goodput | Jain | peak queue | drops | CE marks | fair after | queue drained after | wall |"
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
                "| {n}:1 | {kib} KiB | {} | {goodput} | {:.2} | {} KiB | {} | {} | {} | {} | {:.1} s |",
                if hints { "on" } else { "off" },
                r.jain,
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

/// MetaRoCE and RoCEv2 on the same case: connections and both cells.
fn both(o: &Opts, leaves: usize, c: Case) -> (usize, String, String) {
    let (m, mw, g, gw) = runs(o, leaves, c);
    (m.connections, cell(&m, mw), cell(&g, gw))
}
