// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Error paths: retry exhaustion, RNR, remote access errors, path retirement.

mod common;

use common::{pattern, wr, LinkCfg, Pair};
use metaroce_proto::{Config, Event, Opcode, WcStatus, WorkRequest};

fn cfg() -> Config {
    let mut c = Config::new(1);
    c.mtu = 1024;
    c
}

// spec: MR-RTX-7, MR-RTX-8, MR-CMP-6, MR-PATH-5, MR-PATH-7
#[test]
fn retry_exhaustion_fails_then_flushes() {
    let mut c = cfg();
    c.paths = 2;
    c.retry_limit = 2;
    let mut p = Pair::new(c, LinkCfg::default(), 1);
    let qp = p.open_qp(0);
    p.mute_b = true;
    for id in 1..=3 {
        p.nodes[0].mem.local.insert(id, pattern(id, 3000));
        p.nodes[0]
            .conn
            .post_send(
                qp,
                WorkRequest {
                    rkey: 1,
                    remote_addr: 0,
                    ..wr(id, Opcode::Write, 3000)
                },
            )
            .unwrap();
    }
    p.nodes[1].mem.mrs.insert(1, (0, vec![0; 4096]));
    p.drive_until(100_000, |p| p.nodes[0].completions.len() == 3);
    let c = &p.nodes[0].completions;
    assert_eq!(c[0].status, WcStatus::RetryExcErr);
    assert_eq!(c[1].status, WcStatus::WrFlushErr);
    assert_eq!(c[2].status, WcStatus::WrFlushErr);
    assert!(p.nodes[0].events.iter().any(|e| matches!(
        e,
        Event::QpError {
            status: WcStatus::RetryExcErr,
            ..
        }
    )));
    assert!(p.nodes[0]
        .events
        .iter()
        .any(|e| matches!(e, Event::PathRetired { .. })));
    assert_eq!(
        p.nodes[0].conn.post_send(qp, wr(9, Opcode::Send, 1)),
        Err(metaroce_proto::PostError::QpError)
    );
}

// spec: MR-RTX-13, MR-QP-4
#[test]
fn qp_whose_peer_drops_its_requests_fails_while_another_streams() {
    let mut c = cfg();
    c.paths = 2;
    c.retry_limit = 7;
    let mut p = Pair::new(c, LinkCfg::default(), 11);
    let live = p.open_qp(0);
    let dropped = p.open_qp(1);
    p.nodes[0].conn.set_retry_limit(dropped, 2).unwrap();
    // The peer unbinds QP 1 and drops its requests; QP 0 goes on.
    p.nodes[1].conn.close_qp(dropped);
    p.nodes[1].mem.mrs.insert(1, (0, vec![0; 4096]));
    let write = |id: u64| WorkRequest {
        rkey: 1,
        remote_addr: 0,
        ..wr(id, Opcode::Write, 2000)
    };
    p.nodes[0].mem.local.insert(1_000, pattern(1_000, 2000));
    p.nodes[0].conn.post_send(dropped, write(1_000)).unwrap();
    let mut posted = 0u64;
    let mut failed_at = None;
    for _ in 0..200_000 {
        let done = p.nodes[0]
            .completions
            .iter()
            .filter(|c| c.qp == live)
            .count() as u64;
        while posted - done < 4 {
            posted += 1;
            p.nodes[0].mem.local.insert(posted, pattern(posted, 2000));
            p.nodes[0].conn.post_send(live, write(posted)).unwrap();
        }
        p.step();
        if failed_at.is_none() && p.nodes[0].completions.iter().any(|c| c.qp == dropped) {
            failed_at = Some(done);
        }
        if failed_at.is_some_and(|at| done >= at + 50) {
            break;
        }
    }
    let at = failed_at.expect("the dropped QP's request never failed");
    let c = &p.nodes[0].completions;
    let mine: Vec<_> = c.iter().filter(|c| c.qp == dropped).collect();
    assert_eq!(mine.len(), 1);
    assert_eq!(mine[0].wr_id, 1_000);
    assert_eq!(mine[0].status, WcStatus::RetryExcErr);
    // The other QP streamed all along, and goes on after the failure.
    assert!(at > 0, "no WRITE of the live QP completed first");
    let live_done: Vec<_> = c.iter().filter(|c| c.qp == live).collect();
    assert!(live_done.len() as u64 >= at + 50);
    assert!(live_done.iter().all(|c| c.status == WcStatus::Success));
    assert_eq!(
        p.nodes[0].conn.post_send(dropped, write(2_000)),
        Err(metaroce_proto::PostError::QpError)
    );
}

