// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Regression tests for defects found by the spec review (end to end over
//! the test link).

mod common;

use common::{pattern, wr, LinkCfg, Pair};
use metaroce_proto::{Config, Event, Opcode, PostError, WcOpcode, WcStatus, WorkRequest};

fn cfg() -> Config {
    let mut c = Config::new(1);
    c.mtu = 1024;
    c
}

// spec: MR-RNR-3, MR-RNR-6, MR-CMP-5
#[test]
fn second_rnr_hold_gets_its_own_timer() {
    let mut c = cfg();
    c.paths = 1;
    let mut p = Pair::new(c, LinkCfg::default(), 11);
    let qp = p.open_qp(0);
    for id in 1..=2 {
        p.nodes[0].mem.local.insert(id, pattern(id, 500));
    }
    p.nodes[0]
        .conn
        .post_send(qp, wr(1, Opcode::Send, 500))
        .unwrap();
    p.run_until(50);
    p.nodes[0]
        .conn
        .post_send(qp, wr(2, Opcode::Send, 500))
        .unwrap();
    p.run_until(60);
    assert!(p.nodes[1].conn.stats().rx_naked >= 2, "both SENDs met RNR");
    for id in [70, 71] {
        p.nodes[1].mem.recv.insert(id, vec![0; 500]);
        p.nodes[1].conn.post_recv(qp, id, 500).unwrap();
    }
    p.drive_until(10_000, |p| p.nodes[0].completions.len() == 2);
    assert!(p.nodes[0]
        .completions
        .iter()
        .all(|c| c.status == WcStatus::Success));
}

// spec: MR-RNR-5
#[test]
fn rnr_retries_count_episodes_not_packets() {
    let mut c = cfg();
    c.rnr_retry = 2;
    c.paths = 1;
    let mut p = Pair::new(c, LinkCfg::default(), 12);
    let qp = p.open_qp(0);
    p.nodes[0].mem.local.insert(1, pattern(1, 4000));
    // Four segments, all NAKed RNR in the first episode.
    p.nodes[0]
        .conn
        .post_send(qp, wr(1, Opcode::Send, 4000))
        .unwrap();
    p.run_until(150);
    assert!(p.nodes[1].conn.stats().rx_naked >= 4);
    assert!(
        p.nodes[0].completions.is_empty(),
        "{:?}",
        p.nodes[0].completions
    );
    p.nodes[1].mem.recv.insert(9, vec![0; 4000]);
    p.nodes[1].conn.post_recv(qp, 9, 4000).unwrap();
    p.drive_until(10_000, |p| p.nodes[0].completions.len() == 1);
    assert_eq!(p.nodes[0].completions[0].status, WcStatus::Success);
}

// spec: MR-QP-4
#[test]
fn requester_ahead_of_responder_rtr_just_retries() {
    let mut p = Pair::new(cfg(), LinkCfg::default(), 13);
    // Node 0 reaches RTS; node 1 has the connection but not the QP yet.
    let qp = p.nodes[0].conn.open_qp(100, 200).unwrap();
    p.nodes[0].mem.local.insert(1, pattern(1, 3000));
    p.nodes[0]
        .conn
        .post_send(qp, wr(1, Opcode::Send, 3000))
        .unwrap();
    p.run_until(300);
    let s = *p.nodes[1].conn.stats();
    assert!(
        s.rx_dropped > 0 && s.rx_naked == 0 && s.tx_naks == 0,
        "{s:?}"
    );
    assert!(p.nodes[0].completions.is_empty());
    let rq = p.nodes[1].conn.open_qp(200, 100).unwrap();
    p.nodes[1].mem.recv.insert(5, vec![0; 3000]);
    p.nodes[1].conn.post_recv(rq, 5, 3000).unwrap();
    p.drive_until(200_000, |p| {
        p.nodes[0].completions.len() == 1 && p.nodes[1].completions.len() == 1
    });
    assert_eq!(p.nodes[0].completions[0].status, WcStatus::Success);
    assert_eq!(p.nodes[1].mem.recv[&5], pattern(1, 3000));
}

// spec: MR-CMP-7
#[test]
fn local_placement_failure_of_read_response() {
    let mut p = Pair::new(cfg(), LinkCfg::default(), 14);
    let qp = p.open_qp(0);
    p.nodes[1].mem.mrs.insert(3, (0, pattern(3, 8192)));
    // No local buffer for wr 1: the driver refuses to place the response.
    p.nodes[0]
        .conn
        .post_send(
            qp,
            WorkRequest {
                rkey: 3,
                ..wr(1, Opcode::Read, 8192)
            },
        )
        .unwrap();
    p.nodes[0].mem.local.insert(2, vec![0; 8]);
    p.nodes[0]
        .conn
        .post_send(
            qp,
            WorkRequest {
                rkey: 3,
                ..wr(2, Opcode::FetchAdd, 8)
            },
        )
        .unwrap();
    p.drive_until(100_000, |p| p.nodes[0].completions.len() == 2);
    let c = &p.nodes[0].completions;
    assert_eq!(
        (c[0].status, c[0].opcode),
        (WcStatus::LocProtErr, WcOpcode::RdmaRead)
    );
    assert_eq!(c[1].status, WcStatus::WrFlushErr);
    assert!(p.nodes[0].events.contains(&Event::QpError {
        qp,
        status: WcStatus::LocProtErr
    }));
    // The responder's responses were acknowledged: nothing stays in flight.
    p.drive_until(100_000, |p| p.nodes[1].conn.bytes_in_flight() == 0);
    for _ in 0..2000 {
        if !p.step() {
            break;
        }
    }
    assert_eq!(p.nodes[1].conn.stats().timeouts, 0);
    assert_eq!(p.nodes[1].conn.bytes_in_flight(), 0);
}

// spec: MR-QP-6, MR-CMP-6
#[test]
fn qp_to_error_flushes_everything_in_order() {
    let mut p = Pair::new(cfg(), LinkCfg::default(), 15);
    let qp = p.open_qp(0);
    for id in 1..=3 {
        p.nodes[0].mem.local.insert(id, pattern(id, 2000));
        p.nodes[0]
            .conn
            .post_send(qp, wr(id, Opcode::Send, 2000))
            .unwrap();
    }
    p.nodes[0].conn.post_recv(qp, 10, 100).unwrap();
    p.nodes[0].conn.post_recv(qp, 11, 100).unwrap();
    p.nodes[0].conn.qp_to_error(qp).unwrap();
    p.drive_until(10_000, |p| p.nodes[0].completions.len() == 5);
    let got: Vec<_> = p.nodes[0]
        .completions
        .iter()
        .map(|c| (c.wr_id, c.status))
        .collect();
    let f = WcStatus::WrFlushErr;
    assert_eq!(got, vec![(1, f), (2, f), (3, f), (10, f), (11, f)]);
    assert!(!p.nodes[0]
        .events
        .iter()
        .any(|e| matches!(e, Event::QpError { .. })));
    assert_eq!(
        p.nodes[0].conn.post_send(qp, wr(4, Opcode::Send, 1)),
        Err(PostError::QpError)
    );
    // Nothing of the flushed QP reaches the peer.
    assert_eq!(p.nodes[1].conn.stats().rx_bytes, 0);
}
