// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The report's scenarios at small sizes: they run, every MetaRoCE run
//! completes correctly, and the headline numbers stay in a sane range (loose
//! bounds that catch regressions in the core or the simulator, not tuning).

use metaroce_sim::clock::US;
use metaroce_sim::scenario::{self, Transport};

const BYTES: u64 = 4 << 20;
const MSG: u32 = 256 << 10;

#[test]
fn bulk_lossless_and_lossy() {
    for paths in [1u8, 8] {
        let clean = scenario::bulk(
            Transport::meta(paths),
            paths as usize,
            0.0,
            0,
            BYTES,
            MSG,
            1,
        );
        assert!(clean.ok(), "{clean:?}");
        assert!(
            clean.goodput_gbps() > 80.0,
            "lossless {paths} paths: {:.1} Gb/s",
            clean.goodput_gbps()
        );
        let lossy = scenario::bulk(
            Transport::meta(paths),
            paths as usize,
            0.01,
            0,
            BYTES,
            MSG,
            1,
        );
        assert!(lossy.ok(), "{lossy:?}");
        assert!(
            lossy.goodput_gbps() > 0.5 * clean.goodput_gbps(),
            "1% loss: {:.1} Gb/s",
            lossy.goodput_gbps()
        );
        let gbn = scenario::bulk(Transport::gbn(), paths as usize, 0.0, 0, BYTES, MSG, 1);
        assert!(gbn.ok() && gbn.goodput_gbps() > 80.0, "{gbn:?}");
    }
}

#[test]
fn reordering_costs_metaroce_little() {
    for fifo in [true, false] {
        let r = scenario::reordering(Transport::meta(8), 8 * US, fifo, BYTES, MSG, 2);
        assert!(r.ok() && r.goodput_gbps() > 70.0, "fifo {fifo}: {r:?}");
    }
}

#[test]
fn blackhole_metaroce_recovers_gbn_fails() {
    let b = scenario::blackhole(Transport::meta(8), BYTES, MSG, 3);
    assert!(b.faulty.ok(), "{:?}", b.faulty);
    assert!(b.faulty.paths_retired > 0);
    let mut g = metaroce_sim::gbn::GbnConfig::new();
    g.rto_ns = metaroce_sim::gbn::GbnConfig::ib_timeout_ns(6);
    let b = scenario::blackhole(Transport::Gbn(g), BYTES, MSG, 3);
    assert!(
        !b.faulty.ok() && b.faulty.failed_flows == 1,
        "{:?}",
        b.faulty
    );
}

#[test]
fn incast_sixteen_to_one_metrics() {
    let r = scenario::incast(Transport::meta(8), 16, 256 << 10, 64 << 10, 4);
    assert!(r.run.ok(), "{:?}", r.run);
    assert!(r.jain > 0.9, "jain {}", r.jain);
    assert!(r.peak_queue <= 1 << 20);
    let r = scenario::incast(Transport::meta_suggested(8), 16, 256 << 10, 64 << 10, 4);
    assert!(r.run.ok(), "{:?}", r.run);
}
