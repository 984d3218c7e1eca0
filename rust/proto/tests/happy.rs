// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! End-to-end scenarios over a lossless link.

mod common;

use common::{pattern, wr, LinkCfg, Pair};
use metaroce_proto::{Config, Opcode, WcOpcode, WcStatus, WorkRequest};

fn cfg() -> Config {
    let mut c = Config::new(1);
    c.mtu = 1024;
    c
}

// spec: MR-OP-1, MR-OP-4, MR-OP-5, MR-OP-7, MR-CMP-2, MR-CMP-3, MR-ATOM-3, MR-PLC-4
#[test]
fn send_write_read_atomic_lossless() {
    send_write_read_atomic_lossless_body();
}

fn send_write_read_atomic_lossless_body() {
    let mut p = Pair::new(cfg(), LinkCfg::default(), 7);
    let qp = p.open_qp(1);
    // Responder memory.
    p.nodes[1]
        .mem
        .mrs
        .insert(0x55, (0x1000, vec![0u8; 64 * 1024]));
    p.nodes[1].mem.mrs.get_mut(&0x55).unwrap().1[0x800..0x808].copy_from_slice(&5u64.to_ne_bytes());
    // SEND of 10 KiB.
    let send = pattern(1, 10_000);
    p.nodes[0].mem.local.insert(1, send.clone());
    p.nodes[1].mem.recv.insert(900, vec![0u8; 16_384]);
    p.nodes[1].conn.post_recv(qp, 900, 16_384).unwrap();
    p.nodes[0]
        .conn
        .post_send(
            qp,
            WorkRequest {
                imm: 0xabc,
                ..wr(1, Opcode::SendImm, 10_000)
            },
        )
        .unwrap();
    // WRITE 20 000 bytes then WRITE_IMM.
    let data = pattern(2, 20_000);
    p.nodes[0].mem.local.insert(2, data.clone());
    p.nodes[0]
        .conn
        .post_send(
            qp,
            WorkRequest {
                remote_addr: 0x2000,
                rkey: 0x55,
                ..wr(2, Opcode::Write, 20_000)
            },
        )
        .unwrap();
    p.nodes[1].mem.recv.insert(901, vec![0u8; 0]);
    p.nodes[1].conn.post_recv(qp, 901, 0).unwrap();
    p.nodes[0].mem.local.insert(3, vec![]);
    p.nodes[0]
        .conn
        .post_send(
            qp,
            WorkRequest {
                remote_addr: 0x2000,
                rkey: 0x55,
                imm: 7,
                ..wr(3, Opcode::WriteImm, 0)
            },
        )
        .unwrap();
    // READ it back.
    p.nodes[0].mem.local.insert(4, vec![0u8; 20_000]);
    p.nodes[0]
        .conn
        .post_send(
            qp,
            WorkRequest {
                remote_addr: 0x2000,
                rkey: 0x55,
                ..wr(4, Opcode::Read, 20_000)
            },
        )
        .unwrap();
    // FETCH_ADD 3 on 5.
    p.nodes[0].mem.local.insert(5, vec![0u8; 8]);
    p.nodes[0]
        .conn
        .post_send(
            qp,
            WorkRequest {
                remote_addr: 0x1800,
                rkey: 0x55,
                compare_add: 3,
                ..wr(5, Opcode::FetchAdd, 8)
            },
        )
        .unwrap();
    p.drive_until(10_000, |p| {
        p.nodes[0].completions.len() == 5 && p.nodes[1].completions.len() == 2
    });
    let c0 = &p.nodes[0].completions;
    assert_eq!(
        c0.iter().map(|c| c.wr_id).collect::<Vec<_>>(),
        vec![1, 2, 3, 4, 5]
    );
    assert!(c0.iter().all(|c| c.status == WcStatus::Success), "{c0:?}");
    let c1 = &p.nodes[1].completions;
    assert_eq!(c1[0].wr_id, 900);
    assert_eq!(c1[0].opcode, WcOpcode::Recv);
    assert_eq!(c1[0].imm, Some(0xabc));
    assert_eq!(c1[0].byte_len, 10_000);
    assert_eq!(c1[1].opcode, WcOpcode::RecvRdmaWithImm);
    assert_eq!(c1[1].imm, Some(7));
    assert_eq!(&p.nodes[1].mem.recv[&900][..10_000], &send[..]);
    assert_eq!(
        &p.nodes[1].mem.mrs[&0x55].1[0x1000..0x1000 + 20_000],
        &data[..]
    );
    assert_eq!(p.nodes[0].mem.local[&4], data);
    assert_eq!(
        u64::from_ne_bytes(p.nodes[0].mem.local[&5][..].try_into().unwrap()),
        5
    );
    assert_eq!(
        &p.nodes[1].mem.mrs[&0x55].1[0x800..0x808],
        &8u64.to_ne_bytes()
    );
    assert_eq!(p.nodes[1].mem.atomics_executed, 1);
}
