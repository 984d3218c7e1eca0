// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The connection as a whole: opening, connection ids and closing, timeouts and
//! path retirement, one connection talking to itself.

use super::*;

/// `reset` after traffic (bound QPs, data in flight, events pending) leaves
/// exactly the state of a fresh connection, for a different configuration too.
#[test]
fn reset_matches_fresh_init() {
    let (mut n, qp) = Net::with_qp(4);
    for id in 0..5 {
        n.c[0].post_send(qp, write(id, 3000, 5)).unwrap();
    }
    let pkts = n.out(0);
    n.deliver(1, &pkts[1..]);
    let acks = n.out(1);
    n.deliver(0, &acks);
    n.at(50_000);
    n.c[0].post_send(qp, write(9, 100, 0xBAD)).unwrap();
    n.settle();
    assert!(n.c[0].stats().tx_data > 0 && n.c[1].stats().rx_bytes > 0);
    let mut cfg = Config::new(0x33);
    cfg.paths = 3;
    cfg.peer_conn_id = 0x44;
    for c in n.c.iter_mut() {
        c.reset(cfg, Aimd::new(cfg.sanitized().aimd), t0(), 5);
        assert_eq!(std::format!("{c:?}"), std::format!("{:?}", fresh(cfg, 5)));
    }
}

// spec: MR-PATH-9, MR-SACK-21
#[test]
fn retirement_resets_backoff_and_reorder_threshold() {
    let (mut n, qp) = Net::with_qp(2);
    assert_eq!(
        n.c[0].paths[0].reorder_threshold,
        n.c[0].cfg.reorder_threshold
    );
    n.c[0].paths[0].reorder_threshold = MAX_REORDER_THRESHOLD;
    n.c[0].post_send(qp, write(1, 4096, 5)).unwrap();
    let _lost = n.out(0);
    let mut us = 0;
    while n.c[0].paths[0].stats.retired == 0 {
        us += 100;
        n.at(us);
        let _ = n.out(0);
        assert!(us < 1_000_000);
    }
    assert_eq!(n.c[0].paths[0].backoff, 0);
    assert_eq!(n.c[0].paths[0].consecutive_rto, 0);
    assert_eq!(
        n.c[0].paths[0].reorder_threshold,
        n.c[0].cfg.reorder_threshold
    );
}

// spec: MR-RTX-15
#[test]
fn a_lost_tail_is_found_by_the_probe_timeout_before_the_rto() {
    for probe in [true, false] {
        let (mut n, qp) = Net::with_qp(1);
        n.c[0].cfg.tail_probe = probe;
        // A first WRITE, acknowledged, gives the path its RTT sample.
        n.c[0].post_send(qp, write(1, 1024, 5)).unwrap();
        let first = n.out(0);
        n.ack_back(&first);
        assert!(n.c[0].paths[0].rtt.has_sample());
        // The second one's only packet is lost: nothing later on the path reveals it.
        n.c[0].post_send(qp, write(2, 1024, 5)).unwrap();
        let sent_at = n.now;
        assert_eq!(n.out(0).iter().filter(|p| is_data(p)).count(), 1);
        let pto = n.c[0].paths[0]
            .probe_timeout(n.c[0].cfg.ack_hold_ns(), &Default::default())
            .unwrap();
        let rto = n.c[0].base_rto(0);
        assert!(pto < rto, "probe timeout {pto} ns, RTO {rto} ns");
        let due = n.c[0].poll_timeout().unwrap();
        n.now = sent_at.add_nanos(pto);
        if probe {
            assert_eq!(due, n.now, "the probe timer is the next deadline");
            n.c[0].handle_timeout(n.now);
            let again = n.out(0);
            assert_eq!(again.iter().filter(|p| is_data(p)).count(), 1, "sent again");
            let s = n.c[0].stats();
            assert_eq!((s.timeouts, s.probes), (0, 1));
            assert_eq!(n.c[0].paths[0].backoff, 0);
            n.ack_back(&again);
            let done = n.completions(0);
            assert!(done
                .iter()
                .any(|c| c.wr_id == 2 && c.status == WcStatus::Success));
        } else {
            assert!(due > n.now, "without probes the RTO is the next deadline");
            n.c[0].handle_timeout(n.now);
            assert!(
                n.out(0).iter().all(|p| !is_data(p)),
                "nothing sent before the RTO"
            );
            assert_eq!(n.c[0].stats().probes, 0);
        }
    }
}

