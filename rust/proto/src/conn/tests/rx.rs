// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The receive path (`conn/rx.rs`): the window, path floors, placement and the
//! responder's refusals.

use super::*;

// spec: MR-SACK-18, MR-SACK-2
#[test]
fn psn_far_behind_cumulative_is_dropped() {
    let (mut n, qp) = Net::with_qp(1);
    n.c[0].post_send(qp, write(1, 100, 5)).unwrap();
    let mut pkt = n.out(0).remove(0);
    let base = n.c[1].rx_paths[0].window.base();
    // 256 before the cumulative PSN: still processed by stream position (a duplicate here after delivery).
    n.deliver(1, core::slice::from_ref(&pkt));
    let base = base.wrapping_add(1);
    assert_eq!(n.c[1].rx_paths[0].window.base(), base);
    pkt[12..16].copy_from_slice(&base.wrapping_sub(SACK_BITS as u32).to_be_bytes());
    let dups = n.c[1].stats().rx_duplicates;
    assert_eq!(
        n.c[1].handle_datagram(n.now, false, &pkt, &mut n.mem[1]),
        Ok(())
    );
    assert_eq!(n.c[1].stats().rx_duplicates, dups + 1);
    // 512 beyond: dropped.
    pkt[12..16].copy_from_slice(
        &base
            .wrapping_add(crate::constants::PSN_ACCEPT_WINDOW)
            .to_be_bytes(),
    );
    assert_eq!(
        n.c[1].handle_datagram(n.now, false, &pkt, &mut n.mem[1]),
        Err(RxDrop::OutOfWindow)
    );
    // 257 and 2^31 - 1 before: stale, dropped without effect.
    for back in [SACK_BITS as u32 + 1, 0x7fff_ffff] {
        pkt[12..16].copy_from_slice(&base.wrapping_sub(back).to_be_bytes());
        assert_eq!(
            n.c[1].handle_datagram(n.now, false, &pkt, &mut n.mem[1]),
            Err(RxDrop::OutOfWindow)
        );
    }
    // Each counted, by its reason too.
    let s = n.c[1].stats();
    assert_eq!((s.rx_dropped, s.rx_out_of_window, s.rx_no_qp), (3, 3, 0));
}

// spec: MR-QP-5, MR-OP-9, MR-QP-3
#[test]
fn packet_of_an_earlier_binding_is_not_placed() {
    let mut n = Net::new(1);
    let qp = n.c[0].open_qp_psn(1, 2, 0x1234, 0x99).unwrap();
    let rq = n.c[1].open_qp_psn(2, 1, 0x99, 0x1234).unwrap();
    n.c[1].post_recv(rq, 50, 4096).unwrap();
    n.c[0]
        .post_send(
            qp,
            WorkRequest {
                wr_id: 1,
                opcode: Opcode::Send,
                len: 100,
                ..Default::default()
            },
        )
        .unwrap();
    let old = n.out(0).remove(0);
    // The packet is held in the network; both sides unbind and bind again
    // (new verbs PSNs), and a receive is posted.
    n.c[0].close_qp(qp);
    n.c[1].close_qp(rq);
    let rq = n.c[1].open_qp_psn(2, 1, 0x77, 0x4321).unwrap();
    n.c[1].post_recv(rq, 60, 4096).unwrap();
    // The stale packet arrives (with a PSN still in the path window).
    assert!(n.c[1]
        .handle_datagram(n.now, false, &old, &mut n.mem[1])
        .is_err());
    assert_eq!(n.mem[1].placed, 0);
    assert!(n.completions(1).is_empty());
    // The new binding works.
    let qp = n.c[0].open_qp_psn(1, 2, 0x4321, 0x77).unwrap();
    n.c[0]
        .post_send(
            qp,
            WorkRequest {
                wr_id: 2,
                opcode: Opcode::Send,
                len: 100,
                ..Default::default()
            },
        )
        .unwrap();
    n.settle();
    let c = n.completions(1);
    assert_eq!(
        (c.len(), c[0].wr_id, c[0].status),
        (1, 60, WcStatus::Success)
    );
    assert_eq!(stream_start(0, 0), initial_psn(0, 0));
}

