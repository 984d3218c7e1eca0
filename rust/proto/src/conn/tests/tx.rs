// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The transmit path (`conn/tx.rs`): segments, path bursts, pacing and ACK requests.

use super::*;

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

// spec: MR-CC-11
#[test]
fn a_fast_sender_held_to_a_lower_hint_gets_no_credit_for_its_idle_time() {
    let mut cfg = Config::new(0x11);
    cfg.paths = 1;
    cfg.mtu = 1024;
    cfg.peer_conn_id = 0x22;
    let mut c = fresh(cfg, 3);
    // 1000-byte packets every microsecond, then a hint of one per millisecond
    // that arrives while the sender is idle for 1.5 ms: less than two packets'
    // time at the new rate, many at the old.
    c.peer_hint_bps = 1_000_000_000;
    let mut now = c.next_send_at;
    for _ in 0..10 {
        c.pace(now, 1000);
        now = c.next_send_at;
    }
    c.peer_hint_bps = 1_000_000;
    let resumed = now.add_nanos(1_500_000);
    c.pace(resumed, 1000);
    assert!(
        c.next_send_at.nanos_since(resumed) >= 1_000_000 - cfg.pacing_burst_ns,
        "the second packet waits for the hinted rate: {} ns",
        c.next_send_at.nanos_since(resumed)
    );
}