// spec: MR-RTX-16
#[test]
fn a_stream_blocked_by_a_dead_path_probes_it_before_the_rto() {
    let (mut n, qp) = Net::with_qp(2);
    n.c[0].cfg.pacing = false;
    assert!(!n.c[0].cfg.tail_probe, "probe timeouts are off by default");
    // Path 0 is dead: its packets vanish. Path 1 delivers and is acknowledged.
    n.c[0]
        .post_send(qp, write(1, (REASM_WINDOW as u32 + 200) * 1024, 5))
        .unwrap();
    let (mut dropped, mut rounds) = (0, 0);
    loop {
        let pkts = n.out(0);
        if pkts.is_empty() {
            break;
        }
        let (live, dead): (Vec<_>, Vec<_>) = pkts
            .into_iter()
            .filter(|p| is_data(p))
            .partition(|p| hdr(p).path == 1);
        dropped += dead.len();
        n.ack_back(&live);
        rounds += 1;
        assert!(rounds < 1_000);
    }
    assert!(dropped > 0);
    assert!(
        n.c[0].blocked_stream().is_some(),
        "the stream stopped at its reassembly window"
    );
    let rto = n.c[0].paths[0].rto_deadline.unwrap();
    let due = n.c[0].poll_timeout().unwrap();
    assert!(due < rto, "a probe deadline before the RTO");
    n.now = due;
    n.c[0].handle_timeout(n.now);
    let again = n.out(0);
    assert!(
        again.iter().any(|p| is_data(p)),
        "the lost segments go again"
    );
    let s = n.c[0].stats();
    assert_eq!((s.timeouts, s.probes), (0, 1));
    n.ack_back(&again);
    assert!(n.c[0].blocked_stream().is_none());
}

// spec: MR-PATH-5, MR-PATH-7
#[test]
fn path_view_follows_timeouts_retirement_and_recovery() {
    use crate::path::PathState;
    let (mut n, qp) = Net::with_qp(1);
    let v = n.c[0].path_view(0).unwrap();
    assert_eq!(
        (v.state, v.bytes_in_flight, v.srtt_ns),
        (PathState::Active, 0, 0)
    );
    assert_eq!(v.sport, n.c[0].path_port(0).unwrap());
    assert_eq!(v.window, n.c[0].cc().path_window(0));
    assert!(n.c[0].path_view(MAX_PATHS).is_none());
    n.c[0].post_send(qp, write(1, 4096, 5)).unwrap();
    let _lost = n.out(0);
    assert!(n.c[0].path_view(0).unwrap().bytes_in_flight > 0);
    let (mut us, mut suspect) = (0, false);
    while n.c[0].path_view(0).unwrap().stats.retired == 0 {
        suspect |= n.c[0].path_view(0).unwrap().state == PathState::Suspect;
        us += 100;
        n.at(us);
        let _ = n.out(0);
        assert!(us < 1_000_000);
    }
    assert!(suspect, "a timeout makes the path suspect");
    let v = n.c[0].path_view(0).unwrap();
    assert_eq!(v.state, PathState::Retired);
    assert_eq!(v.sport, n.c[0].path_port(0).unwrap());
    assert!(v.stats.timeouts >= 2);
    // The link works again: the data goes through and the new port is acknowledged.
    while n.c[0].path_view(0).unwrap().state != PathState::Active {
        us += 100;
        n.at(us);
        let a = n.out(0);
        n.deliver(1, &a);
        let b = n.out(1);
        n.deliver(0, &b);
        assert!(us < 2_000_000);
    }
    n.settle();
    let v = n.c[0].path_view(0).unwrap();
    assert_eq!((v.state, v.bytes_in_flight), (PathState::Active, 0));
    assert!(v.srtt_ns > 0 && v.stats.acked > 0);
    assert_eq!(n.completions(0)[0].status, WcStatus::Success);
}