// spec: MR-QP-8, MR-QP-3
#[test]
fn a_closed_qp_acknowledges_the_retransmission_of_what_it_received() {
    let mut n = Net::new(1);
    let qp = n.c[0].open_qp(1, 2).unwrap();
    let rq = n.c[1].open_qp(2, 1).unwrap();
    n.c[1].post_recv(rq, 50, 4096).unwrap();
    n.c[0].post_send(qp, send(1, 100)).unwrap();
    let data = n.out(0);
    n.deliver(1, &data);
    // The receive completes and the application destroys its QP at once
    // (ibv_rc_pingpong's last iteration); the ACK it had sent is lost.
    let c = n.completions(1);
    assert_eq!((c.len(), c[0].status), (1, WcStatus::Success));
    let _lost_ack = n.out(1);
    n.c[1].close_qp(rq);
    assert!(n.c[1].has_closed_qps());
    // The requester times out and sends the segment again: acknowledged, not
    // placed a second time.
    let placed = n.mem[1].placed;
    let mut copies = 0;
    for _ in 0..8 {
        let t = n.c[0].poll_timeout().unwrap();
        n.now = n.now.max(t);
        n.c[0].handle_timeout(n.now);
        let again = n.out(0);
        copies += again.iter().filter(|p| is_data(p)).count();
        if copies > 0 {
            n.deliver(1, &again);
            break;
        }
    }
    assert_eq!(copies, 1);
    assert_eq!(n.mem[1].placed, placed);
    assert_eq!(n.c[1].stats().rx_closed_qp_acked, 1);
    n.settle();
    let c = n.completions(0);
    assert_eq!(
        (c.len(), c[0].wr_id, c[0].status),
        (1, 1, WcStatus::Success)
    );
    // A request the closed QP never received is dropped, unacknowledged.
    n.c[0].post_send(qp, send(2, 100)).unwrap();
    let new = n.out(0);
    n.deliver(1, &new);
    assert_eq!(n.c[1].stats().rx_no_qp, 1);
    assert!(n.out(1).is_empty());
    // A new binding of the QPN takes the closed QP's slot.
    let again = n.c[1].open_qp_psn(2, 1, 7, 9).unwrap();
    assert_eq!(again, rq);
    assert!(!n.c[1].has_closed_qps());
}

// spec: MR-QP-8
#[test]
fn a_qp_that_received_nothing_closes_without_a_trace() {
    let (mut n, qp) = Net::with_qp(1);
    n.c[0].close_qp(qp);
    assert!(!n.c[0].has_closed_qps());
    // Its slot is free: the next binding of any QPN takes it.
    assert_eq!(n.c[0].open_qp(5, 6).unwrap(), qp);
}

// spec: MR-SACK-19, MR-PATH-10
#[test]
fn path_floor_clears_abandoned_holes() {
    let (mut n, qp) = Net::with_qp(1);
    n.c[0].post_send(qp, write(1, 8 * 1024, 5)).unwrap();
    let pkts = n.out(0);
    assert_eq!(pkts.len(), 8);
    let first = hdr(&pkts[0]).psn;
    // The first packet is lost: the receiver keeps a hole at its cumulative PSN.
    n.deliver(1, &pkts[1..]);
    assert_eq!(n.c[1].rx_paths[0].window.base(), first);
    // The sender declares it lost, retransmits its data under a new PSN and
    // tells the receiver it no longer needs `first`.
    let acks = n.out(1);
    n.deliver(0, &acks);
    let out = n.out(0);
    assert!(out.iter().any(|p| !is_data(p)), "a PATH_FLOOR is sent");
    assert_eq!(n.c[0].stats().tx_floors, 1);
    n.deliver(1, &out);
    assert!(
        n.c[1].rx_paths[0].window.words().iter().all(|w| *w == 0),
        "no hole left"
    );
    assert_eq!(
        n.c[1].rx_paths[0].window.base(),
        n.c[0].paths[0].inflight.range().1
    );
    n.settle();
    assert_eq!(n.completions(0)[0].status, WcStatus::Success);
    // The receiver's ACK updated the sender's view: no more floors.
    assert!(!n.c[0].paths[0].floor_needed());
}

