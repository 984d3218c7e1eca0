// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Per-QP limits and ordering (`conn/qp.rs`): what a post refuses, READ and atomic
//! credits, flushing after an error.

use super::*;

/// A message longer than 2^31 bytes, or an atomic at an address that is not
/// a multiple of 8, is refused when posted, and nothing is sent.
// spec: MR-OP-6
#[test]
fn post_send_refuses_long_messages_and_unaligned_atomics() {
    let (mut n, qp) = Net::with_qp(1);
    let long = write(1, crate::constants::MAX_MSG_LEN + 1, 5);
    assert_eq!(n.c[0].post_send(qp, long), Err(PostError::Invalid));
    for opcode in [Opcode::FetchAdd, Opcode::CompareSwap] {
        for remote_addr in [0x1001, 0x1004] {
            let wr = WorkRequest {
                wr_id: 2,
                opcode,
                len: 8,
                rkey: 5,
                remote_addr,
                ..Default::default()
            };
            assert_eq!(
                n.c[0].post_send(qp, wr),
                Err(PostError::Invalid),
                "{opcode:?} at {remote_addr:#x}"
            );
        }
    }
    assert!(n.out(0).is_empty());
    let aligned = WorkRequest {
        wr_id: 3,
        opcode: Opcode::FetchAdd,
        len: 8,
        rkey: 5,
        remote_addr: 0x1008,
        ..Default::default()
    };
    assert_eq!(n.c[0].post_send(qp, aligned), Ok(()));
}

// spec: MR-ATOM-4
#[test]
fn max_rd_atomic_limits_outstanding_reads() {
    let (mut n, qp) = Net::with_qp(2);
    n.c[0].set_max_rd_atomic(qp, 2).unwrap();
    for id in 0..4 {
        n.c[0].post_send(qp, read(id, 512)).unwrap();
    }
    // A WRITE behind the READs waits with them: work requests go out in order.
    n.c[0].post_send(qp, write(9, 100, 5)).unwrap();
    let first = n.out(0);
    assert_eq!(first.iter().filter(|p| is_data(p)).count(), 2);
    n.at(100);
    assert!(n.out(0).iter().all(|p| !is_data(p)));
    // Once the first two complete, the other two and the WRITE go out.
    n.deliver(1, &first);
    n.settle();
    let done: Vec<u64> = n.completions(0).iter().map(|c| c.wr_id).collect();
    assert_eq!(done, [0, 1, 2, 3, 9]);
    assert_eq!(n.c[0].stats().tx_data, 5);
    assert_eq!(n.c[0].qps.qp(qp.index()).unwrap().rd_atomic_out, 0);
}

// spec: MR-ATOM-4
#[test]
fn max_rd_atomic_counts_atomics_and_flushes_waiting_requests() {
    let (mut n, qp) = Net::with_qp(1);
    n.c[0].set_max_rd_atomic(qp, 1).unwrap();
    let fadd = WorkRequest {
        wr_id: 1,
        opcode: Opcode::FetchAdd,
        len: 8,
        rkey: 5,
        remote_addr: 0x1000,
        ..Default::default()
    };
    n.c[0].post_send(qp, read(0, 64)).unwrap();
    n.c[0].post_send(qp, fadd).unwrap();
    n.c[0].post_send(qp, read(2, 64)).unwrap();
    let first = n.out(0);
    assert_eq!(first.iter().filter(|p| is_data(p)).count(), 1);
    n.deliver(1, &first);
    n.settle();
    let done: Vec<u64> = n.completions(0).iter().map(|c| c.wr_id).collect();
    assert_eq!(done, [0, 1, 2]);
    assert_eq!(n.c[0].stats().tx_data, 3);
    // A request waiting for the limit is flushed like any unsent work request.
    n.c[0].post_send(qp, read(3, 64)).unwrap();
    n.c[0].post_send(qp, read(4, 64)).unwrap();
    assert_eq!(n.out(0).iter().filter(|p| is_data(p)).count(), 1);
    n.c[0].qp_to_error(qp).unwrap();
    let flushed: Vec<(u64, WcStatus)> = n
        .completions(0)
        .iter()
        .map(|c| (c.wr_id, c.status))
        .collect();
    assert_eq!(
        flushed,
        [(3, WcStatus::WrFlushErr), (4, WcStatus::WrFlushErr)]
    );
}

// spec: MR-CMP-6
#[test]
fn work_requests_after_an_error_completion_are_flushed() {
    let (mut n, qp) = Net::with_qp(1);
    for id in 0..3 {
        n.c[0].post_send(qp, read(id, 64)).unwrap();
    }
    let req = n.out(0);
    n.deliver(1, &req);
    // All three READs were executed; then the memory went: every response
    // turns into an error, but only the first WR reports its own.
    let mut buf = [0u8; MIN_TRANSMIT_BUF];
    let mut acks = Vec::new();
    while let Some(t) = n.c[1].poll_transmit(n.now, &mut buf) {
        match t.payload {
            Some(p) => n.c[1].payload_unavailable(&p),
            None => acks.push(buf[..t.len].to_vec()),
        }
    }
    n.deliver(0, &acks);
    n.settle();
    let mut done = Vec::new();
    for ms in 1..50 {
        n.at(ms * 1000);
        n.settle();
        done.extend(n.completions(0).iter().map(|c| (c.wr_id, c.status)));
    }
    assert_eq!(
        done,
        [
            (0, WcStatus::RemAccessErr),
            (1, WcStatus::WrFlushErr),
            (2, WcStatus::WrFlushErr)
        ]
    );
}
