// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! ACKs and NAKs (`conn/ack.rs`): what the receiver reports, and what the sender
//! takes from reports true, late or forged.

use super::*;

// spec: MR-RTX-11
#[test]
fn nak_for_resolved_packet_is_ignored() {
    let (mut n, qp) = Net::with_qp(1);
    n.c[0].post_send(qp, write(1, 2048, 5)).unwrap();
    let pkts = n.out(0);
    assert_eq!(pkts.len(), 2);
    // Only the second packet arrives: it is acknowledged (SACK), the first is a hole.
    n.deliver(1, &pkts[1..]);
    let acks = n.out(1);
    n.deliver(0, &acks);
    let second = hdr(&pkts[1]);
    let s = PacketRepr::parse(&pkts[1]).unwrap();
    let PacketRepr::Data { stream, .. } = s else {
        panic!()
    };
    // A (duplicated, late) NAK for the acknowledged packet must do nothing.
    let nak = crate::wire::Nak {
        path: 0,
        code: NakCode::AccessError,
        rnr_timer: 1,
        psn: second.psn,
        qpn: 2,
        msn: stream.msn,
        ssn: stream.ssn,
    };
    n.c[0].on_nak(n.now, &nak);
    assert_eq!(n.c[0].qps[0].qp.error, None);
    n.deliver(1, &pkts[..1]);
    n.settle();
    let c = n.completions(0);
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].status, WcStatus::Success);
}

// spec: MR-SEC-6, MR-SEC-1
#[test]
fn nak_queue_overflow_is_counted() {
    let mut n = Net::new(1);
    // One bad WRITE per QP: a responder QP fails after its first refusal.
    for id in 0..12 {
        let qp = n.c[0].open_qp(100 + id, 200 + id).unwrap();
        n.c[1].open_qp(200 + id, 100 + id).unwrap();
        n.c[0]
            .post_send(qp, write(u64::from(id), 100, 0xBAD))
            .unwrap();
    }
    let pkts = n.out(0);
    assert!(pkts.len() >= 10);
    n.deliver(1, &pkts);
    assert_eq!(n.c[1].stats().rx_naked, pkts.len() as u64);
    assert_eq!(
        n.c[1].stats().naks_dropped,
        pkts.len() as u64 - crate::constants::MAX_PENDING_NAKS as u64
    );
}

// spec: MR-SACK-4, MR-SACK-6, MR-SACK-7, MR-SACK-8, MR-SACK-9, MR-SACK-10
#[test]
fn ack_reports_cumulative_sack_and_ce() {
    let (mut n, qp) = Net::with_qp(1);
    n.c[0].post_send(qp, write(1, 3 * 1024, 5)).unwrap();
    let pkts = n.out(0);
    let first = hdr(&pkts[0]).psn;
    // In order, no CE: the ACK waits (delayed ACK).
    n.c[1]
        .handle_datagram(n.now, false, &pkts[0], &mut n.mem[1])
        .unwrap();
    assert!(n.out(1).is_empty());
    // A hole (packet 1 missing) with CE on packet 2: ACK at once.
    n.c[1]
        .handle_datagram(n.now, true, &pkts[2], &mut n.mem[1])
        .unwrap();
    let acks = n.out(1);
    assert_eq!(acks.len(), 1);
    let PacketRepr::Ack { ack, .. } = PacketRepr::parse(&acks[0]).unwrap() else {
        panic!()
    };
    assert_eq!(ack.count, 1);
    let b = ack.blocks[0];
    assert_eq!(
        (b.path, b.cum_psn, b.ce_count),
        (0, first.wrapping_add(1), 1)
    );
    assert_eq!(b.sack[0], 0b10, "bit 1: PSN cum + 1");
    // The block is repeated in the next ACK, then no more.
    n.c[1]
        .handle_datagram(n.now, false, &pkts[2], &mut n.mem[1])
        .unwrap();
    assert_eq!(n.out(1).len(), 1, "a duplicate is acknowledged at once");
    // A NAKed packet's PSN is not recorded.
    n.c[0].post_send(qp, write(2, 100, 0xBAD)).unwrap();
    let bad = n.out(0);
    let base = n.c[1].rx_paths[0].window.clone();
    n.deliver(1, &bad);
    assert_eq!(n.c[1].rx_paths[0].window, base);
}