// spec: MR-CONN-7, MR-CONN-10, MR-CONN-11
#[test]
fn close_while_opening_reaches_the_peer() {
    let mut cfg = Config::new(0x11);
    cfg.peer_conn_id = 0;
    let mut a = fresh(cfg, 1);
    cfg.local_conn_id = 0x22;
    let mut b = fresh(cfg, 2);
    a.close(9);
    let mut buf = [0u8; MIN_TRANSMIT_BUF];
    let t = a.poll_transmit(t0(), &mut buf).unwrap();
    let h = hdr(&buf[..t.len]);
    assert_eq!(
        (h.dst_conn, h.flags.has(Flags::OPEN), h.packet_type()),
        (0, true, Ok(PacketType::Control))
    );
    assert_eq!(
        b.handle_datagram(t0(), false, &buf[..t.len], &mut Mem::default()),
        Ok(())
    );
    assert_eq!(b.state(), ConnState::Closed);
    assert_eq!(b.poll_event(), Some(Event::Closed { reason: 9 }));
}

// spec: MR-PSN-1
#[test]
fn initial_psn_test_vectors() {
    assert_eq!(initial_psn(0x0000_0001, 0), 0xe324_653f);
    assert_eq!(initial_psn(0x0000_0001, 1), 0x5060_2724);
    assert_eq!(initial_psn(0x1234_5678, 0), 0x021f_9f77);
    assert_eq!(initial_psn(0x1234_5678, 15), 0x2a4e_79fc);
    assert_eq!(initial_psn(0xffff_ffff, 7), 0x0c8b_6fea);
    // The first data packet of each path carries it, and the receiver expects it.
    let (mut n, qp) = Net::with_qp(4);
    n.c[0].post_send(qp, write(1, 4096, 5)).unwrap();
    for p in n.out(0).iter().filter(|p| is_data(p)) {
        let h = hdr(p);
        assert_eq!(h.psn, initial_psn(0x11, usize::from(h.path)));
        assert_eq!(n.c[1].rx_paths[usize::from(h.path)].window.base(), h.psn);
    }
}

// spec: MR-PATH-1, MR-PATH-2
#[test]
fn paths_and_ports() {
    let mut cfg = Config::new(1);
    cfg.paths = 0;
    assert_eq!(cfg.sanitized().paths, 1);
    cfg.paths = 200;
    assert_eq!(cfg.sanitized().paths, crate::constants::MAX_PATHS as u8);
    let c = fresh(cfg, 3);
    let ports: Vec<u16> = (0..crate::constants::MAX_PATHS)
        .map(|i| c.path_port(i).unwrap())
        .collect();
    assert!(ports.iter().all(|p| *p >= 49152));
    for (i, a) in ports.iter().enumerate() {
        assert!(!ports[i + 1..].contains(a), "ports are distinct");
    }
}

// spec: MR-CONN-3, MR-CONN-4, MR-CONN-5, MR-SEC-3, MR-SEC-2
#[test]
fn connection_ids_are_checked_before_anything() {
    let (mut n, qp) = Net::with_qp(1);
    n.c[0].post_send(qp, write(1, 100, 5)).unwrap();
    let pkt = n.out(0).remove(0);
    let h = hdr(&pkt);
    assert_eq!(
        (h.src_conn, h.dst_conn, h.flags.has(Flags::OPEN)),
        (0x11, 0x22, false)
    );
    // Wrong dst_conn, or dst_conn 0 without OPEN, or another src_conn: dropped, no reply.
    for (off, v) in [(4usize, 0x23u32), (4, 0), (8, 0x12)] {
        let mut bad = pkt.clone();
        bad[off..off + 4].copy_from_slice(&v.to_be_bytes());
        assert_eq!(
            n.c[1].handle_datagram(n.now, false, &bad, &mut n.mem[1]),
            Err(RxDrop::WrongConnection)
        );
    }
    n.now = n.now.add_nanos(1_000_000);
    assert!(n.out(1).is_empty(), "nothing is sent in reply");
    assert_eq!(n.mem[1].placed, 0);
}

