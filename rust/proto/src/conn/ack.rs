// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! ACK and NAK processing at the sender, and ACK emission at the receiver.
//!
//= Documentation/metaroce/spec.rst#loss-detection

use super::qp::QpState;
use super::rx::RxDrop;
use super::store::{QpStore, QpStoreExt};
use super::Connection;
use crate::cc::{CongestionControl, Signal};
use crate::constants::{
    ACK_DELAY_UNIT_NS, MAX_ACK_BLOCKS, MAX_PATHS, MAX_REORDER_THRESHOLD, RATE_HINT_UNIT_BPS,
    RNR_TIMER_UNIT_NS, SACK_BYTES,
};
use crate::event::{Event, WcStatus};
use crate::path::inflight::Sent;
use crate::psn::seq_diff;
use crate::timer::Instant;
use crate::wire::{AckBlock, AckHeader, Header, Nak, NakCode, Packet, PacketType};

impl<C: CongestionControl, S: QpStore> Connection<C, S> {
    pub(crate) fn on_ack(&mut self, now: Instant, pkt: &Packet<'_>) -> Result<(), RxDrop> {
        let a = pkt.ack().map_err(RxDrop::Malformed)?;
        // Every block before any takes effect: an ACK that reports a PSN this
        // side never sent is forged or corrupt, and is dropped whole.
        //= Documentation/metaroce/spec.rst#loss-detection
        for i in 0..usize::from(a.count) {
            let b = pkt.ack_block(i).map_err(RxDrop::Malformed)?;
            if !self.ack_block_sent(&b) {
                return Err(RxDrop::OutOfWindow);
            }
        }
        self.peer_hint_bps = u64::from(a.rate_hint).saturating_mul(RATE_HINT_UNIT_BPS);
        let delay = u64::from(a.ack_delay).saturating_mul(ACK_DELAY_UNIT_NS);
        for i in 0..usize::from(a.count) {
            let b = pkt.ack_block(i).map_err(RxDrop::Malformed)?;
            if usize::from(b.path) < usize::from(self.cfg.paths) {
                self.on_ack_block(now, &b, delay);
            }
        }
        self.check_path_health(now);
        Ok(())
    }

    /// Whether block `b` can be a receiver's report of what was sent on its
    /// path: its cumulative PSN is not beyond the path's next PSN. SACK bits at
    /// or beyond it are ignored ([`on_ack_block`](Self::on_ack_block) visits
    /// only PSNs in flight): a receiver holds them when a forger put data
    /// packets ahead of this side's PSNs, and rejecting its every ACK for them
    /// would stall this side ([MR-SACK-22]). Blocks of paths not configured are
    /// ignored ([`on_ack`](Self::on_ack)), so they pass.
    fn ack_block_sent(&self, b: &AckBlock) -> bool {
        let pi = usize::from(b.path);
        let Some(p) = self
            .paths
            .get(pi)
            .filter(|_| pi < usize::from(self.cfg.paths))
        else {
            return true;
        };
        let (_, next) = p.inflight.range();
        seq_diff(next, b.cum_psn) >= 0
    }

