// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! State-level regression tests: two connections joined by a hand-driven
//! queue, so a test can drop, hold, forge or replay single packets and look
//! at internal state.

extern crate std;

use std::boxed::Box;
use std::vec::Vec;

use super::*;
use crate::constants::{MAX_REORDER_THRESHOLD, MIN_TRANSMIT_BUF, SACK_BITS, SRQ_CLAIM_WINDOW};
use crate::event::WcStatus;
use crate::memory::{AtomicOp, Dest, MemError, Memory};
use crate::path::inflight::Inflight;
use crate::wire::{Flags, Header, NakCode, Packet, PacketRepr, PacketType};
use crate::wr::{Opcode, WorkRequest};
use pin_init::InPlaceInit;

/// Memory that accepts everything except rkey 0xBAD and local placements
/// when `refuse_local` is set; counts placed bytes.
#[derive(Default)]
struct Mem {
    placed: u64,
    refuse_local: bool,
    /// Receives left in the shared receive queue, and how many were taken.
    srq_left: u32,
    srq_taken: u32,
}

impl Memory for Mem {
    fn place(&mut self, _: QpId, dest: Dest, data: &[u8]) -> Result<(), MemError> {
        match dest {
            Dest::Remote { rkey: 0xBAD, .. } => return Err(MemError::Access),
            Dest::Local { .. } if self.refuse_local => return Err(MemError::Access),
            _ => {}
        }
        self.placed += data.len() as u64;
        Ok(())
    }
    fn check_read(&mut self, _: QpId, _: u32, _: u64, _: u32) -> Result<(), MemError> {
        Ok(())
    }
    fn atomic(&mut self, _: QpId, _: u32, _: u64, _: AtomicOp) -> Result<u64, MemError> {
        Ok(7)
    }
    fn take_shared_recv(&mut self, _: QpId) -> Option<(u64, u32)> {
        self.srq_left = self.srq_left.checked_sub(1)?;
        self.srq_taken += 1;
        Some((1000 + u64::from(self.srq_taken), 4096))
    }
}

struct Net {
    c: [Box<Connection>; 2],
    mem: [Mem; 2],
    now: Instant,
}

fn t0() -> Instant {
    Instant::from_nanos(1_000_000)
}

impl Net {
    fn new(paths: u8) -> Net {
        let mut cfg = Config::new(0x11);
        cfg.paths = paths;
        cfg.mtu = 1024;
        cfg.peer_conn_id = 0x22;
        // In place, as the kernel driver does (KBox::init).
        let a = Box::init(Connection::init_aimd(cfg, t0(), 1)).unwrap_or_else(|e| match e {});
        cfg.local_conn_id = 0x22;
        cfg.peer_conn_id = 0x11;
        let b = Box::init(Connection::init_aimd(cfg, t0(), 2)).unwrap_or_else(|e| match e {});
        Net {
            c: [a, b],
            mem: [Mem::default(), Mem::default()],
            now: t0(),
        }
    }

    /// A pair of connections over `paths` paths with one QP bound on each side
    /// (QPN 1 to QPN 2); returns the sender's.
    fn with_qp(paths: u8) -> (Net, QpId) {
        let mut n = Net::new(paths);
        let qp = n.c[0].open_qp(1, 2).unwrap();
        n.c[1].open_qp(2, 1).unwrap();
        (n, qp)
    }

    /// Every packet `from` would send now (headers plus a zero payload).
    fn out(&mut self, from: usize) -> Vec<Vec<u8>> {
        let mut v = Vec::new();
        let mut buf = [0u8; MIN_TRANSMIT_BUF];
        while let Some(t) = self.c[from].poll_transmit(self.now, &mut buf) {
            let mut p = buf[..t.len].to_vec();
            p.resize(t.len + t.payload.map_or(0, |p| p.len() as usize), 0);
            v.push(p);
        }
        v
    }