/// A SEND much longer than the reassembly window (4 MiB in 1 KiB segments).
#[test]
fn long_send_completes() {
    let mut n = Net::new(8);
    let qp = n.c[0].open_qp(1, 2).unwrap();
    let rq = n.c[1].open_qp(2, 1).unwrap();
    for id in 0..4 {
        n.c[1].post_recv(rq, 100 + id, 4 << 20).unwrap();
    }
    for id in 0..4 {
        n.c[0]
            .post_send(
                qp,
                WorkRequest {
                    wr_id: id,
                    opcode: Opcode::Send,
                    len: 4 << 20,
                    ..Default::default()
                },
            )
            .unwrap();
    }
    for ms in 1..=2000 {
        n.settle();
        n.at(ms * 100);
    }
    let c = n.completions(0);
    assert_eq!(c.len(), 4, "{:?} {}", c, n.c[0].debug_state());
    assert!(c.iter().all(|c| c.status == WcStatus::Success), "{:?}", c);
}

// spec: MR-CMP-8
#[test]
fn responder_fails_on_a_send_longer_than_its_receive() {
    let mut n = Net::new(1);
    let qp = n.c[0].open_qp(1, 2).unwrap();
    let rq = n.c[1].open_qp(2, 1).unwrap();
    n.c[1].post_recv(rq, 50, 64).unwrap();
    n.c[1].post_recv(rq, 51, 64).unwrap();
    n.c[0]
        .post_send(
            qp,
            WorkRequest {
                wr_id: 1,
                opcode: Opcode::Send,
                len: 100,
                ..Default::default()
            },
        )
        .unwrap();
    n.settle();
    let req = n.completions(0);
    assert_eq!((req.len(), req[0].status), (1, WcStatus::RemInvReqErr));
    let resp = n.completions(1);
    let got: Vec<_> = resp.iter().map(|c| (c.wr_id, c.status)).collect();
    assert_eq!(got, [(50, WcStatus::LocLenErr), (51, WcStatus::WrFlushErr)]);
}

// spec: MR-CMP-8, MR-WIRE-12
/// A request refused for its form (a READ without LAST), not for memory, fails
/// the responder QP too: found by the compliance suite (compliance/comply.py).
#[test]
fn responder_fails_on_a_malformed_request() {
    let (mut n, qp) = Net::with_qp(1);
    n.c[0].post_send(qp, read(1, 64)).unwrap();
    let mut pkt = n.out(0).into_iter().find(|p| is_data(p)).unwrap();
    pkt[2] &= !0x02; // clear LAST
    n.c[1]
        .handle_datagram(n.now, false, &pkt, &mut n.mem[1])
        .unwrap();
    assert_eq!(n.c[1].stats().rx_naked, 1);
    assert!(n.c[1].qps[0].qp.error.is_some());
    let mut events = Vec::new();
    while let Some(e) = n.c[1].poll_event() {
        events.push(e);
    }
    assert!(events.contains(&Event::ResponderError {
        qp: QpId(0),
        error: crate::event::ResponderError::InvalidRequest
    }));
}