// spec: MR-RNR-1, MR-RNR-3
#[test]
fn rnr_waits_for_receive_then_completes() {
    let mut p = Pair::new(cfg(), LinkCfg::default(), 2);
    let qp = p.open_qp(0);
    let data = pattern(5, 2500);
    p.nodes[0].mem.local.insert(1, data.clone());
    p.nodes[0]
        .conn
        .post_send(qp, wr(1, Opcode::Send, 2500))
        .unwrap();
    // No receive posted: the responder NAKs with RNR for a while.
    for _ in 0..50 {
        p.step();
    }
    assert!(p.nodes[0].completions.is_empty());
    assert!(p.nodes[1].conn.stats().rx_naked > 0);
    p.nodes[1].mem.recv.insert(77, vec![0; 4096]);
    p.nodes[1].conn.post_recv(qp, 77, 4096).unwrap();
    p.drive_until(100_000, |p| {
        p.nodes[0].completions.len() == 1 && p.nodes[1].completions.len() == 1
    });
    assert_eq!(p.nodes[0].completions[0].status, WcStatus::Success);
    assert_eq!(p.nodes[1].completions[0].byte_len, 2500);
    assert_eq!(&p.nodes[1].mem.recv[&77][..2500], &data[..]);
}

// spec: MR-RNR-5
#[test]
fn rnr_retry_exhaustion() {
    let mut c = cfg();
    c.rnr_retry = 2;
    let mut p = Pair::new(c, LinkCfg::default(), 3);
    let qp = p.open_qp(0);
    p.nodes[0].mem.local.insert(1, pattern(1, 100));
    p.nodes[0]
        .conn
        .post_send(qp, wr(1, Opcode::Send, 100))
        .unwrap();
    p.drive_until(100_000, |p| !p.nodes[0].completions.is_empty());
    assert_eq!(p.nodes[0].completions[0].status, WcStatus::RnrRetryExcErr);
}

// spec: MR-VAL-6, MR-CMP-6
#[test]
fn remote_access_error_is_reported() {
    let mut p = Pair::new(cfg(), LinkCfg::default(), 4);
    let qp = p.open_qp(0);
    p.nodes[1].mem.mrs.insert(5, (0x1000, vec![0; 1024]));
    p.nodes[0].mem.local.insert(1, pattern(1, 2048));
    // Out of bounds write.
    p.nodes[0]
        .conn
        .post_send(
            qp,
            WorkRequest {
                rkey: 5,
                remote_addr: 0x1000,
                ..wr(1, Opcode::Write, 2048)
            },
        )
        .unwrap();
    // A READ with a bad rkey would fail too, but is flushed after the first error.
    p.nodes[0].mem.local.insert(2, vec![0; 8]);
    p.nodes[0]
        .conn
        .post_send(
            qp,
            WorkRequest {
                rkey: 6,
                ..wr(2, Opcode::Read, 8)
            },
        )
        .unwrap();
    p.drive_until(100_000, |p| p.nodes[0].completions.len() == 2);
    assert_eq!(p.nodes[0].completions[0].status, WcStatus::RemAccessErr);
    assert_eq!(p.nodes[0].completions[1].status, WcStatus::WrFlushErr);
}

// spec: MR-OP-7
#[test]
fn read_access_error_travels_in_response() {
    let mut p = Pair::new(cfg(), LinkCfg::default(), 5);
    let qp = p.open_qp(0);
    p.nodes[0].mem.local.insert(1, vec![0; 64]);
    p.nodes[0]
        .conn
        .post_send(
            qp,
            WorkRequest {
                rkey: 9,
                ..wr(1, Opcode::Read, 64)
            },
        )
        .unwrap();
    p.drive_until(100_000, |p| p.nodes[0].completions.len() == 1);
    assert_eq!(p.nodes[0].completions[0].status, WcStatus::RemAccessErr);
}