    fn deliver(&mut self, to: usize, pkts: &[Vec<u8>]) {
        for p in pkts {
            let _ = self.c[to].handle_datagram(self.now, false, p, &mut self.mem[to]);
        }
    }

    /// Delivers `pkts` to side 1, lets its delayed ACK fire and delivers the
    /// ACK to side 0.
    fn ack_back(&mut self, pkts: &[Vec<u8>]) {
        self.deliver(1, pkts);
        self.now = self.now.add_nanos(self.c[1].cfg.ack_delay_ns);
        self.c[1].handle_timeout(self.now);
        let acks = self.out(1);
        self.deliver(0, &acks);
    }

    /// Exchanges everything both ways until quiet, letting delayed ACKs
    /// (not retransmission timers) fire.
    fn settle(&mut self) {
        let mut idle = 0;
        for _ in 0..256 {
            let a = self.out(0);
            let b = self.out(1);
            if a.is_empty() && b.is_empty() {
                idle += 1;
                if idle > 2 {
                    return;
                }
                self.now = self.now.add_nanos(self.c[0].cfg.ack_delay_ns);
                for c in self.c.iter_mut() {
                    if c.poll_timeout().is_some_and(|t| t <= self.now) {
                        c.handle_timeout(self.now);
                    }
                }
                continue;
            }
            idle = 0;
            self.deliver(1, &a);
            self.deliver(0, &b);
        }
    }

    fn at(&mut self, us: u64) {
        self.now = self.now.max(t0().add_nanos(us * 1000));
        for c in self.c.iter_mut() {
            if c.poll_timeout().is_some_and(|t| t <= self.now) {
                c.handle_timeout(self.now);
            }
        }
    }

    fn completions(&mut self, i: usize) -> Vec<crate::event::Completion> {
        let mut v = Vec::new();
        while let Some(e) = self.c[i].poll_event() {
            if let Event::Completion(c) = e {
                v.push(c);
            }
        }
        v
    }
}

fn write(id: u64, len: u32, rkey: u32) -> WorkRequest {
    WorkRequest {
        wr_id: id,
        opcode: Opcode::Write,
        len,
        rkey,
        ..Default::default()
    }
}

fn hdr(p: &[u8]) -> Header {
    *Packet::new_checked(p).unwrap().header()
}

fn is_data(p: &[u8]) -> bool {
    Packet::new_checked(p).is_ok_and(|p| p.packet_type().is_data())
}

fn fresh(cfg: Config, seed: u64) -> Box<Connection> {
    Box::init(Connection::init_aimd(cfg, t0(), seed)).unwrap_or_else(|e| match e {})
}

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

// spec: MR-PATH-10
#[test]
fn unanswered_path_floor_waits_a_base_rto() {
    let (mut n, qp) = Net::with_qp(1);
    let cfg = *n.c[0].config();
    // A base RTO far above this test's round trips (none).
    n.c[0].set_retransmission(cfg.retry_limit, 20_000_000, 10_000_000);
    n.c[0].post_send(qp, write(1, 8 * 1024, 5)).unwrap();
    let pkts = n.out(0);
    n.deliver(1, &pkts[1..]);
    let acks = n.out(1);
    n.deliver(0, &acks);
    let first = n.out(0);
    assert_eq!(n.c[0].stats().tx_floors, 1);
    // The floor and the retransmission wait in a queue longer than the SRTT:
    // nothing answers. Floors are not congestion controlled; one per SRTT
    // (on 2026-12-05, one per poll here) fed the queue that delayed them,
    // until 8 senders' floors overflowed a 10,240-packet fq_codel (the VM's
    // incast 8:1, tools/bench-fabric). The next waits a base RTO.
    let rto = n.c[0].base_rto(0);
    assert!(rto >= 10_000_000);
    let start = n.now;
    while n.now.add_nanos(100_000) < start.add_nanos(rto) {
        n.now = n.now.add_nanos(100_000);
        assert!(n.out(0).is_empty());
    }
    assert_eq!(n.c[0].stats().tx_floors, 1);
    n.now = start.add_nanos(rto);
    let again = n.out(0);
    assert_eq!(n.c[0].stats().tx_floors, 2);
    // Answered, the path needs no more floors and the write completes.
    n.deliver(1, &first);
    n.deliver(1, &again);
    n.settle();
    assert!(!n.c[0].paths[0].floor_needed());
    assert_eq!(n.c[0].stats().tx_floors, 2);
    assert_eq!(n.completions(0)[0].status, WcStatus::Success);
}