// spec: MR-CMP-9
#[test]
fn read_response_without_its_memory_turns_into_an_access_error() {
    let (mut n, qp) = Net::with_qp(1);
    n.c[0].post_send(qp, read(0, 3000)).unwrap();
    let req = n.out(0);
    n.deliver(1, &req);
    // The responder's region goes away after the READ was checked: the driver
    // cannot gather the second segment, drops it and says so.
    let mut buf = [0u8; MIN_TRANSMIT_BUF];
    let mut resp = Vec::new();
    while let Some(t) = n.c[1].poll_transmit(n.now, &mut buf) {
        let p = t.payload;
        if matches!(p, Some(Payload::Mr { va, .. }) if va != 0x1000) {
            n.c[1].payload_unavailable(p.as_ref().unwrap());
            continue;
        }
        let mut pkt = buf[..t.len].to_vec();
        pkt.resize(t.len + p.map_or(0, |p| p.len() as usize), 0);
        resp.push(pkt);
    }
    assert!(
        n.c[1].qps.qp(0).unwrap().error.is_some(),
        "the responder QP fails"
    );
    n.deliver(0, &resp);
    n.settle();
    n.at(1_000_000);
    n.settle();
    let done: Vec<(u64, WcStatus)> = n
        .completions(0)
        .iter()
        .map(|c| (c.wr_id, c.status))
        .collect();
    assert_eq!(done, [(0, WcStatus::RemAccessErr)]);
    // Only the first segment carried data: 1024 bytes placed.
    assert_eq!(n.mem[0].placed, 1024);
}

// spec: MR-CMP-10
#[test]
fn responder_reports_the_refused_request_once() {
    let (mut n, qp) = Net::with_qp(1);
    n.c[0].post_send(qp, write(0, 100, 0xBAD)).unwrap();
    n.c[0].post_send(qp, write(1, 100, 0xBAD)).unwrap();
    n.settle();
    let peer = QpId(0);
    assert_eq!(
        n.events(1),
        [
            Event::FirstRequest { qp: peer },
            Event::QpError {
                qp: peer,
                status: WcStatus::RemAccessErr
            },
            Event::ResponderError {
                qp: peer,
                error: crate::event::ResponderError::Access
            },
        ]
    );
}

/// A forged PATH_FLOOR cannot throw a receive path's cumulative PSN far ahead
/// (after which every real PSN would be out of window and the QPs would end
/// in RETRY_EXC_ERR): a floor 512 or more beyond it is dropped and counted, and
/// one behind it changes nothing (but is acknowledged). Data flows afterwards.
// spec: MR-SACK-19, MR-SACK-23
#[test]
fn path_floor_far_ahead_is_refused() {
    let (mut n, qp) = Net::with_qp(2);
    let base = n.c[1].rx_paths[0].window.base();
    let floor = |n: &Net, value: u32| {
        let control = crate::wire::Control {
            code: crate::wire::ControlCode::PathFloor,
            path: 0,
            value,
        };
        forge(n, 0, |header| PacketRepr::Control { header, control })
    };
    let far = [crate::constants::PSN_ACCEPT_WINDOW, 100_000, 0x7fff_ffff];
    for (i, ahead) in far.iter().enumerate() {
        let pkt = floor(&n, base.wrapping_add(*ahead));
        assert_eq!(
            n.c[1].handle_datagram(n.now, false, &pkt, &mut n.mem[1]),
            Err(RxDrop::OutOfWindow),
            "{ahead}"
        );
        assert_eq!(n.c[1].rx_paths[0].window.base(), base);
        assert_eq!(n.c[1].stats().rx_out_of_window, i as u64 + 1);
        assert!(n.out(1).is_empty(), "a refused floor is not answered");
    }
    // Behind the cumulative PSN: no change, but acknowledged at once.
    for value in [base, base.wrapping_sub(1), base.wrapping_add(0x8000_0000)] {
        let pkt = floor(&n, value);
        assert_eq!(
            n.c[1].handle_datagram(n.now, false, &pkt, &mut n.mem[1]),
            Ok(())
        );
        assert_eq!(n.c[1].rx_paths[0].window.base(), base);
        let acks = n.out(1);
        assert_eq!(acks.len(), 1, "a floor is acknowledged");
        n.deliver(0, &acks);
    }
    assert_eq!(n.c[0].stats().rx_dropped, 0);
    // Data still flows on both paths.
    for id in 0..4 {
        n.c[0].post_send(qp, write(id, 4096, 5)).unwrap();
    }
    n.settle();
    let c = n.completions(0);
    assert_eq!(c.len(), 4);
    assert!(c.iter().all(|c| c.status == WcStatus::Success), "{c:?}");
    assert_eq!(n.c[1].stats().rx_dropped, far.len() as u64);
}