// spec: MR-SACK-10
#[test]
fn ack_delay_counts_from_the_newest_packet() {
    let (mut n, qp) = Net::with_qp(1);
    n.c[0].post_send(qp, write(1, 2 * 1024, 5)).unwrap();
    let pkts = n.out(0);
    assert_eq!(pkts.len(), 2);
    n.deliver(1, &pkts[..1]);
    n.now = n.now.add_nanos(6_000);
    n.deliver(1, &pkts[1..]);
    assert!(n.out(1).is_empty());
    // Due 10 us after the first packet, 4 us after the newest.
    n.now = n.now.add_nanos(4_000);
    assert_eq!(n.c[1].poll_timeout(), Some(n.now));
    n.c[1].handle_timeout(n.now);
    let acks = n.out(1);
    let PacketRepr::Ack { ack, .. } = PacketRepr::parse(&acks[0]).unwrap() else {
        panic!()
    };
    assert_eq!(ack.ack_delay, 4);
}

// spec: MR-RTX-14, MR-RTX-8, MR-RTX-13
#[test]
fn late_acks_give_back_the_retry_budget() {
    // One path and one retry: two timeouts in a row would fail the QP.
    let (mut n, qp) = Net::with_qp(1);
    let cfg = *n.c[0].config();
    n.c[0].set_retransmission(1, cfg.rto_initial_ns, cfg.rto_min_ns);
    n.c[0].set_retry_limit(qp, 1).unwrap();
    for id in 1..=4 {
        n.c[0].post_send(qp, write(id, 1024, 5)).unwrap();
        let pkts = n.out(0);
        assert_eq!(pkts.len(), 1);
        // A slow peer: the timer fires, then the packet's ACK arrives before
        // its data is sent again.
        n.now = n.c[0].poll_timeout().unwrap();
        n.c[0].handle_timeout(n.now);
        n.deliver(1, &pkts);
        n.now = n.now.add_nanos(n.c[1].cfg.ack_delay_ns);
        n.c[1].handle_timeout(n.now);
        let acks = n.out(1);
        n.deliver(0, &acks);
        n.settle();
        let c = n.completions(0);
        assert_eq!(
            (c.len(), c[0].wr_id, c[0].status),
            (1, id, WcStatus::Success),
            "{}",
            n.c[0].debug_state()
        );
    }
    assert_eq!(n.c[0].stats().timeouts, 4);
    assert_eq!(n.c[0].stats().spurious_timeouts, 4);
    assert_eq!(n.c[0].stats().tx_retransmits, 0);
}

// spec: MR-RTX-12, MR-RTX-3
#[test]
fn a_late_packet_is_an_rtt_sample() {
    let (mut n, qp) = Net::with_qp(1);
    n.c[0].post_send(qp, write(1, 1024, 5)).unwrap();
    let pkts = n.out(0);
    let sent = n.now;
    // The packet waits in a queue past its timer; its ACK comes before its
    // data is sent again.
    n.now = n.c[0].poll_timeout().unwrap();
    n.c[0].handle_timeout(n.now);
    n.now = n.now.add_nanos(5_000_000);
    n.ack_back(&pkts);
    let rtt = &n.c[0].paths[0].rtt;
    assert!(rtt.has_sample(), "the late packet's RTT is a sample");
    assert_eq!(
        rtt.srtt_or(0),
        n.now.nanos_since(sent) - n.c[1].cfg.ack_delay_ns
    );
    assert!(n.c[0].base_rto(0) > rtt.srtt_or(0));
}

/// An ACK of new packets is one RTT sample, from the highest newly
/// acknowledged PSN, less the ACK delay the receiver reports, and it ends
/// the path's backoff and consecutive timeouts and the connection's count.
// spec: MR-SACK-15
#[test]
fn an_ack_of_new_packets_is_a_sample_and_ends_the_backoff() {
    let (mut n, qp) = Net::with_qp(1);
    n.c[0].post_send(qp, write(1, 1024, 5)).unwrap();
    let _lost = n.out(0);
    n.now = n.c[0].poll_timeout().unwrap();
    n.c[0].handle_timeout(n.now);
    let p = &n.c[0].paths[0];
    assert_eq!(
        (p.backoff, p.consecutive_rto, n.c[0].consecutive_rto),
        (1, 1, 1)
    );
    let again = n.out(0);
    assert_eq!(again.iter().filter(|p| is_data(p)).count(), 1, "sent again");
    let sent = n.now;
    n.now = n.now.add_nanos(3_000_000);
    n.ack_back(&again);
    let p = &n.c[0].paths[0];
    assert_eq!(
        (p.backoff, p.consecutive_rto, n.c[0].consecutive_rto),
        (0, 0, 0)
    );
    assert_eq!(
        p.rtt.srtt_or(0),
        n.now.nanos_since(sent) - n.c[1].cfg.ack_delay_ns
    );
}