    fn on_ack_block(&mut self, now: Instant, b: &AckBlock, ack_delay: u64) {
        let pi = usize::from(b.path);
        let (una, next) = match self.paths.get(pi) {
            Some(p) => p.inflight.range(),
            None => return,
        };
        // Newly acknowledged packets, and the largest acknowledged PSN. Only
        // PSNs in flight below the cumulative point and set bits are visited
        // ([`ack_block_sent`](Self::ack_block_sent) checked that the
        // cumulative PSN is not beyond `next`; set bits there are skipped).
        let mut largest: Option<u32> = None;
        let mut newest: Option<Sent> = None;
        let mut acked_bytes = 0u32;
        let mut psn = una;
        let mut late = false;
        while psn != next && seq_diff(psn, b.cum_psn) < 0 {
            late |= self.ack_one(pi, psn, &mut newest, &mut acked_bytes);
            psn = psn.wrapping_add(1);
        }
        if seq_diff(b.cum_psn, una) > 0 {
            largest = Some(b.cum_psn.wrapping_sub(1));
        }
        for (k, byte) in (0u32..SACK_BYTES as u32).zip(b.sack.iter()) {
            let mut bits = *byte;
            while bits != 0 {
                let i = bits.trailing_zeros();
                bits &= bits.wrapping_sub(1);
                let psn = b.cum_psn.wrapping_add(k.wrapping_mul(8).wrapping_add(i));
                if seq_diff(psn, una) >= 0 && seq_diff(psn, next) < 0 {
                    largest = Some(psn);
                    late |= self.ack_one(pi, psn, &mut newest, &mut acked_bytes);
                }
            }
        }
        let Some(p) = self.paths.get_mut(pi) else {
            return;
        };
        if let Some(s) = newest {
            let raw = now.nanos_since(s.sent_at);
            let sample = if raw > ack_delay {
                raw - ack_delay
            } else {
                raw
            };
            p.rtt.update(sample);
            self.conn_rtt.update(sample);
            p.stats.acked = p.stats.acked.saturating_add(1);
            p.consecutive_rto = 0;
            p.silent_probes = 0;
            p.backoff = 0;
            self.consecutive_rto = 0;
            let srtt = p.rtt.srtt_or(self.cfg.rto_initial_ns);
            self.cc.on_ack(pi, acked_bytes, srtt, now);
        }
        let Some(p) = self.paths.get_mut(pi) else {
            return;
        };
        // The peer's cumulative PSN, forward only (ACKs may be reordered);
        // never beyond what was sent.
        if seq_diff(b.cum_psn, p.peer_cum) > 0 && seq_diff(b.cum_psn, next) <= 0 {
            p.peer_cum = b.cum_psn;
            // The last floor was answered: the next may go at once.
            if seq_diff(p.peer_cum, p.floor_value) >= 0 {
                p.floor_sent_at = None;
            }
        }
        // ECN echo: count new CE marks (tolerating reordered ACKs).
        let ce = b.ce_count.wrapping_sub(p.ce_echo) as i16;
        let srtt = p.rtt.srtt_or(self.cfg.rto_initial_ns);
        if ce > 0 {
            p.ce_echo = b.ce_count;
            p.stats.ecn_marks = p.stats.ecn_marks.saturating_add(ce as u64);
            self.cc.on_congestion(pi, Signal::Ecn(ce as u16), srtt, now);
        }
        // Duplicates at the receiver: packets this side declared lost were only
        // late. Tolerate twice the reordering on this path from now on.
        //= Documentation/metaroce/spec.rst#sack-loss
        // A packet declared lost that arrives before its data is sent again tells
        // the same, without the duplicate.
        let dups = b.dup_count.wrapping_sub(p.dup_echo) as i8;
        if dups > 0 {
            p.dup_echo = b.dup_count;
        }
        let thresh = p.reorder_threshold;
        if dups > 0 || late {
            p.reorder_threshold = thresh
                .saturating_mul(2)
                .min(MAX_REORDER_THRESHOLD)
                .max(thresh);
        }
        if dups > 0 {
            self.undo_spurious_timeouts(dups as u32, now);
        }
        // A path is FIFO: an unacknowledged packet far enough below the largest
        // acknowledged one is lost, not late. Only PSNs in flight are visited,
        // whatever the block says.
        //= Documentation/metaroce/spec.rst#sack-loss
        if let Some(largest) = largest {
            let mut lost_bytes = 0u32;
            let mut psn = una;
            self.loss_detections = self.loss_detections.wrapping_add(1);
            while psn != next && seq_diff(largest, psn) >= thresh as i32 {
                lost_bytes = lost_bytes.saturating_add(self.declare_lost(pi, psn, now));
                psn = psn.wrapping_add(1);
            }
            if lost_bytes > 0 {
                self.cc
                    .on_congestion(pi, Signal::Loss(lost_bytes), srtt, now);
            }
        }
        // Every packet the last timeout declared lost is resolved.
        if let Some(p) = self.paths.get_mut(pi) {
            if p.timeout_end
                .is_some_and(|end| seq_diff(p.inflight.una(), end) >= 0)
            {
                p.timeout_end = None;
            }
        }
        self.rearm_rto(pi, now, newest.is_some());
    }