// spec: MR-CONN-12, MR-CONN-10
#[test]
fn closed_connection_drops_and_stays_silent() {
    let (mut n, qp) = Net::with_qp(1);
    n.c[0].post_send(qp, write(1, 100, 5)).unwrap();
    let data = n.out(0);
    n.c[1].close(0);
    let out = n.out(1);
    assert_eq!(out.len(), 1, "one CLOSE");
    assert_eq!(n.c[1].state(), ConnState::Closed);
    assert_eq!(
        n.c[1].handle_datagram(n.now, false, &data[0], &mut n.mem[1]),
        Err(RxDrop::Closed)
    );
    assert!(n.out(1).is_empty());
    assert_eq!(
        n.c[1].post_send(QpId(0), write(2, 1, 5)),
        Err(PostError::Closed)
    );
}

// spec: MR-RTX-5
#[test]
fn rto_max_lets_the_backoff_outgrow_the_initial_timeout() {
    let mut cfg = Config::new(1);
    cfg.rto_initial_ns = 67_000_000;
    assert_eq!(cfg.sanitized().rto_max_ns, 8 * 67_000_000);
    let (mut n, _) = Net::with_qp(1);
    n.c[0].set_retransmission(7, 67_000_000, 16_000_000);
    assert_eq!(n.c[0].config().rto_max_ns, 8 * 67_000_000);
    // Below 8 initial timeouts, the configured ceiling stands.
    assert_eq!(
        Config::new(1).sanitized().rto_max_ns,
        Config::new(1).rto_max_ns
    );
}

// spec: MR-RTX-13
#[test]
fn a_stalled_peer_is_not_dead_before_the_ack_timeout() {
    // Four paths, one retry each: five loss detections in a row exceed the
    // count. The adaptive RTO (1 ms floor) is far below the local ACK
    // timeout (50 ms): a peer host that stalls for 20 ms times out every
    // path in turn, and then acknowledges everything. (Interop of the
    // userspace endpoint with the driver under TCG failed so.)
    let (mut n, qp) = Net::with_qp(4);
    n.c[0].set_retransmission(1, 50_000_000, 1_000_000);
    n.c[0].set_retry_limit(qp, 1).unwrap();
    // Every path gets an RTT sample first.
    for id in 1..=4 {
        n.c[0].post_send(qp, write(id, 4096, 5)).unwrap();
        n.settle();
        assert_eq!(n.completions(0)[0].status, WcStatus::Success);
    }
    n.c[0].post_send(qp, write(9, 4096, 5)).unwrap();
    let mut held = n.out(0);
    let stall_end = n.now.add_nanos(20_000_000);
    while let Some(t) = n.c[0].poll_timeout().filter(|&t| t < stall_end) {
        n.now = t;
        n.c[0].handle_timeout(n.now);
        held.extend(n.out(0));
    }
    assert!(n.c[0].stats().timeouts > 4, "{}", n.c[0].debug_state());
    assert!(n.completions(0).is_empty(), "failed during the stall");
    n.now = stall_end;
    n.deliver(1, &held);
    n.settle();
    let c = n.completions(0);
    assert_eq!(
        (c.len(), c[0].wr_id, c[0].status),
        (1, 9, WcStatus::Success)
    );
}

// spec: MR-QP-5
#[test]
fn send_psn_set_at_rts_matches_the_peer() {
    let mut n = Net::new(1);
    // Bound at RTR with an unknown send PSN (0); verbs sets it at RTS.
    let qp = n.c[0].open_qp_psn(1, 2, 0, 0x99).unwrap();
    let rq = n.c[1].open_qp_psn(2, 1, 0x99, 0x1234).unwrap();
    n.c[0].set_sq_psn(qp, 0x1234).unwrap();
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
    n.settle();
    let c = n.completions(1);
    assert_eq!(
        (c.len(), c[0].wr_id, c[0].status),
        (1, 50, WcStatus::Success)
    );
    // Too late once something was posted.
    assert_eq!(n.c[0].set_sq_psn(qp, 7), Err(PostError::Invalid));
}