/// A rise of a block's `ce_count` is that many new ECN-CE marks and cuts the
/// path window (once per SRTT); a fall, from a reordered ACK, is ignored, and
/// later rises count from the highest value seen. The difference is signed
/// 16-bit, so the count may wrap.
// spec: MR-SACK-16, MR-CC-3, MR-CC-5
#[test]
fn ce_count_rises_are_marks_and_falls_are_ignored() {
    let (mut n, qp) = Net::with_qp(1);
    n.c[0].post_send(qp, write(1, 4 * 1024, 5)).unwrap();
    let _ = n.out(0);
    let (una, _) = n.c[0].paths[0].inflight.range();
    let w0 = n.c[0].path_view(0).unwrap().window;
    let ack_ce = |n: &mut Net, ce: u16| {
        let mut ack = crate::wire::AckRepr {
            count: 1,
            ..Default::default()
        };
        ack.blocks[0].cum_psn = una;
        ack.blocks[0].ce_count = ce;
        let raw = forge(n, 1, |header| PacketRepr::Ack { header, ack });
        n.c[0]
            .handle_datagram(n.now, false, &raw, &mut n.mem[0])
            .unwrap();
        let v = n.c[0].path_view(0).unwrap();
        (v.stats.ecn_marks, v.window)
    };
    assert_eq!(ack_ce(&mut n, 3), (3, w0 / 2), "3 new marks, one cut");
    assert_eq!(ack_ce(&mut n, 1), (3, w0 / 2), "a fall is a reordered ACK");
    assert_eq!(
        ack_ce(&mut n, 5),
        (5, w0 / 2),
        "2 more, within the SRTT: no cut"
    );
    n.now = n.now.add_nanos(10_000_000);
    assert_eq!(ack_ce(&mut n, 4), (5, w0 / 2));
    assert_eq!(
        ack_ce(&mut n, 6),
        (6, w0 / 4),
        "one more, an SRTT later: cut"
    );
    // Up to the wrap in rises below 2^15, across it (0xfffe -> 2: 4 marks),
    // then a jump of 2^15: a fall.
    let mut marks = 6;
    for (ce, rise) in [
        (0x7006, 0x7000),
        (0xe006, 0x7000),
        (0xfffe, 0x1ff8),
        (2, 4),
        (0x8002, 0),
    ] {
        marks += rise;
        assert_eq!(ack_ce(&mut n, ce).0, marks, "ce_count {ce:#x}");
    }
}