// spec: MR-PATH-5, MR-PATH-6, MR-PATH-7
#[test]
fn blackholed_path_is_retired_and_transfer_completes() {
    let mut p = Pair::new(cfg(), LinkCfg::default(), 6);
    let qp = p.open_qp(0);
    let dead = p.nodes[0].conn.path_port(3).unwrap();
    p.dead_ports.push(dead);
    p.nodes[1].mem.mrs.insert(1, (0, vec![0; 1 << 20]));
    let data = pattern(9, 1 << 20);
    p.nodes[0].mem.local.insert(1, data.clone());
    p.nodes[0]
        .conn
        .post_send(
            qp,
            WorkRequest {
                rkey: 1,
                remote_addr: 0,
                ..wr(1, Opcode::Write, 1 << 20)
            },
        )
        .unwrap();
    p.drive_until(1_000_000, |p| p.nodes[0].completions.len() == 1);
    assert_eq!(p.nodes[0].completions[0].status, WcStatus::Success);
    assert_eq!(p.nodes[1].mem.mrs[&1].1, data);
    assert_ne!(p.nodes[0].conn.path_port(3), Some(dead));
    assert!(p.nodes[0].conn.path_stats(3).unwrap().retired >= 1);
    assert!(p.nodes[0]
        .events
        .iter()
        .any(|e| matches!(e, Event::PathRetired { path: 3, .. })));
}

// spec: MR-SACK-16, MR-CC-3
#[test]
fn ecn_marks_shrink_windows() {
    let mut p = Pair::new(
        cfg(),
        LinkCfg {
            ce: 300,
            ..Default::default()
        },
        7,
    );
    let qp = p.open_qp(0);
    p.nodes[1].mem.mrs.insert(1, (0, vec![0; 1 << 18]));
    p.nodes[0].mem.local.insert(1, pattern(1, 1 << 18));
    p.nodes[0]
        .conn
        .post_send(
            qp,
            WorkRequest {
                rkey: 1,
                remote_addr: 0,
                ..wr(1, Opcode::Write, 1 << 18)
            },
        )
        .unwrap();
    p.drive_until(1_000_000, |p| p.nodes[0].completions.len() == 1);
    let marks: u64 = (0..8)
        .map(|i| p.nodes[0].conn.path_stats(i).unwrap().ecn_marks)
        .sum();
    assert!(marks > 0);
    use metaroce_proto::cc::CongestionControl;
    assert!(p.nodes[0].conn.cc().conn_window() < 128 * 4096);
}

// spec: MR-SACK-11, MR-CC-11
#[test]
fn rate_hint_reaches_sender() {
    let mut c = cfg();
    c.rate_hint_bps = 1_250_000_000;
    let mut p = Pair::new(c, LinkCfg::default(), 8);
    let qp = p.open_qp(0);
    p.nodes[1].mem.mrs.insert(1, (0, vec![0; 1 << 16]));
    p.nodes[0].mem.local.insert(1, pattern(1, 1 << 16));
    p.nodes[0]
        .conn
        .post_send(
            qp,
            WorkRequest {
                rkey: 1,
                remote_addr: 0,
                ..wr(1, Opcode::Write, 1 << 16)
            },
        )
        .unwrap();
    p.drive_until(100_000, |p| p.nodes[0].completions.len() == 1);
    assert_eq!(p.nodes[0].conn.peer_rate_hint(), 1_250_000_000);
}