/// Both sides open with `peer_conn_id` 0 (OPEN), as the driver does, and the first
/// flight is held in the network for many initial RTOs before it arrives.
#[test]
fn open_with_a_first_flight_held_past_many_rtos() {
    let mut n = Net::new(8);
    for (i, c) in n.c.iter_mut().enumerate() {
        let mut cfg = *c.config();
        cfg.local_conn_id = 0x11 * (i as u32 + 1);
        cfg.peer_conn_id = 0;
        cfg.ack_delay_ns = 0;
        c.reset(cfg, Aimd::new(cfg.aimd), t0(), i as u64 + 1);
    }
    let qp = n.c[0].open_qp_psn(1, 2, 5, 9).unwrap();
    n.c[1].open_qp_psn(2, 1, 9, 5).unwrap();
    for id in 0..3 {
        n.c[0].post_send(qp, write(id, 65536, 5)).unwrap();
    }
    let first = n.out(0);
    assert!(!first.is_empty());
    // 16 ms pass: retransmission timeouts fire, their packets are held too.
    let mut held = first;
    for ms in 1..=16 {
        n.at(ms * 1000);
        held.extend(n.out(0));
    }
    n.deliver(1, &held);
    n.settle();
    for ms in 17..=400 {
        n.at(ms * 1000);
        n.settle();
    }
    let c = n.completions(0);
    assert_eq!(c.len(), 3, "{:?} {}", c, n.c[0].debug_state());
}

/// The debug state shows each path's PSNs on both sides: after a settled
/// exchange, the sender's unacknowledged PSN, its next and the receiver's base
/// are the same number.
#[test]
fn debug_state_shows_both_ends_of_a_path() {
    use std::string::{String, ToString};
    let (mut n, qp) = Net::with_qp(1);
    n.c[0]
        .post_send(
            qp,
            WorkRequest {
                ack_req: true,
                ..write(1, 3 * 1024, 5)
            },
        )
        .unwrap();
    n.settle();
    let field = |s: &str, key: &str| -> String {
        let at = s.find(key).unwrap() + key.len();
        s[at..].split(' ').next().unwrap().to_string()
    };
    let sender = n.c[0].debug_state().to_string();
    let receiver = n.c[1].debug_state().to_string();
    let range = field(&sender, " psn=");
    let (una, next) = range.split_once("..").unwrap();
    assert_eq!(una, next, "{sender}");
    assert_eq!(field(&sender, " peer_cum="), una, "{sender}");
    assert_eq!(field(&receiver, " rx_base="), una, "{receiver}");
    assert_eq!(field(&sender, " rto_run="), "0");
}

/// A data packet for a QP the receiver has not bound is dropped and counted
/// as such: the requester got ahead of its peer's RTR and retransmits.
#[test]
fn packet_for_no_qp_is_counted_by_reason() {
    let mut n = Net::new(1);
    let qp = n.c[0].open_qp(1, 2).unwrap();
    n.c[0].post_send(qp, write(1, 100, 5)).unwrap();
    let pkt = n.out(0).into_iter().find(|p| is_data(p)).unwrap();
    assert_eq!(
        n.c[1].handle_datagram(n.now, false, &pkt, &mut n.mem[1]),
        Err(RxDrop::NoQp)
    );
    let s = n.c[1].stats();
    assert_eq!((s.rx_dropped, s.rx_out_of_window, s.rx_no_qp), (1, 0, 1));
}
/// Opens with both peer ids unknown, as the driver does: both sides send
/// `OPEN` with `dst_conn` 0 at once (simultaneous open).
fn open_unknown_peers(paths: u8) -> (Net, QpId, QpId) {
    let mut n = Net::new(paths);
    for (i, c) in n.c.iter_mut().enumerate() {
        let mut cfg = *c.config();
        cfg.local_conn_id = 0x11 * (i as u32 + 1);
        cfg.peer_conn_id = 0;
        c.reset(cfg, Aimd::new(cfg.aimd), t0(), i as u64 + 1);
    }
    let a = n.c[0].open_qp_psn(1, 2, 5, 9).unwrap();
    let b = n.c[1].open_qp_psn(2, 1, 9, 5).unwrap();
    (n, a, b)
}