/// An ACK block whose `cum_psn` lies beyond the path's next PSN is dropped
/// without effect, and
/// quickly: ACK processing visits only the PSNs in flight and the block's
/// bits, never the distance to a forged `cum_psn` (2^31 PSNs per block took
/// seconds in the receive softirq). A stale block (`cum_psn` before `una`) is
/// harmless and still accepted. Genuine ACKs work afterwards. The path's PSNs
/// wrap through 0 here.
// spec: MR-SACK-13, MR-SACK-22
#[test]
fn ack_for_psns_never_sent_is_dropped_quickly() {
    let (mut n, qp) = Net::with_qp(1);
    let first = u32::MAX - 1;
    n.c[0].paths[0].inflight = Inflight::new(first);
    n.c[0].paths[0].peer_cum = first;
    n.c[1].rx_paths[0].window = SackWindow::new(first);
    n.c[0].post_send(qp, write(1, 4 * 1024, 5)).unwrap();
    let data = n.out(0);
    let (una, next) = n.c[0].paths[0].inflight.range();
    assert_eq!((una, next, data.len()), (first, 2, 4));
    let start = std::time::Instant::now();
    // One block 2^31 - 1 beyond una first: the CPU lockup of issue 39.
    let forged = [
        (1, una.wrapping_add(0x7fff_ffff), &[][..]),
        (16, una.wrapping_add(0x7fff_ffff), &[]),
        (16, next.wrapping_add(1), &[]),
        (16, next.wrapping_add(255), &[0, 255]),
        (16, una.wrapping_add(0x8000_0000), &[]),
        (16, next.wrapping_add(0x7fff_fffe), &[]),
        (16, u32::MAX.wrapping_add(0x7fff_ffff), &[]),
        // Half the PSN space away from next: as far behind as beyond.
        (16, next.wrapping_sub(0x8000_0000), &[]),
    ];
    for (i, &(count, cum, bits)) in forged.iter().enumerate() {
        let ack = forged_ack(&n, 1, count, cum, bits);
        let t = std::time::Instant::now();
        let r = n.c[0].handle_datagram(n.now, false, &ack, &mut n.mem[0]);
        let took = t.elapsed();
        assert!(
            took < std::time::Duration::from_millis(500),
            "case {i}: cum {cum:#x} took {took:?}"
        );
        assert_eq!(r, Err(RxDrop::OutOfWindow), "case {i}: cum {cum:#x}");
        let p = &n.c[0].paths[0];
        assert_eq!(
            (p.inflight.range(), p.inflight.in_flight, p.inflight.lost),
            ((una, next), 4, 0),
            "case {i}"
        );
        assert_eq!(p.peer_cum, first);
        assert_eq!(n.c[0].stats().rx_out_of_window, i as u64 + 1);
    }
    // Stale blocks (reordered ACKs) acknowledge nothing and are not drops.
    for cum in [
        una.wrapping_sub(1),
        una.wrapping_sub(1000),
        next.wrapping_sub(0x7fff_ffff),
    ] {
        let ack = forged_ack(&n, 1, 16, cum, &[]);
        assert_eq!(
            n.c[0].handle_datagram(n.now, false, &ack, &mut n.mem[0]),
            Ok(())
        );
        assert_eq!(n.c[0].paths[0].inflight.in_flight, 4);
    }
    assert!(
        start.elapsed() < std::time::Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(n.c[0].stats().rx_dropped, forged.len() as u64);
    // The real packets and ACKs still work.
    n.deliver(1, &data);
    n.settle();
    let c = n.completions(0);
    assert_eq!((c.len(), c[0].status), (1, WcStatus::Success));
    assert_eq!(n.c[0].paths[0].inflight.range(), (next, next));
    assert_eq!(n.c[0].stats().rx_dropped, forged.len() as u64);
}

/// A response to a request its receiver never made (a forged request answered
/// by the responder, selftests/forged_data.py) changes nothing at that QP, but
/// is acknowledged: otherwise its sender sends it again until its retries run
/// out, and fails every QP of the connection.
// spec: MR-PLC-6
#[test]
fn a_response_to_a_request_never_made_is_acknowledged() {
    let (mut n, _) = Net::with_qp(2);
    // The forger: B's ids and PSNs, a READ that B never posted.
    let mut twin = fresh(*n.c[1].config(), 2);
    let tq = twin.open_qp(2, 1).unwrap();
    twin.post_send(tq, read(9, 64)).unwrap();
    let mut buf = [0u8; MIN_TRANSMIT_BUF];
    let t = twin.poll_transmit(n.now, &mut buf).unwrap();
    let forged = buf[..t.len].to_vec();
    n.deliver(0, &[forged]);
    for ms in 1..=200 {
        n.at(ms * 1000);
        let a = n.out(0);
        n.deliver(1, &a);
        let b = n.out(1);
        n.deliver(0, &b);
    }
    // One timeout at most, before B's delayed ACK (133 in 200 ms without it).
    let s = n.c[0].stats();
    assert!(s.timeouts <= 1 && s.tx_retransmits <= 1, "{s:?}");
    assert!(n.c[0].paths.iter().all(|p| p.inflight.in_flight == 0));
    assert!(n.completions(1).is_empty());
}

/// SACK bits for PSNs at or beyond the path's next PSN acknowledge nothing, and
/// the rest of the ACK counts: the receiver holds them when a forger put data
/// packets there (selftests/forged_data.py), and an ACK dropped whole for them
/// left every later ACK of the peer unusable until this side's PSNs got there.
// spec: MR-SACK-22, MR-SACK-13
#[test]
fn sack_bits_beyond_next_acknowledge_nothing() {
    let (mut n, qp) = Net::with_qp(1);
    n.c[0].post_send(qp, write(1, 4 * 1024, 5)).unwrap();
    let data = n.out(0);
    let (una, next) = n.c[0].paths[0].inflight.range();
    assert_eq!(next.wrapping_sub(una), 4);
    for (cum, bits, acked) in [
        (una, &[4u32, 200][..], 0),
        (una, &[1, 255], 1),
        (una.wrapping_add(1), &[0, 3, 7], 2),
    ] {
        let ack = forged_ack(&n, 1, 1, cum, bits);
        assert_eq!(
            n.c[0].handle_datagram(n.now, false, &ack, &mut n.mem[0]),
            Ok(())
        );
        let p = &n.c[0].paths[0];
        assert_eq!(
            4 - p.inflight.in_flight,
            acked,
            "cum {cum:#x} bits {bits:?}"
        );
        assert_eq!(p.inflight.range().1, next);
    }
    assert_eq!(n.c[0].stats().rx_out_of_window, 0);
    n.deliver(1, &data);
    n.settle();
    let c = n.completions(0);
    assert_eq!((c.len(), c[0].status), (1, WcStatus::Success));
}