// spec: MR-SRQ-1, MR-SRQ-2
#[test]
fn shared_receives_are_claimed_by_arrival_and_complete_in_order() {
    let link = LinkCfg {
        loss: 50,
        jitter: 40_000,
        ..LinkCfg::default()
    };
    let mut p = Pair::new(cfg(), link, 7);
    let qa = p.open_qp(0);
    let qb = p.open_qp(1);
    // Node 1 posts no receive to either QP: both draw from one shared queue.
    for id in 0..8u64 {
        p.nodes[1].mem.recv.insert(500 + id, vec![0; 8192]);
        p.nodes[1].mem.shared.push_back((500 + id, 8192));
    }
    let mut sent = Vec::new();
    for id in 1..=8u64 {
        let len = 700 * id as u32;
        let data = pattern(id, len as usize);
        p.nodes[0].mem.local.insert(id, data.clone());
        let qp = if id % 2 == 0 { qa } else { qb };
        p.nodes[0]
            .conn
            .post_send(qp, wr(id, Opcode::Send, len))
            .unwrap();
        sent.push((qp, data));
    }
    p.drive_until(400_000, |p| {
        p.nodes[0].completions.len() == 8 && p.nodes[1].completions.len() == 8
    });
    assert!(p.nodes[0]
        .completions
        .iter()
        .all(|c| c.status == WcStatus::Success));
    assert!(p.nodes[1].mem.shared.is_empty());
    // Per QP, receives complete in message order; every byte landed in the
    // receive that completion names.
    for qp in [qa, qb] {
        let got: Vec<_> = p.nodes[1]
            .completions
            .iter()
            .filter(|c| c.qp == qp)
            .collect();
        let want: Vec<_> = sent.iter().filter(|(q, _)| *q == qp).collect();
        assert_eq!(got.len(), want.len());
        for (c, (_, data)) in got.iter().zip(want) {
            assert_eq!(c.status, WcStatus::Success);
            assert_eq!(c.byte_len as usize, data.len());
            assert_eq!(&p.nodes[1].mem.recv[&c.wr_id][..data.len()], &data[..]);
        }
    }
}

// spec: MR-SRQ-1, MR-RNR-1
#[test]
fn empty_shared_queue_is_rnr_until_refilled() {
    let mut p = Pair::new(cfg(), LinkCfg::default(), 8);
    let qp = p.open_qp(0);
    p.nodes[0].mem.local.insert(1, pattern(1, 300));
    p.nodes[0]
        .conn
        .post_send(qp, wr(1, Opcode::Send, 300))
        .unwrap();
    for _ in 0..50 {
        p.step();
    }
    assert!(p.nodes[0].completions.is_empty());
    assert!(p.nodes[1].conn.stats().rx_naked > 0);
    p.nodes[1].mem.recv.insert(9, vec![0; 512]);
    p.nodes[1].mem.shared.push_back((9, 512));
    p.drive_until(100_000, |p| {
        p.nodes[0].completions.len() == 1 && p.nodes[1].completions.len() == 1
    });
    assert_eq!(p.nodes[0].completions[0].status, WcStatus::Success);
    assert_eq!(p.nodes[1].completions[0].wr_id, 9);
    assert_eq!(&p.nodes[1].mem.recv[&9][..300], &pattern(1, 300)[..]);
}

// spec: MR-CMP-3
#[test]
fn receive_completions_carry_the_solicited_bit() {
    let mut p = Pair::new(cfg(), LinkCfg::default(), 9);
    let qp = p.open_qp(0);
    for id in 1..=2u64 {
        p.nodes[0].mem.local.insert(id, pattern(id, 3000));
        p.nodes[1].mem.recv.insert(10 + id, vec![0; 4096]);
        p.nodes[1].conn.post_recv(qp, 10 + id, 4096).unwrap();
    }
    p.nodes[0]
        .conn
        .post_send(
            qp,
            WorkRequest {
                solicited: true,
                ..wr(1, Opcode::Send, 3000)
            },
        )
        .unwrap();
    p.nodes[0]
        .conn
        .post_send(qp, wr(2, Opcode::Send, 3000))
        .unwrap();
    p.drive_until(100_000, |p| p.nodes[1].completions.len() == 2);
    let got: Vec<_> = p.nodes[1]
        .completions
        .iter()
        .map(|c| (c.wr_id, c.solicited))
        .collect();
    assert_eq!(got, [(11, true), (12, false)]);
}
