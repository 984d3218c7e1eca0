// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The go-back-N baseline is itself correct (so the comparison is fair): it
//! delivers every byte exactly, completes in order, and fails cleanly when the
//! network is gone.

mod common;

use common::*;
use metaroce_sim::clock::US;
use metaroce_sim::gbn::GbnConfig;
use metaroce_sim::network::PathFault;
use metaroce_sim::scenario::{build_world, pair_network, Transport};
use metaroce_sim::workload::{FlowSpec, MsgSpec, Op};

fn fast_gbn() -> Transport {
    // A short timeout keeps virtual time (not run time) small.
    let mut g = GbnConfig::new();
    g.rto_ns = GbnConfig::ib_timeout_ns(8);
    Transport::Gbn(g)
}

fn writes_and_sends(src: usize, dst: usize) -> FlowSpec {
    let msgs = (0..24)
        .map(|i| MsgSpec {
            op: [Op::Write, Op::Send, Op::WriteImm][i % 3],
            len: 1 + (i as u32 * 7919) % (40 << 10),
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

#[test]
fn gbn_exact_under_faults() {
    for seed in 0..6 {
        let f = Faults {
            loss: 0.02,
            dup: 0.02,
            corrupt: 0.01,
            jitter_ns: 2 * US,
            ..Default::default()
        };
        let mut w = build_world(faulty_pair(4, f), fast_gbn(), 2000 + seed);
        w.add_flow(writes_and_sends(0, 1));
        w.add_flow(writes_and_sends(1, 0));
        drive_ok(&mut w, &format!("gbn seed {seed}"));
    }
}

#[test]
fn gbn_fails_with_retry_exceeded_on_dead_path() {
    let mut w = build_world(pair_network(1), fast_gbn(), 2100);
    w.add_flow(FlowSpec::writes(0, 1, 4, 16 << 10, true));
    w.schedule_fault(PathFault {
        path: 0,
        down_at: 0,
        up_at: None,
    });
    assert!(w.drive(limits()).is_ok());
    let (src, _) = w.flow_logs(0);
    let st: Vec<_> = src.unwrap().send.iter().map(|l| l.wc.status).collect();
    assert_eq!(st[0], metaroce_proto::WcStatus::RetryExcErr);
    assert_eq!(st.len(), 4);
}
