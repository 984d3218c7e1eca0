// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Spurious losses and timeouts undone (`conn/undo.rs`, [MR-CC-18]).

use super::*;

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