    /// Acknowledges `psn` on path `pi`. Returns whether it had been declared lost
    /// by a SACK gap: it was late, not lost, and the path reorders more than its
    /// threshold allows.
    fn ack_one(
        &mut self,
        pi: usize,
        psn: u32,
        newest: &mut Option<Sent>,
        acked_bytes: &mut u32,
    ) -> bool {
        let Some(p) = self.paths.get_mut(pi) else {
            return false;
        };
        if let Some(s) = p.inflight.ack(psn) {
            *acked_bytes = acked_bytes.saturating_add(u32::from(s.bytes));
            *newest = Some(s);
            self.on_chunk_acked(&s);
            return false;
        }
        // Declared lost, but its data not yet handed on: it was late, and its data
        // is not sent again.
        //= Documentation/metaroce/spec.rst#late-packets
        let Some(s) = p.inflight.release_lost(psn) else {
            return false;
        };
        // An RTT sample all the same: every transmission has its own PSN, so
        // it is not ambiguous (RFC 6298's Karn rule is TCP's, whose segments
        // share sequence numbers), and it is the one that says the RTO is too
        // short for the queue the packets wait in.
        //= Documentation/metaroce/spec.rst#rto
        *newest = Some(s);
        // The peer and the path are alive: timeouts since were not a dead peer's
        // ([MR-RTX-14]).
        p.consecutive_rto = 0;
        p.silent_probes = 0;
        self.consecutive_rto = 0;
        let by_timeout = p.lost_by_timeout(psn);
        if by_timeout {
            p.timeout_end = None;
            p.stats.spurious_timeouts = p.stats.spurious_timeouts.saturating_add(1);
            self.stats.spurious_timeouts = self.stats.spurious_timeouts.saturating_add(1);
            self.cc.on_spurious_timeout(pi);
            self.undo.forget(pi);
        }
        self.on_chunk_acked(&s);
        !by_timeout
    }

    /// The receiver reported `dups` more duplicates: if those were every
    /// retransmission of a run of timeouts, the timeouts were spurious.
    //= Documentation/metaroce/spec.rst#late-packets
    fn undo_spurious_timeouts(&mut self, dups: u32, now: Instant) {
        let Some(timeouts) = self.undo.on_duplicates(dups, now) else {
            return;
        };
        // `(0..MAX_PATHS).zip`, not `enumerate`: its counter's overflow check is a panic
        // path in the kernel build (kcheck/no-panic.sh).
        for (pi, &n) in (0..MAX_PATHS).zip(timeouts.iter()).filter(|(_, &n)| n > 0) {
            let Some(p) = self.paths.get_mut(pi) else {
                continue;
            };
            p.timeout_end = None;
            p.stats.spurious_timeouts = p.stats.spurious_timeouts.saturating_add(u64::from(n));
            self.stats.spurious_timeouts =
                self.stats.spurious_timeouts.saturating_add(u64::from(n));
            self.cc.on_spurious_timeout(pi);
        }
    }

    /// Declares `psn` of path `pi` lost as a SACK gap or a probe timeout does
    /// ([MR-SACK-17], [MR-RTX-15]): its request goes back to its QP to be sent again
    /// under the current loss detection. Returns its bytes (0: it was not in flight).
    pub(crate) fn declare_lost(&mut self, pi: usize, psn: u32, now: Instant) -> u32 {
        let Some(p) = self.paths.get_mut(pi) else {
            return 0;
        };
        let Some(s) = p.inflight.mark_lost(psn) else {
            return 0;
        };
        p.stats.lost = p.stats.lost.saturating_add(1);
        self.qps
            .request_lost(&s, self.loss_detections, now, &self.cfg);
        u32::from(s.bytes)
    }

