// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Two connections over a lossy, reordering, duplicating link: every byte
//! arrives exactly, every work request completes exactly once and in order.

mod common;

use common::{pattern, LinkCfg, Pair};
use metaroce_proto::{Config, Opcode, QpId, WcOpcode, WcStatus, WorkRequest};
use proptest::prelude::*;

const MR_KEY: u32 = 0x77;
const MR_BASE: u64 = 0x10_0000;
const MR_LEN: usize = 1 << 20;

#[derive(Clone, Debug)]
struct Op {
    qp: u8,
    opcode: Opcode,
    len: u32,
}

/// Expected receive completion: receive wr_id, bytes, immediate.
type RecvExp = (u64, Vec<u8>, Option<u32>);

struct Expect {
    send: Vec<Vec<u64>>,
}

/// Posts `ops` from node 0 to node 1 and checks the outcome after driving; returns
/// how many payloads were placed from split datagrams.
fn run(ops: &[Op], link: LinkCfg, seed: u64, paths: u8) -> u64 {
    run_mtus(ops, link, seed, paths, [1024; 2])
}

/// As [`run`], with node 0 and node 1 segmenting at `mtus[0]` and `mtus[1]` bytes.
fn run_mtus(ops: &[Op], link: LinkCfg, seed: u64, paths: u8, mtus: [u32; 2]) -> u64 {
    let mut cfg = Config::new(1);
    cfg.paths = paths;
    let mut p = Pair::with_mtus(cfg, mtus, link, seed);
    let nqp = ops.iter().map(|o| o.qp).max().unwrap_or(0) + 1;
    let qps: Vec<QpId> = (0..nqp).map(|i| p.open_qp(u32::from(i))).collect();
    // Some QPs allow few READs and atomics at once (verbs max_rd_atomic).
    for (i, &qp) in qps.iter().enumerate() {
        p.nodes[0]
            .conn
            .set_max_rd_atomic(qp, ((seed >> (i % 16)) % 4) as u8)
            .unwrap();
    }
    p.nodes[1]
        .mem
        .mrs
        .insert(MR_KEY, (MR_BASE, vec![0u8; MR_LEN]));
    let mut exp = Expect {
        send: vec![Vec::new(); nqp as usize],
    };
    let mut recv_exp: Vec<Vec<RecvExp>> = vec![Vec::new(); nqp as usize];
    let mut writes: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut fetch_total: u64 = 0;
    let mut next_va = MR_BASE + 8;
    for (i, o) in ops.iter().enumerate() {
        let id = i as u64 + 1;
        let qp = qps[o.qp as usize];
        let data = pattern(seed ^ id, o.len as usize);
        p.nodes[0].mem.local.insert(id, data.clone());
        let mut wr = WorkRequest {
            wr_id: id,
            opcode: o.opcode,
            len: o.len,
            imm: id as u32,
            ..Default::default()
        };
        match o.opcode {
            Opcode::Send | Opcode::SendImm => {
                let rid = 1_000_000 + id;
                p.nodes[1].mem.recv.insert(rid, vec![0u8; o.len as usize]);
                p.nodes[1].conn.post_recv(qp, rid, o.len).unwrap();
                let imm = (o.opcode == Opcode::SendImm).then_some(id as u32);
                recv_exp[o.qp as usize].push((rid, data, imm));
            }
            Opcode::Write | Opcode::WriteImm | Opcode::Read => {
                wr.rkey = MR_KEY;
                wr.remote_addr = next_va;
                next_va += u64::from(o.len);
                if o.opcode == Opcode::Read {
                    // Read back bytes a previous WRITE put there, or zeros.
                    p.nodes[0].mem.local.insert(id, vec![0u8; o.len as usize]);
                } else {
                    writes.push((wr.remote_addr, data.clone()));
                }
                if o.opcode == Opcode::WriteImm {
                    let rid = 1_000_000 + id;
                    p.nodes[1].mem.recv.insert(rid, Vec::new());
                    p.nodes[1].conn.post_recv(qp, rid, 0).unwrap();
                    recv_exp[o.qp as usize].push((rid, data.clone(), Some(id as u32)));
                }
            }
            Opcode::FetchAdd | Opcode::CompareSwap => {
                wr.opcode = Opcode::FetchAdd;
                wr.rkey = MR_KEY;
                wr.remote_addr = MR_BASE;
                wr.compare_add = id;
                wr.len = 8;
                fetch_total += id;
                p.nodes[0].mem.local.insert(id, vec![0u8; 8]);
            }
        }
        p.nodes[0].conn.post_send(qp, wr).unwrap();
        exp.send[o.qp as usize].push(id);
    }
    let nsend = ops.len();
    let nrecv: usize = recv_exp.iter().map(|v| v.len()).sum();
    p.drive_until(2_000_000, |p| {
        p.nodes[0].completions.len() >= nsend && p.nodes[1].completions.len() >= nrecv
    });
    // Let stragglers (duplicates, late ACKs) drain; nothing more may complete.
    for _ in 0..2000 {
        if !p.step() {
            break;
        }
    }
    let c0 = &p.nodes[0].completions;
    assert_eq!(c0.len(), nsend, "requester completions");
    assert!(
        c0.iter().all(|c| c.status == WcStatus::Success),
        "{:?}",
        c0.iter().find(|c| c.status != WcStatus::Success)
    );
    for (qi, ids) in exp.send.iter().enumerate() {
        let got: Vec<u64> = c0
            .iter()
            .filter(|c| c.qp == qps[qi])
            .map(|c| c.wr_id)
            .collect();
        assert_eq!(&got, ids, "requester order on qp {qi}");
    }
    let c1 = &p.nodes[1].completions;
    assert_eq!(c1.len(), nrecv, "responder completions");
    for (qi, exp) in recv_exp.iter().enumerate() {
        let got: Vec<_> = c1.iter().filter(|c| c.qp == qps[qi]).collect();
        assert_eq!(got.len(), exp.len());
        for (c, (rid, data, imm)) in got.iter().zip(exp) {
            assert_eq!(c.wr_id, *rid, "responder order on qp {qi}");
            assert_eq!(c.status, WcStatus::Success);
            assert_eq!(c.imm, *imm);
            assert_eq!(c.byte_len as usize, data.len());
            if c.opcode == WcOpcode::Recv {
                assert_eq!(&p.nodes[1].mem.recv[rid], data, "SEND bytes");
            }
        }
    }
    let mr = &p.nodes[1].mem.mrs[&MR_KEY].1;
    for (va, data) in &writes {
        let off = (va - MR_BASE) as usize;
        assert_eq!(
            &mr[off..off + data.len()],
            &data[..],
            "WRITE bytes at {va:#x}"
        );
    }
    let counter = u64::from_ne_bytes(mr[..8].try_into().unwrap());
    assert_eq!(counter, fetch_total, "atomics executed exactly once");
    assert_eq!(
        p.nodes[1].mem.atomics_executed as usize,
        ops.iter().filter(|o| o.opcode.is_atomic()).count()
    );
    p.nodes.iter().map(|n| n.mem.split_placements).sum()
}