// spec: MR-SRQ-3, MR-SRQ-1
#[test]
fn one_segment_binds_no_more_than_the_srq_window() {
    let (mut n, qp) = Net::with_qp(1);
    n.mem[1].srq_left = 64;
    n.c[0]
        .post_send(
            qp,
            WorkRequest {
                wr_id: 1,
                opcode: Opcode::Send,
                len: 100,
                ..Default::default()
            },
        )
        .unwrap();
    let pkts = n.out(0);
    let send = pkts.iter().find(|p| is_data(p)).unwrap().clone();
    // The peer names a receive 63 ahead of the QP's next one (the RSN is at byte 32):
    // before [MR-SRQ-3] this bound 64 receives of the SRQ that no message would ever
    // complete, for as long as the QP lived.
    let rsn = u32::from_be_bytes(send[32..36].try_into().unwrap());
    for ahead in [63u32, SRQ_CLAIM_WINDOW as u32] {
        let mut forged = send.clone();
        forged[32..36].copy_from_slice(&rsn.wrapping_add(ahead).to_be_bytes());
        let _ = n.c[1].handle_datagram(n.now, false, &forged, &mut n.mem[1]);
        assert_eq!(n.mem[1].srq_taken, 0, "{ahead} ahead");
    }
    assert_eq!(n.c[1].stats().rx_naked, 2);
    // Within the window a message binds up to its own RSN, in order.
    n.c[0]
        .post_send(
            qp,
            WorkRequest {
                wr_id: 2,
                opcode: Opcode::Send,
                len: 100,
                ..Default::default()
            },
        )
        .unwrap();
    let mut near = send.clone();
    near[32..36].copy_from_slice(&rsn.wrapping_add(SRQ_CLAIM_WINDOW as u32 - 1).to_be_bytes());
    let psn = u32::from_be_bytes(near[12..16].try_into().unwrap());
    near[12..16].copy_from_slice(&psn.wrapping_add(1).to_be_bytes());
    let _ = n.c[1].handle_datagram(n.now, false, &near, &mut n.mem[1]);
    assert_eq!(n.mem[1].srq_taken, SRQ_CLAIM_WINDOW as u32);
}

#[test]
fn the_first_request_is_reported_once_before_its_completion() {
    let mut n = Net::new(1);
    let qp = n.c[0].open_qp(1, 2).unwrap();
    let rq = n.c[1].open_qp(2, 1).unwrap();
    assert_eq!(n.events(1), []);
    n.c[1].post_recv(rq, 7, 64).unwrap();
    n.c[0].post_send(qp, send(1, 16)).unwrap();
    n.settle();
    let ev = n.events(1);
    assert!(
        matches!(ev.as_slice(), [Event::FirstRequest { qp }, Event::Completion(c)]
            if *qp == rq && c.wr_id == 7),
        "{ev:?}"
    );
    // Later requests, refused ones too, raise no second event.
    n.c[1].post_recv(rq, 8, 64).unwrap();
    n.c[0].post_send(qp, send(2, 16)).unwrap();
    n.c[0].post_send(qp, write(3, 16, 0xBAD)).unwrap();
    n.settle();
    let ev = n.events(1);
    assert!(
        !ev.iter().any(|e| matches!(e, Event::FirstRequest { .. })),
        "{ev:?}"
    );
    // A refused first request counts: a new binding's first is a WRITE to no region.
    let qp = n.c[0].open_qp(3, 4).unwrap();
    let rq = n.c[1].open_qp(4, 3).unwrap();
    n.c[0].post_send(qp, write(4, 16, 0xBAD)).unwrap();
    n.settle();
    let ev = n.events(1);
    assert!(
        matches!(ev.first(), Some(Event::FirstRequest { qp }) if *qp == rq),
        "{ev:?}"
    );
}