/// Once the peer has shown that it knows our connection id (a packet with
/// `dst_conn` = our id arrived from it), packets with `dst_conn` 0 are refused,
/// `OPEN` or not: a spoofed `OPEN` CLOSE (or ACK, or data) needs both ids from
/// then on. Connection setup itself is unharmed: both sides open at once, and
/// an `OPEN` packet delayed past that point is dropped and its data sent again.
// spec: MR-CONN-4, MR-CONN-5, MR-CONN-7, MR-CONN-13
#[test]
fn open_is_refused_once_the_peer_knows_our_id() {
    let (mut n, a, b) = open_unknown_peers(2);
    n.c[1].post_recv(b, 7, 4096).unwrap();
    n.c[0].post_send(a, write(1, 4096, 5)).unwrap();
    n.c[1].post_send(b, write(2, 1024, 5)).unwrap();
    let from_a = n.out(0);
    let from_b = n.out(1);
    assert!(Iterator::chain(from_a.iter(), &from_b)
        .all(|p| hdr(p).dst_conn == 0 && hdr(p).flags.has(Flags::OPEN)));
    // One of a's first packets is held in the network.
    let (held, from_a) = from_a.split_first().unwrap();
    n.deliver(1, from_a);
    n.deliver(0, &from_b);
    assert_eq!((n.c[0].peer_conn_id(), n.c[1].peer_conn_id()), (0x22, 0x11));
    // Each side now sends to the other's id; once those arrive, dst_conn 0 is refused.
    n.c[0]
        .post_send(
            a,
            WorkRequest {
                opcode: Opcode::Send,
                ..write(3, 100, 0)
            },
        )
        .unwrap();
    n.c[1].post_send(b, write(4, 100, 5)).unwrap();
    let (x, y) = (n.out(0), n.out(1));
    assert!(Iterator::chain(x.iter(), &y)
        .all(|p| hdr(p).dst_conn != 0 && !hdr(p).flags.has(Flags::OPEN)));
    n.deliver(1, &x);
    n.deliver(0, &y);
    let dropped = n.c[1].stats().rx_dropped;
    assert_eq!(
        n.c[1].handle_datagram(n.now, false, held, &mut n.mem[1]),
        Err(RxDrop::WrongConnection)
    );
    // A spoofed CLOSE with OPEN and dst_conn 0, in a's name.
    let close = crate::wire::Control {
        code: crate::wire::ControlCode::Close,
        path: 0,
        value: 1,
    };
    let spoof = forge(&n, 0, |h| PacketRepr::Control {
        header: Header {
            dst_conn: 0,
            flags: Flags(Flags::OPEN),
            ..h
        },
        control: close,
    });
    assert_eq!(
        n.c[1].handle_datagram(n.now, false, &spoof, &mut n.mem[1]),
        Err(RxDrop::WrongConnection)
    );
    assert_eq!(n.c[1].state(), ConnState::Open);
    let spoof = forge(&n, 1, |h| PacketRepr::Control {
        header: Header {
            dst_conn: 0,
            flags: Flags(Flags::OPEN),
            ..h
        },
        control: close,
    });
    assert_eq!(
        n.c[0].handle_datagram(n.now, false, &spoof, &mut n.mem[0]),
        Err(RxDrop::WrongConnection)
    );
    assert_eq!(n.c[0].state(), ConnState::Open);
    assert_eq!(n.c[1].stats().rx_dropped, dropped + 2);
    assert_eq!(
        (n.c[0].stats().rx_wrong_conn, n.c[1].stats().rx_wrong_conn),
        (1, 2)
    );
    // The held packet's data is sent again: everything completes.
    for ms in 1..=200 {
        n.at(ms * 1000);
        n.settle();
    }
    let mut done: Vec<_> = n
        .completions(0)
        .iter()
        .map(|c| (c.wr_id, c.status))
        .collect();
    done.extend(n.completions(1).iter().map(|c| (c.wr_id, c.status)));
    done.sort_by_key(|d| d.0);
    let ok = WcStatus::Success;
    assert_eq!(
        done,
        [(1, ok), (2, ok), (3, ok), (4, ok), (7, ok)],
        "{}",
        n.c[0].debug_state()
    );
}

