// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! `ack-policy`: what the receiver's ACK coalescing ([MR-SACK-9], [MR-SACK-10]) costs
//! or saves, clean, under loss and under reordering: the same bulk transfers with
//! `ack_every` from 1 (an ACK per data packet) up, every other setting the core's
//! default, and the delayed-ACK hold of the driver (2 ms, capped by the core at a
//! quarter of the minimum RTO) or of the core (10 us).
//!
//! The second table: `path_burst` ([MR-PATH-12]), packets in a row on one path,
//! with `ack_every` 8. The third: the pacing gain ([MR-CC-10]), the pacing rate as a
//! share of `window / SRTT`, with `ack_every` 8 (the driver's). The fourth:
//! `window_ack_req` ([MR-SACK-20]), the largest window whose filling asks for an ACK.
//!
//! Usage: `ack-policy [--seeds N] [--bytes MIB]` (cargo run --release -p metaroce-sim
//! --bin ack-policy).

use metaroce_proto::Config;
use metaroce_sim::clock::US;
use metaroce_sim::host::HostConfig;
use metaroce_sim::scenario::{self, RunResult, Transport};

fn transport(ack_every: u32, ack_delay_ns: u64, path_burst: u32) -> Transport {
    transport_paced(
        ack_every,
        ack_delay_ns,
        path_burst,
        Config::new(1).pacing_gain,
    )
}

fn transport_paced(ack_every: u32, ack_delay_ns: u64, path_burst: u32, gain: u32) -> Transport {
    transport_with(ack_every, ack_delay_ns, path_burst, gain, u32::MAX)
}

fn transport_with(
    ack_every: u32,
    ack_delay_ns: u64,
    path_burst: u32,
    gain: u32,
    window_ack_req: u32,
) -> Transport {
    let mut c = Config::new(1);
    c.window_ack_req = window_ack_req;
    c.paths = 8;
    c.ack_every = ack_every;
    c.ack_delay_ns = ack_delay_ns;
    c.path_burst = path_burst;
    c.pacing_gain = gain;
    Transport::Meta(HostConfig::new(c))
}

struct Sum {
    gbps: Vec<f64>,
    acks: u64,
    data: u64,
    retx_bytes: u64,
    bytes: u64,
    timeouts: u64,
    failed: usize,
}

fn run(cell: &str, t: Transport, seeds: u64, bytes: u64) -> Sum {
    let mut s = Sum {
        gbps: Vec::new(),
        acks: 0,
        data: 0,
        retx_bytes: 0,
        bytes: 0,
        timeouts: 0,
        failed: 0,
    };
    for seed in 1..=seeds {
        let (r, acks, data): (RunResult, u64, u64) = match cell {
            "clean" => scenario::bulk_with_stats(t, 8, 0.0, 0, bytes, 65536, seed),
            "loss 1%" => scenario::bulk_with_stats(t, 8, 0.01, 0, bytes, 65536, seed),
            "loss 5%" => scenario::bulk_with_stats(t, 8, 0.05, 0, bytes, 65536, seed),
            _ => scenario::reordering_with_stats(t, 4 * US, false, bytes, 65536, seed),
        };
        if !r.ok() {
            s.failed += 1;
        }
        s.gbps.push(r.goodput_gbps());
        s.acks += acks;
        s.data += data;
        s.retx_bytes += r.retransmitted_bytes();
        s.bytes += r.bytes;
        s.timeouts += r.timeouts;
    }
    s
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// A table row: the first columns, then the sums.
fn row(first: &str, mut s: Sum) {
    println!(
        "| {first} | {:.1} | {:.3} | {:.2} | {} | {} |",
        median(&mut s.gbps),
        s.acks as f64 / s.data.max(1) as f64,
        100.0 * s.retx_bytes as f64 / s.bytes.max(1) as f64,
        s.timeouts,
        s.failed
    );
}

fn main() {
    let mut seeds = 3u64;
    let mut mib = 8u64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let v = args.next().and_then(|s| s.parse().ok());
        match (a.as_str(), v) {
            ("--seeds", Some(n)) => seeds = n,
            ("--bytes", Some(n)) => mib = n,
            _ => {
                eprintln!("usage: ack-policy [--seeds N] [--bytes MIB]");
                std::process::exit(2);
            }
        }
    }
    println!(
        "8 paths, 100 Gb/s, 4 KiB MTU, {mib} MiB of 64 KiB WRITEs, {seeds} seeds; \
         reorder = 1-8 us path delays + 4 us per-packet jitter (not FIFO)\n"
    );
    println!(
        "| cell | ack_every | ack hold | goodput Gb/s (median) | ACKs per data packet | \
         retransmitted % | timeouts | failed runs |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for cell in ["clean", "loss 1%", "loss 5%", "reorder"] {
        for (every, delay) in [
            (1, 10_000),
            (4, 10_000),
            (8, 10_000),
            (8, 2_000_000),
            (16, 2_000_000),
            (32, 2_000_000),
        ] {
            let s = run(cell, transport(every, delay, 1), seeds, mib << 20);
            row(&format!("{cell} | {every} | {} us", delay / 1000), s);
        }
    }
    println!(
        "\n| cell | path_burst | goodput Gb/s (median) | ACKs per data packet | \
         retransmitted % | timeouts | failed runs |"
    );
    println!("|---|---|---|---|---|---|---|");
    for cell in ["clean", "loss 1%", "loss 5%", "reorder"] {
        for burst in [1, 4, 8, 16] {
            let s = run(cell, transport(8, 10_000, burst), seeds, mib << 20);
            row(&format!("{cell} | {burst}"), s);
        }
    }
    println!(
        "\n| cell | pacing gain | goodput Gb/s (median) | ACKs per data packet | \
         retransmitted % | timeouts | failed runs |"
    );
    println!("|---|---|---|---|---|---|---|");
    for cell in ["clean", "loss 1%", "loss 5%", "reorder"] {
        for gain in [1024, 1280, 2048] {
            let s = run(cell, transport_paced(8, 10_000, 1, gain), seeds, mib << 20);
            row(&format!("{cell} | {:.2}", f64::from(gain) / 1024.0), s);
        }
    }
    println!(
        "\n| cell | window_ack_req | ack hold | goodput Gb/s (median) | ACKs per data packet | \
         retransmitted % | timeouts | failed runs |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let gain = Config::new(1).pacing_gain;
    for cell in ["clean", "loss 1%", "loss 5%", "reorder"] {
        for (limit, delay) in [
            (u32::MAX, 10_000),
            (16, 10_000),
            (u32::MAX, 2_000_000),
            (16, 2_000_000),
        ] {
            let t = transport_with(8, delay, 1, gain, limit);
            let limit = if limit == u32::MAX {
                "any".to_string()
            } else {
                limit.to_string()
            };
            row(
                &format!("{cell} | {limit} | {} us", delay / 1000),
                run(cell, t, seeds, mib << 20),
            );
        }
    }
}