fn op_strategy() -> impl Strategy<Value = Op> {
    (
        0u8..3,
        0u8..7,
        prop_oneof![0u32..64, 64u32..3000, 3000u32..20_000],
    )
        .prop_map(|(qp, k, len)| {
            let opcode = [
                Opcode::Send,
                Opcode::SendImm,
                Opcode::Write,
                Opcode::WriteImm,
                Opcode::Read,
                Opcode::FetchAdd,
                Opcode::CompareSwap,
            ][k as usize];
            Op { qp, opcode, len }
        })
}

fn mixed_ops() -> Vec<Op> {
    let mut v = Vec::new();
    for i in 0..40u32 {
        let opcode = [
            Opcode::Write,
            Opcode::Send,
            Opcode::WriteImm,
            Opcode::Read,
            Opcode::FetchAdd,
        ][i as usize % 5];
        v.push(Op {
            qp: (i % 2) as u8,
            opcode,
            len: (i * 997) % 9000,
        });
    }
    v
}

#[test]
fn lossless_mixed() {
    run(&mixed_ops(), LinkCfg::default(), 1, 8);
}

// A driver hands the core the linear part of a socket buffer and places the paged
// rest itself (Connection::handle_datagram_split): the same bytes land, READ
// responses included, wherever in the payload the split falls.
#[test]
fn split_datagrams_place_the_same_bytes() {
    let split = run(
        &mixed_ops(),
        LinkCfg {
            split: 700,
            loss: 20,
            jitter: 20_000,
            ..Default::default()
        },
        9,
        4,
    );
    assert!(
        split > 20,
        "only {split} payloads placed from split datagrams"
    );
}

#[test]
fn loss_5pct_reorder() {
    run(
        &mixed_ops(),
        LinkCfg {
            loss: 50,
            jitter: 20_000,
            ..Default::default()
        },
        2,
        8,
    );
}

#[test]
fn loss_20pct_dup_reorder_single_path() {
    run(
        &mixed_ops(),
        LinkCfg {
            loss: 200,
            dup: 50,
            jitter: 30_000,
            ce: 20,
            ..Default::default()
        },
        3,
        1,
    );
}

// spec: MR-PATH-3, MR-RTX-1, MR-SACK-17
#[test]
fn loss_20pct_dup_reorder_multipath() {
    run(
        &mixed_ops(),
        LinkCfg {
            loss: 200,
            dup: 50,
            jitter: 30_000,
            ce: 20,
            ..Default::default()
        },
        4,
        8,
    );
}

// Each side segments at its own size (the driver's are 1392 and 8892 bytes at
// Ethernet MTUs 1500 and 9000); READ responses come back at the responder's.
// spec: MR-WIRE-6, MR-OP-1, MR-OP-7
#[test]
fn peers_with_different_mtus() {
    run_mtus(
        &mixed_ops(),
        LinkCfg {
            loss: 50,
            jitter: 20_000,
            ..Default::default()
        },
        5,
        8,
        [1392, 8892],
    );
    run_mtus(
        &mixed_ops(),
        LinkCfg {
            loss: 50,
            jitter: 20_000,
            ..Default::default()
        },
        6,
        8,
        [8892, 1024],
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    // spec: MR-CMP-1, MR-CMP-4, MR-CMP-5, MR-ATOM-1, MR-ATOM-2, MR-ATOM-4, MR-RTX-1, MR-RTX-2, MR-SACK-13, MR-SACK-14, MR-SACK-17, MR-PLC-2, MR-PLC-3
    #[test]
    fn exactly_once_in_order(
        ops in proptest::collection::vec(op_strategy(), 1..24),
        loss in 0u32..=200,
        dup in 0u32..=50,
        jitter in 0u64..40_000,
        ce in 0u32..50,
        paths in 1u8..=8,
        split in prop_oneof![Just(0u32), 0u32..=1000],
        seed in any::<u64>(),
    ) {
        run(&ops, LinkCfg { loss, dup, ce, jitter, latency: 5_000, split }, seed, paths);
    }
}