/// A connection to itself ([MR-CONN-15]): two QPs of one device, bound to the one
/// connection whose peer address is the device's own, the driver looping every
/// datagram back into the same connection.
struct SelfConn {
    c: Box<Connection>,
    mem: Mem,
    now: Instant,
}

impl SelfConn {
    /// As the driver opens it: the peer's id unknown, learned from its own first packet.
    fn new(paths: u8) -> SelfConn {
        let mut cfg = Config::new(0x11);
        cfg.paths = paths;
        cfg.mtu = 1024;
        SelfConn {
            c: fresh(cfg, 5),
            mem: Mem::default(),
            now: t0(),
        }
    }

    fn out(&mut self) -> Vec<Vec<u8>> {
        let mut v = Vec::new();
        let mut buf = [0u8; MIN_TRANSMIT_BUF];
        while let Some(t) = self.c.poll_transmit(self.now, &mut buf) {
            let mut p = buf[..t.len].to_vec();
            p.resize(t.len + t.payload.map_or(0, |p| p.len() as usize), 0);
            v.push(p);
        }
        v
    }

    /// Loops everything back until quiet, letting delayed ACKs (not retransmission
    /// timers) fire.
    fn settle(&mut self) {
        let mut idle = 0;
        for _ in 0..512 {
            let pkts = self.out();
            if pkts.is_empty() {
                idle += 1;
                if idle > 2 {
                    return;
                }
                self.now = self.now.add_nanos(self.c.cfg.ack_delay_ns);
                if self.c.poll_timeout().is_some_and(|t| t <= self.now) {
                    self.c.handle_timeout(self.now);
                }
                continue;
            }
            idle = 0;
            for p in &pkts {
                let _ = self.c.handle_datagram(self.now, false, p, &mut self.mem);
            }
        }
    }

    fn completions(&mut self) -> Vec<crate::event::Completion> {
        let mut v = Vec::new();
        while let Some(e) = self.c.poll_event() {
            if let Event::Completion(c) = e {
                v.push(c);
            }
        }
        v
    }
}

/// Two QPs of one device talk over the device's connection to itself: every opcode
/// one way, a SEND the other, all completing in order without a retransmission; the
/// connection's peer id is its own id, learned from its own `OPEN` packets, and the
/// request and response streams of the two QPs stay apart.
// spec: MR-CONN-15, MR-CONN-5, MR-CONN-6
#[test]
fn self_connection_carries_every_opcode() {
    let mut s = SelfConn::new(4);
    let a = s.c.open_qp(1, 2).unwrap();
    let b = s.c.open_qp(2, 1).unwrap();
    for i in 0..3 {
        s.c.post_recv(b, 100 + i, 8192).unwrap();
    }
    s.c.post_recv(a, 200, 8192).unwrap();
    let ops = [
        Opcode::Send,
        Opcode::SendImm,
        Opcode::Write,
        Opcode::WriteImm,
        Opcode::Read,
        Opcode::CompareSwap,
        Opcode::FetchAdd,
    ];
    for (i, &opcode) in ops.iter().enumerate() {
        let len = if opcode.is_atomic() { 8 } else { 3000 };
        let wr = WorkRequest {
            wr_id: i as u64,
            opcode,
            len,
            rkey: 5,
            remote_addr: 0x1000,
            imm: 9,
            ack_req: true,
            ..Default::default()
        };
        s.c.post_send(a, wr).unwrap();
    }
    s.c.post_send(
        b,
        WorkRequest {
            wr_id: 50,
            opcode: Opcode::Send,
            len: 500,
            ack_req: true,
            ..Default::default()
        },
    )
    .unwrap();
    let first = s.out();
    assert!(
        !first.is_empty()
            && first
                .iter()
                .all(|p| hdr(p).dst_conn == 0 && hdr(p).flags.has(Flags::OPEN))
    );
    for p in &first {
        let _ = s.c.handle_datagram(s.now, false, p, &mut s.mem);
    }
    assert_eq!(s.c.peer_conn_id(), 0x11);
    s.settle();
    assert!(s.c.peer_knows_us());
    let done = s.completions();
    let at = |qp: QpId| -> Vec<(u64, WcStatus)> {
        done.iter()
            .filter(|c| c.qp == qp)
            .map(|c| (c.wr_id, c.status))
            .collect()
    };
    let ok = WcStatus::Success;
    assert_eq!(
        at(a),
        [
            (0, ok),
            (1, ok),
            (2, ok),
            (3, ok),
            (4, ok),
            (5, ok),
            (6, ok),
            (200, ok)
        ],
        "{}",
        s.c.debug_state()
    );
    assert_eq!(at(b), [(50, ok), (100, ok), (101, ok), (102, ok)]);
    let imm: Vec<_> = done.iter().filter(|c| c.qp == b).map(|c| c.imm).collect();
    assert_eq!(imm, [None, None, Some(9), Some(9)]);
    let st = s.c.stats();
    assert_eq!(
        (
            st.timeouts,
            st.tx_retransmits,
            st.rx_wrong_conn,
            st.rx_no_qp
        ),
        (0, 0, 0, 0)
    );
    // The requests' bytes were placed once each: SEND, SEND_IMM, WRITE,
    // WRITE_IMM at the responder, the READ response and the two atomics' original
    // values at the requester, b's SEND.
    assert_eq!(s.mem.placed, 5 * 3000 + 2 * 8 + 500);
}