// spec: MR-PATH-10, MR-PATH-11, MR-SACK-19
#[test]
fn sender_far_beyond_receiver_window_recovers() {
    let (mut n, qp) = Net::with_qp(1);
    // As after a long blackhole: 1000 PSNs of path 0 were sent and abandoned.
    let p = &mut n.c[0].paths[0];
    let start = p.inflight.una().wrapping_add(1000);
    p.inflight = Inflight::new(start);
    n.c[0].post_send(qp, write(1, 1024, 5)).unwrap();
    let mut us = 0;
    loop {
        n.settle();
        let c = n.completions(0);
        if !c.is_empty() {
            assert_eq!(c[0].status, WcStatus::Success);
            break;
        }
        us += 100;
        assert!(us < 100_000, "the path stays wedged");
        n.at(us);
    }
    assert!(seq_diff_u(n.c[1].rx_paths[0].window.base(), start) > 0);
    // In steps of less than 512: the receiver refuses a floor further ahead.
    assert!(n.c[0].stats().tx_floors >= 2);
    assert_eq!(n.c[1].stats().rx_dropped, 0);
}

fn seq_diff_u(a: u32, b: u32) -> i32 {
    crate::psn::seq_diff(a, b)
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

// spec: MR-CC-13
#[test]
fn aimd_segment_follows_mtu() {
    let mut cfg = Config::new(1);
    cfg.mtu = 1024;
    let c = fresh(cfg, 1);
    assert_eq!(c.config().aimd.mss, 1024);
    let d = crate::cc::AimdConfig::for_mss(1024);
    assert_eq!(c.config().aimd, d);
    use crate::cc::CongestionControl;
    assert_eq!(c.cc().path_window(0), d.init_path_cwnd);
    // Custom windows keep their size in packets.
    let mut cfg = Config::new(1);
    cfg.aimd.init_conn_cwnd = 8 * 4096;
    cfg.mtu = 2048;
    assert_eq!(cfg.sanitized().aimd.init_conn_cwnd, 8 * 2048);
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

// spec: MR-PATH-3, MR-PATH-12
#[test]
fn path_burst_keeps_runs_on_one_path() {
    let paths_of = |burst: u32| {
        let mut n = Net::new(4);
        for (i, c) in n.c.iter_mut().enumerate() {
            let mut cfg = *c.config();
            cfg.path_burst = burst;
            let (id, peer) = if i == 0 { (0x11, 0x22) } else { (0x22, 0x11) };
            cfg.local_conn_id = id;
            cfg.peer_conn_id = peer;
            *c = Box::init(Connection::init_aimd(cfg, t0(), 1 + i as u64))
                .unwrap_or_else(|e| match e {});
        }
        let qp = n.c[0].open_qp(1, 2).unwrap();
        n.c[1].open_qp(2, 1).unwrap();
        n.c[0].post_send(qp, write(1, 12 * 1024, 5)).unwrap();
        let out = n.out(0);
        let paths: Vec<u8> = out
            .iter()
            .filter(|p| is_data(p))
            .map(|p| hdr(p).path)
            .collect();
        // Everything arrives and completes as without bursts.
        n.deliver(1, &out);
        n.settle();
        assert_eq!(n.completions(0).len(), 1);
        paths
    };
    assert_eq!(paths_of(1)[..8], [0, 1, 2, 3, 0, 1, 2, 3]);
    assert_eq!(paths_of(4), [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]);
    let mut cfg = Config::new(1);
    cfg.path_burst = 0;
    assert_eq!(cfg.sanitized().path_burst, 1);
    cfg.path_burst = 1000;
    assert_eq!(cfg.sanitized().path_burst, crate::conn::MAX_PATH_BURST);
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

// spec: MR-SACK-9, MR-SACK-20
#[test]
fn sender_asks_for_an_ack_when_it_waits_for_one() {
    let ack_req = |p: &Vec<u8>| hdr(p).flags.has(Flags::ACK_REQ);
    let (mut n, qp) = Net::with_qp(1);
    // Unsignaled: no ACK_REQ, the receiver delays its ACK.
    n.c[0].post_send(qp, write(1, 1024, 5)).unwrap();
    let quiet = n.out(0);
    assert!(!ack_req(&quiet[0]));
    n.deliver(1, &quiet);
    assert!(n.out(1).is_empty(), "delayed");
    // Signaled: the last packet asks, and the receiver acknowledges at once.
    n.c[0]
        .post_send(
            qp,
            WorkRequest {
                ack_req: true,
                ..write(2, 2 * 1024, 5)
            },
        )
        .unwrap();
    let asked = n.out(0);
    assert_eq!(asked.iter().map(ack_req).collect::<Vec<_>>(), [false, true]);
    n.deliver(1, &asked);
    let acks = n.out(1);
    assert_eq!(acks.len(), 1);
    n.deliver(0, &acks);
    assert_eq!(n.completions(0).len(), 2);
    // A retransmission asks.
    n.c[0].post_send(qp, write(3, 1024, 5)).unwrap();
    let lost = n.out(0);
    assert_eq!(lost.len(), 1);
    n.at(50_000);
    let again = n.out(0);
    assert!(again.iter().filter(|p| is_data(p)).all(ack_req) && !again.is_empty());
    n.settle();

    // A packet after which the connection window has no room for another asks.
    let mut cfg = Config::new(0x11);
    cfg.paths = 1;
    cfg.mtu = 1024;
    cfg.peer_conn_id = 0x22;
    cfg.aimd.init_conn_cwnd = 8 * 4096;
    let mut c = fresh(cfg, 3);
    let qp = c.open_qp(1, 2).unwrap();
    c.post_send(qp, write(4, 32 * 1024, 5)).unwrap();
    let mut buf = [0u8; MIN_TRANSMIT_BUF];
    let mut flags = Vec::new();
    while let Some(t) = c.poll_transmit(n.now, &mut buf) {
        flags.push(hdr(&buf[..t.len]).flags.has(Flags::ACK_REQ));
    }
    assert!(
        flags.len() > 2 && flags.len() < 32,
        "window-limited: {}",
        flags.len()
    );
    assert!(!flags[0]);
    assert!(
        flags[flags.len() - 1],
        "the packet that fills the window asks"
    );

    // Unless that window holds more than `window_ack_req` packets:
    // the receiver's `ack_every` keeps the sender going.
    let mut filling = |limit: u32| {
        let mut cfg = cfg;
        cfg.window_ack_req = limit;
        let mut c = fresh(cfg, 3);
        let qp = c.open_qp(1, 2).unwrap();
        c.post_send(qp, write(4, 32 * 1024, 5)).unwrap();
        let mut flags = Vec::new();
        while let Some(t) = c.poll_transmit(n.now, &mut buf) {
            flags.push(hdr(&buf[..t.len]).flags.has(Flags::ACK_REQ));
        }
        flags
    };
    let large = filling(4);
    assert_eq!(large.len(), flags.len(), "the same packets leave");
    assert!(
        large.iter().all(|&f| !f),
        "8-packet windows, limit 4: no ACK_REQ"
    );
    assert_eq!(filling(64), flags, "a window below the limit still asks");
}

// spec: MR-CC-10
#[test]
fn pacing_gain_scales_the_window_rate() {
    // One packet's pacing interval after an RTT sample, at gain 1 and 2.
    let interval = |gain: u32| {
        let mut cfg = Config::new(0x11);
        cfg.paths = 1;
        cfg.mtu = 1024;
        cfg.peer_conn_id = 0x22;
        cfg.pacing_gain = gain;
        let mut c = fresh(cfg, 3);
        c.conn_rtt.update(100_000);
        let before = c.next_send_at;
        c.pace(before, 1000);
        c.next_send_at.nanos_since(before)
    };
    let conn = crate::cc::AimdConfig::for_mss(1024).init_conn_cwnd;
    // 1000 bytes at window / SRTT = 16 KiB per 100 us.
    assert_eq!(interval(1024), 1000 * 100_000 / conn);
    assert_eq!(interval(2048), 1000 * 100_000 / (2 * conn));
    let mut cfg = Config::new(1);
    cfg.pacing_gain = 0;
    assert_eq!(cfg.sanitized().pacing_gain, 1024);
    cfg.pacing_gain = u32::MAX;
    assert_eq!(cfg.sanitized().pacing_gain, crate::conn::MAX_PACING_GAIN);
    assert_eq!(Config::new(1).pacing_gain, crate::conn::DEFAULT_PACING_GAIN);
}

// spec: MR-CC-10, MR-CC-11
#[test]
fn late_runs_keep_the_hinted_rate() {
    let mut cfg = Config::new(0x11);
    cfg.paths = 1;
    cfg.mtu = 1024;
    cfg.peer_conn_id = 0x22;
    let mut c = fresh(cfg, 3);
    // A hint of 1000-byte packets every millisecond, and a sender whose every
    // run comes 600 us after the pacing clock asked for it (software timers).
    c.peer_hint_bps = 1_000_000;
    let start = c.next_send_at;
    let mut now = start;
    let (mut sent, mut burst) = (0u64, 0u64);
    while now.nanos_since(start) < 1_000_000_000 {
        let mut run = 0;
        while now >= c.next_send_at {
            c.pace(now, 1000);
            run += 1;
        }
        sent += run;
        burst = burst.max(run);
        now = c.next_send_at.add_nanos(600_000);
    }
    // With a lag of `pacing_burst` (20 us) alone: 625 packets, one per 1.6 ms.
    assert!(
        (995..=1002).contains(&sent),
        "{sent} packets in 1 s at 1000/s"
    );
    assert!(burst <= 3, "bursts of {burst} packets");
    // An idle sender gets `pacing_burst` of credit, not the packets it did not
    // send (the compliance suite's 6 packets at a 2 Mbit/s hint took 14 ms
    // instead of 20 when it got two).
    let idle = c.next_send_at.add_nanos(1_000_000_000);
    c.pace(idle, 1000);
    assert!(c.next_send_at > idle, "one packet, then the hinted rate");
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

// spec: MR-SACK-21, MR-SACK-17
#[test]
fn spurious_loss_doubles_the_path_reorder_threshold() {
    let (mut n, qp) = Net::with_qp(1);
    n.c[0].post_send(qp, write(1, 8 * 1024, 5)).unwrap();
    let pkts = n.out(0);
    // Packet 0 is only late: the others are acknowledged first and the
    // sender takes it for lost (3 PSNs beyond it are acknowledged).
    n.deliver(1, &pkts[1..]);
    n.now = n.now.add_nanos(n.c[1].cfg.ack_delay_ns);
    n.c[1].handle_timeout(n.now);
    let acks = n.out(1);
    n.deliver(0, &acks);
    assert_eq!(n.c[0].paths[0].stats.lost, 1);
    let retx: Vec<_> = n.out(0).into_iter().filter(|p| is_data(p)).collect();
    assert_eq!(retx.len(), 1);
    // The original arrives, then its copy: a duplicate, reported at once.
    n.deliver(1, &pkts[..1]);
    n.deliver(1, &retx);
    assert_eq!(n.c[1].stats().rx_duplicates, 1);
    let acks = n.out(1);
    assert_eq!(acks.len(), 1);
    n.deliver(0, &acks);
    assert_eq!(n.c[0].paths[0].reorder_threshold, 6);
    n.settle();
    assert_eq!(n.completions(0).len(), 1);
    // The same reordering again, four deep: no longer a loss.
    n.c[0].post_send(qp, write(2, 8 * 1024, 5)).unwrap();
    let pkts = n.out(0);
    n.deliver(1, &pkts[1..6]);
    let acks = n.out(1);
    n.deliver(0, &acks);
    assert_eq!(n.c[0].paths[0].stats.lost, 1, "no new loss");
    n.deliver(1, &pkts[..1]);
    n.deliver(1, &pkts[6..]);
    n.settle();
    assert_eq!(n.completions(0).len(), 1);
    assert_eq!(n.c[0].stats().tx_retransmits, 1);
}

// spec: MR-RTX-12, MR-CC-17
#[test]
fn spurious_timeout_restores_the_window_and_late_packets_are_not_sent_again() {
    let (mut n, qp) = Net::with_qp(1);
    n.c[0].post_send(qp, write(1, 8 * 1024, 5)).unwrap();
    let pkts = n.out(0);
    assert_eq!(pkts.len(), 8);
    let before = n.c[0].cc.path_window(0);
    // Nothing arrives before the path's timer fires: every packet is declared
    // lost and the window collapses.
    n.now = n.c[0].poll_timeout().unwrap();
    n.c[0].handle_timeout(n.now);
    assert_eq!(n.c[0].stats().timeouts, 1);
    assert!(n.c[0].cc.path_window(0) < before);
    let retx: Vec<_> = n.out(0).into_iter().filter(|p| is_data(p)).collect();
    assert!(
        !retx.is_empty() && retx.len() < pkts.len(),
        "the collapsed window"
    );
    // Then the originals arrive, and their ACK shows the timeout was spurious.
    n.deliver(1, &pkts);
    let acks = n.out(1);
    n.deliver(0, &acks);
    assert_eq!(n.c[0].stats().spurious_timeouts, 1);
    assert_eq!(n.c[0].paths[0].stats.spurious_timeouts, 1);
    assert!(n.c[0].cc.path_window(0) >= before, "window restored");
    n.deliver(1, &retx);
    n.settle();
    let resent = retx.len() as u64;
    assert_eq!(
        n.c[0].stats().tx_retransmits,
        resent,
        "late packets are not sent again"
    );
    let c = n.completions(0);
    assert_eq!(
        (c.len(), c[0].wr_id, c[0].status),
        (1, 1, WcStatus::Success)
    );
    assert_eq!(n.c[1].stats().rx_duplicates, resent);
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

// spec: MR-CC-18
#[test]
fn spurious_timeout_told_by_duplicates_restores_the_window() {
    for late in [true, false] {
        let (mut n, qp) = Net::with_qp(1);
        n.c[0].post_send(qp, write(1, 1024, 5)).unwrap();
        let pkts = n.out(0);
        assert_eq!(pkts.len(), 1);
        let before = n.c[0].cc.path_window(0);
        n.now = n.c[0].poll_timeout().unwrap();
        n.c[0].handle_timeout(n.now);
        assert!(n.c[0].cc.path_window(0) < before);
        // Sent again before any ACK: the late ACK names a resolved PSN.
        let retx: Vec<_> = n.out(0).into_iter().filter(|p| is_data(p)).collect();
        assert_eq!(retx.len(), 1);
        if late {
            n.deliver(1, &pkts);
        }
        n.deliver(1, &retx);
        assert_eq!(n.c[1].stats().rx_duplicates, u64::from(late));
        let acks = n.out(1);
        n.deliver(0, &acks);
        assert_eq!(n.c[0].stats().spurious_timeouts, u64::from(late));
        assert_eq!(n.c[0].paths[0].stats.spurious_timeouts, u64::from(late));
        assert_eq!(
            n.c[0].cc.path_window(0) >= before,
            late,
            "restored only if the copy was a duplicate"
        );
        n.settle();
        let c = n.completions(0);
        assert_eq!(
            (c.len(), c[0].wr_id, c[0].status),
            (1, 1, WcStatus::Success)
        );
    }
}

// spec: MR-RTX-12
#[test]
fn late_packet_after_a_sack_loss_is_not_sent_again() {
    let (mut n, qp) = Net::with_qp(1);
    n.c[0].post_send(qp, write(1, 8 * 1024, 5)).unwrap();
    let pkts = n.out(0);
    assert_eq!(pkts.len(), 8);
    // Packet 0 is late: the ACK of the others declares it lost...
    n.deliver(1, &pkts[1..]);
    let acks = n.out(1);
    n.deliver(0, &acks);
    assert_eq!(n.c[0].paths[0].stats.lost, 1);
    assert_eq!(n.c[0].paths[0].inflight.lost, 1);
    // ... and it arrives before the sender polls for its retransmission.
    n.deliver(1, &pkts[..1]);
    n.now = n.now.add_nanos(n.c[1].cfg.ack_delay_ns);
    n.c[1].handle_timeout(n.now);
    let acks = n.out(1);
    n.deliver(0, &acks);
    assert_eq!(n.c[0].paths[0].inflight.lost, 0);
    assert_eq!(
        n.c[0].paths[0].reorder_threshold,
        2 * n.c[0].cfg.reorder_threshold
    );
    n.settle();
    assert_eq!(n.c[0].stats().tx_retransmits, 0);
    assert_eq!(n.c[1].stats().rx_duplicates, 0);
    assert_eq!(n.completions(0).len(), 1);
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

fn read(id: u64, len: u32) -> WorkRequest {
    WorkRequest {
        wr_id: id,
        opcode: Opcode::Read,
        len,
        rkey: 5,
        remote_addr: 0x1000,
        ..Default::default()
    }
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

// spec: MR-CMP-10
#[test]
fn responder_reports_the_refused_request_once() {
    let (mut n, qp) = Net::with_qp(1);
    n.c[0].post_send(qp, write(0, 100, 0xBAD)).unwrap();
    n.c[0].post_send(qp, write(1, 100, 0xBAD)).unwrap();
    n.settle();
    let mut events = Vec::new();
    while let Some(e) = n.c[1].poll_event() {
        events.push(e);
    }
    let peer = QpId(0);
    assert_eq!(
        events,
        [
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

/// A packet in the name of connection `from` to its peer (both ids right), as an
/// attacker who knows them would forge it.
fn forge(n: &Net, from: usize, repr: impl FnOnce(Header) -> PacketRepr) -> Vec<u8> {
    let h = Header {
        src_conn: n.c[from].cfg.local_conn_id,
        dst_conn: n.c[1 - from].cfg.local_conn_id,
        ..Default::default()
    };
    let mut buf = [0u8; MIN_TRANSMIT_BUF];
    let len = repr(h).emit(&mut buf).unwrap();
    buf[..len].to_vec()
}

/// An ACK from `from` with `count` blocks for path 0, each with `cum_psn` and
/// the SACK bits `bits` (relative to `cum_psn`) set.
fn forged_ack(n: &Net, from: usize, count: u8, cum_psn: u32, bits: &[u32]) -> Vec<u8> {
    let mut sack = [0u8; crate::constants::SACK_BYTES];
    for &b in bits {
        sack[b as usize / 8] |= 1 << (b % 8);
    }
    let block = crate::wire::AckBlock {
        path: 0,
        dup_count: 0,
        ce_count: 0,
        cum_psn,
        sack,
    };
    let ack = crate::wire::AckRepr {
        count,
        blocks: [block; crate::constants::MAX_ACK_BLOCKS],
        ..Default::default()
    };
    forge(n, from, |header| PacketRepr::Ack { header, ack })
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
