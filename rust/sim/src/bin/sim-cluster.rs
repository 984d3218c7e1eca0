// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! `make sim-cluster`: MetaRoCE and RoCEv2 (go-back-N with DCQCN) on multiplane
//! leaf-spine fabrics (issue 38): permutation and all-to-all traffic against the
//! fluid ideal, goodput against the number of planes, and a whole plane failing
//! mid-run. Deterministic per seed; prints Markdown tables and each run's wall time.
//!
//! ```text
//! sim-cluster [--hosts N] [--mib M] [--seed S]
//! ```

use std::time::Instant;

use metaroce_sim::clock::US;
use metaroce_sim::cluster::{multiplane_network, run, ClusterResult, Pattern};
use metaroce_sim::dcqcn::DcqcnConfig;
use metaroce_sim::gbn::GbnConfig;
use metaroce_sim::scenario::{Transport, GBPS_100};
use metaroce_sim::with_stack;

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
        "{:.0}% ({} us, retx {:.1}%, {:.1} s)",
        100.0 * r.of_ideal(),
        r.run.elapsed_ns / 1000,
        100.0 * retx,
        wall
    )
}

fn timed(f: impl FnOnce() -> ClusterResult + Send + 'static) -> (ClusterResult, f64) {
    let t = Instant::now();
    let r = with_stack(f);
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
    println!("Cells: completion time of the fluid ideal over the run's (100% = the physical limit), the run's completion time, bytes retransmitted, wall time.\n");
    println!("## Goodput against planes (permutation: every flow crosses the spines)\n");
    println!("| planes | connections | MetaRoCE (16 paths) | RoCEv2 GBN+DCQCN |");
    println!("|---|---|---|---|");
    for planes in [1, 2, 4, 8] {
        let (hosts, seed) = (o.hosts, o.seed);
        let (m, mw) = timed(move || {
            run(
                Transport::meta(16),
                multiplane_network(hosts, planes, leaves),
                Pattern::Permutation,
                bytes,
                1 << 20,
                None,
                seed,
            )
        });
        let (g, gw) = timed(move || {
            run(
                gbn_dcqcn(),
                multiplane_network(hosts, planes, leaves),
                Pattern::Permutation,
                bytes,
                1 << 20,
                None,
                seed,
            )
        });
        println!(
            "| {planes} | {} | {} | {} |",
            m.connections,
            cell(&m, mw),
            cell(&g, gw)
        );
    }
    println!("\n## All-to-all, 4 planes\n");
    println!("| connections | MetaRoCE (16 paths) | RoCEv2 GBN+DCQCN |");
    println!("|---|---|---|");
    {
        let (hosts, seed) = (o.hosts, o.seed);
        let (m, mw) = timed(move || {
            run(
                Transport::meta(16),
                multiplane_network(hosts, 4, leaves),
                Pattern::AllToAll,
                bytes,
                1 << 16,
                None,
                seed,
            )
        });
        let (g, gw) = timed(move || {
            run(
                gbn_dcqcn(),
                multiplane_network(hosts, 4, leaves),
                Pattern::AllToAll,
                bytes,
                1 << 16,
                None,
                seed,
            )
        });
        println!(
            "| {} | {} | {} |",
            m.connections,
            cell(&m, mw),
            cell(&g, gw)
        );
    }
    println!("\n## Plane 0 of 4 fails for good at 25% of the ideal time (permutation)\n");
    println!("| MetaRoCE (16 paths) | RoCEv2 GBN+DCQCN |");
    println!("|---|---|");
    {
        let (hosts, seed) = (o.hosts, o.seed);
        let at = (bytes * 8 * 1000 / (4 * 100_000_000_000 / 1_000_000) / 4).max(10 * US);
        let (m, mw) = timed(move || {
            run(
                Transport::meta(16),
                multiplane_network(hosts, 4, leaves),
                Pattern::Permutation,
                bytes,
                1 << 20,
                Some(at),
                seed,
            )
        });
        let (g, gw) = timed(move || {
            run(
                gbn_dcqcn(),
                multiplane_network(hosts, 4, leaves),
                Pattern::Permutation,
                bytes,
                1 << 20,
                Some(at),
                seed,
            )
        });
        println!("| {} | {} |", cell(&m, mw), cell(&g, gw));
    }
}