/// The identity checks hold on a connection to itself: once its own packets have
/// shown that it knows its id, a packet with `dst_conn` 0 (`OPEN` or not) and one
/// with another `src_conn` are dropped as for any peer; traffic goes on.
// spec: MR-CONN-15, MR-CONN-13, MR-CONN-5
#[test]
fn self_connection_keeps_the_id_checks() {
    let mut s = SelfConn::new(2);
    let a = s.c.open_qp(1, 2).unwrap();
    let b = s.c.open_qp(2, 1).unwrap();
    s.c.post_send(a, write(1, 2000, 5)).unwrap();
    let held = s.out();
    assert!(held.len() >= 2);
    let (late, rest) = held.split_first().unwrap();
    for p in rest {
        let _ = s.c.handle_datagram(s.now, false, p, &mut s.mem);
    }
    s.settle();
    assert!(s.c.peer_knows_us());
    // A's first packet, late: OPEN with dst_conn 0.
    assert_eq!(
        s.c.handle_datagram(s.now, false, late, &mut s.mem),
        Err(RxDrop::WrongConnection)
    );
    let close = crate::wire::Control {
        code: crate::wire::ControlCode::Close,
        path: 0,
        value: 1,
    };
    let mut buf = [0u8; MIN_TRANSMIT_BUF];
    for h in [
        Header {
            src_conn: 0x11,
            dst_conn: 0,
            flags: Flags(Flags::OPEN),
            ..Default::default()
        },
        Header {
            src_conn: 0x12,
            dst_conn: 0x11,
            ..Default::default()
        },
    ] {
        let len = PacketRepr::Control {
            header: h,
            control: close,
        }
        .emit(&mut buf)
        .unwrap();
        assert_eq!(
            s.c.handle_datagram(s.now, false, &buf[..len], &mut s.mem),
            Err(RxDrop::WrongConnection)
        );
    }
    assert_eq!(s.c.state(), ConnState::Open);
    assert_eq!(s.c.stats().rx_wrong_conn, 3);
    // The late packet's data goes again; b answers a.
    s.c.post_send(b, write(2, 100, 5)).unwrap();
    for ms in 1..=200 {
        s.now = s.now.max(t0().add_nanos(ms * 1_000_000));
        if s.c.poll_timeout().is_some_and(|t| t <= s.now) {
            s.c.handle_timeout(s.now);
        }
        s.settle();
    }
    let done: Vec<_> = s
        .completions()
        .iter()
        .map(|c| (c.qp, c.wr_id, c.status))
        .collect();
    assert_eq!(
        done,
        [(a, 1, WcStatus::Success), (b, 2, WcStatus::Success)],
        "{}",
        s.c.debug_state()
    );
}