    /// Re-arms (on progress) or cancels a path's retransmission timer, and its
    /// probe timer with it ([MR-RTX-15]).
    pub(crate) fn rearm_rto(&mut self, pi: usize, now: Instant, progress: bool) {
        let max = self.cfg.rto_max_ns;
        let rto = self.base_rto(pi);
        let (probe, hold) = (self.cfg.tail_probe, self.cfg.ack_hold_ns());
        let conn_rtt = &self.conn_rtt;
        let Some(p) = self.paths.get_mut(pi) else {
            return;
        };
        if p.inflight.in_flight == 0 {
            p.rto_deadline = None;
            p.probe_deadline = None;
        } else if progress || p.rto_deadline.is_none() {
            let backed = rto.checked_shl(p.backoff).unwrap_or(max).min(max);
            p.rto_deadline = Some(now.add_nanos(backed));
            // Only on a path with RTT samples and before its timeout.
            p.probe_deadline = probe
                .then(|| p.probe_timeout(hold, conn_rtt))
                .flatten()
                .filter(|&pto| pto < backed)
                .map(|pto| now.add_nanos(pto));
        }
    }

    /// The data of an acknowledged packet reached the peer.
    fn on_chunk_acked(&mut self, s: &Sent) {
        let Some(q) = self.qps.qp_mut(usize::from(s.chunk.qp)) else {
            return;
        };
        if q.state != QpState::Active {
            return;
        }
        if s.chunk.resp {
            q.resp_acked.insert(s.chunk.ssn);
            q.reclaim_responses();
            self.deliver.add(usize::from(s.chunk.qp));
        } else {
            q.req_acked.insert(s.chunk.ssn);
            q.lost_in_a_row = 0;
        }
    }

    /// The peer refused one of our packets.
    //= Documentation/metaroce/spec.rst#nak-handling
    pub(crate) fn on_nak(&mut self, now: Instant, nak: &Nak) {
        let pi = usize::from(nak.path);
        if pi >= usize::from(self.cfg.paths) {
            return;
        }
        // Only unresolved packets: a duplicated or late NAK for a packet that
        // was acknowledged or whose data was already handed on does nothing.
        let Some(s) = self
            .paths
            .get(pi)
            .and_then(|p| p.inflight.get_unresolved(nak.psn))
            .copied()
        else {
            return;
        };
        if s.chunk.resp || s.chunk.ssn != nak.ssn || s.chunk.msn != nak.msn {
            return;
        }
        if let Some(p) = self.paths.get_mut(pi) {
            p.inflight.mark_lost(nak.psn);
        }
        self.rearm_rto(pi, now, false);
        let qi = usize::from(s.chunk.qp);
        let Some(q) = self.qps.qp_mut(qi) else { return };
        let rnr_retry = q.rnr_retry;
        let Some(w) = q.sq_slot_mut(s.chunk.msn) else {
            return;
        };
        let err = match nak.code {
            NakCode::Rnr => {
                // One RNR episode per work request and wake-up: NAKs for
                // packets sent before the episode began (the other segments
                // of the same burst) do not count again.
                //= Documentation/metaroce/spec.rst#rnr
                let same_episode = w.rnr_since.is_some_and(|t| s.sent_at < t);
                if !same_episode {
                    w.rnr_count = w.rnr_count.saturating_add(1);
                    w.rnr_since = Some(now);
                }
                if rnr_retry != 7 && w.rnr_count > rnr_retry {
                    Some(WcStatus::RnrRetryExcErr)
                } else {
                    let delay = u64::from(nak.rnr_timer.max(1)).saturating_mul(RNR_TIMER_UNIT_NS);
                    let until = now.add_nanos(delay);
                    if w.rnr_until.is_none_or(|t| t < until) {
                        w.rnr_until = Some(until);
                    }
                    self.rnr_wakeup = crate::timer::earliest(self.rnr_wakeup, Some(until));
                    None
                }
            }
            NakCode::AccessError => Some(WcStatus::RemAccessErr),
            NakCode::InvalidRequest => Some(WcStatus::RemInvReqErr),
            NakCode::RemoteOpError => Some(WcStatus::RemOpErr),
        };
        if let Some(e) = err {
            w.status.get_or_insert(e);
            q.fail(e);
        }
    }

    /// The earliest RNR hold that has not expired at `now`, over every
    /// outstanding work request (the RNR timer to arm next).
    pub(crate) fn next_rnr_wakeup(&self, now: Instant) -> Option<Instant> {
        let mut t = None;
        for i in 0..self.qps.len() {
            let Some(q) = self
                .qps
                .qp(i)
                .filter(|q| q.state == QpState::Active && q.error.is_none())
            else {
                continue;
            };
            let mut msn = q.sq_head;
            while msn != q.next_msn {
                if let Some(u) = q
                    .sq_slot(msn)
                    .and_then(|w| w.rnr_until)
                    .filter(|u| *u > now)
                {
                    t = crate::timer::earliest(t, Some(u));
                }
                msn = msn.wrapping_add(1);
            }
        }
        t
    }

    /// Writes an ACK covering every path with news into `buf`.
    pub(crate) fn emit_ack(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        let mut count = 0usize;
        let npaths = MAX_PATHS;
        for (i, rp) in (0..npaths).zip(self.rx_paths.iter_mut()) {
            if rp.report == 0 || count >= MAX_ACK_BLOCKS {
                continue;
            }
            let mut sack = [0u8; SACK_BYTES];
            for (k, w) in (0..SACK_BYTES / 8).zip(rp.window.words().iter()) {
                if let Some(d) = sack.get_mut(k.wrapping_mul(8)..k.wrapping_mul(8).wrapping_add(8))
                {
                    d.copy_from_slice(&w.to_le_bytes());
                }
            }
            let b = AckBlock {
                path: i as u8,
                dup_count: rp.dup_count,
                ce_count: rp.ce_count,
                cum_psn: rp.window.base(),
                sack,
            };
            b.emit(buf, count).ok()?;
            rp.report = rp.report.saturating_sub(1);
            count = count.wrapping_add(1);
        }
        let delay = self.last_recorded.map_or(0, |t| now.nanos_since(t)) / ACK_DELAY_UNIT_NS;
        let hint = self.local_hint_bps.div_ceil(RATE_HINT_UNIT_BPS);
        AckHeader {
            rate_hint: u32::try_from(hint).unwrap_or(u32::MAX),
            ack_delay: u16::try_from(delay).unwrap_or(u16::MAX),
            count: count as u8,
        }
        .emit(buf)
        .ok()?;
        let h = Header {
            ty: PacketType::Ack as u8,
            ..self.unsequenced_header()
        };
        h.emit(buf).ok()?;
        self.ack_pending = 0;
        self.ack_now = false;
        self.ack_deadline = None;
        self.last_recorded = None;
        self.stats.tx_acks = self.stats.tx_acks.saturating_add(1);
        Some(AckHeader::total_len(count as u8))
    }

    /// Reports QPs that entered the error state.
    pub(crate) fn report_qp_errors(&mut self) {
        for i in 0..self.qps.len() {
            let Some(q) = self.qps.qp_mut(i) else {
                continue;
            };
            let qp = super::QpId(i as u16);
            let responder = q.responder_error.take();
            let failed = match (q.error, q.error_reported) {
                (Some(status), false) => {
                    q.error_reported = true;
                    Some(status)
                }
                _ => None,
            };
            // The QP is in the error state when the application learns why.
            if let Some(status) = failed {
                self.push_event(Event::QpError { qp, status });
            }
            if let Some(error) = responder {
                self.push_event(Event::ResponderError { qp, error });
            }
        }
    }
}
