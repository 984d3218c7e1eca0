// SPDX-License-Identifier: GPL-2.0

//! What a connection shows of itself: the `conns` and `paths` debugfs files, the
//! attributes of its QPs in `rdma -dd resource show qp`, and its counters.

use super::ConnCtx;
use crate::bound::Bound;
use core::fmt;
use kernel::{prelude::*, sync::atomic::Relaxed};
use metaroce_proto::{Instant as CoreInstant, QpId, Stats};
use rdma::restrack::ResourceAttrs;

impl ConnCtx {
    /// The connection's state for the device's `conns` debugfs file: the execution
    /// context's (stream, timer, inbox), the core's and each bound QP's.
    pub(crate) fn write_state(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inbox = {
            let inbox = self.inbox.lock();
            (inbox.len(), inbox.capacity())
        };
        let st = self.state.lock();
        let now = self.now();
        let ns = |t: Option<CoreInstant>| t.map(|t| t.as_nanos() as i64 - now.as_nanos() as i64);
        writeln!(
            f,
            "conn {:#010x} to {} (peer {:#010x}): runs {}, in_stream={} app_cpu={}, inbox {} \
             (room {}+{}), timer {} at {:?} ns from now, next deadline {:?} ns, dead={} closed={} \
             lingering={} probe={:?}",
            self.local_id,
            self.peer,
            st.conn.peer_conn_id(),
            self.counters.runs.load(Relaxed),
            self.in_stream.load(Relaxed),
            self.app_cpu.load(Relaxed) as i32,
            inbox.0,
            inbox.1,
            st.rx.capacity(),
            if st.timer.is_some() { "armed" } else { "idle" },
            ns(st.armed),
            ns(st.conn.poll_timeout()),
            st.dead,
            self.is_closed(),
            self.is_lingering(),
            st.probe.map(|p| p.sent),
        )?;
        writeln!(
            f,
            "  core: in flight {} B, {}",
            st.conn.bytes_in_flight(),
            st.conn.debug_state()
        )?;
        for b in st.qps.iter().flatten() {
            b.write_state(f)?;
            writeln!(f)?;
        }
        Ok(())
    }

    /// The connection's lines of the `paths` debugfs file: its rate hints, then each
    /// path as the sender sees it (Documentation/metaroce/driver.rst, "Paths").
    pub(crate) fn write_paths(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.state.lock();
        let c = &st.conn;
        writeln!(
            f,
            "conn {:#010x} peer {} hint_out {} hint_in {}",
            self.local_id,
            self.peer,
            c.rate_hint(),
            c.peer_rate_hint()
        )?;
        for i in 0..usize::from(c.config().paths) {
            let Some(p) = c.path_view(i) else {
                break;
            };
            let s = &p.stats;
            writeln!(
                f,
                "conn {:#010x} peer {} path {} sport {} state {} cwnd {} srtt_us {} inflight {} \
                 sent {} retx {} lost {} timeouts {} ecn {} retired {}",
                self.local_id,
                self.peer,
                i,
                p.sport,
                p.state.name(),
                p.window,
                p.srtt_ns / 1000,
                p.bytes_in_flight,
                s.sent,
                s.retransmitted,
                s.lost,
                s.timeouts,
                s.ecn_marks,
                s.retired
            )?;
        }
        Ok(())
    }

    /// The attributes of the QP bound as `id` in `rdma -dd resource show qp`: its
    /// connection and stream, its work requests, and the connection's counters.
    pub(crate) fn write_resource(&self, id: QpId, attrs: &mut ResourceAttrs<'_>) -> Result {
        let (peer, rings, stats) = {
            let st = self.state.lock();
            let rings = st
                .qps
                .get(id.index())
                .and_then(Option::as_ref)
                .map(Bound::ring_counts);
            (st.conn.peer_conn_id(), rings, *st.conn.stats())
        };
        let Some([sq_posted, sq_done, rq_posted, rq_done]) = rings else {
            return Ok(());
        };
        attrs.u32_hex(c"conn", self.local_id)?;
        attrs.u32_hex(c"peer_conn", peer)?;
        attrs.u32(c"stream", id.index() as u32)?;
        attrs.u64(c"sq_taken", sq_posted)?;
        attrs.u64(c"sq_done", sq_done)?;
        attrs.u64(c"rq_taken", rq_posted)?;
        attrs.u64(c"rq_done", rq_done)?;
        attrs.u64(c"conn_tx_data", stats.tx_data)?;
        attrs.u64(c"conn_tx_retransmits", stats.tx_retransmits)?;
        attrs.u64(c"conn_timeouts", stats.timeouts)?;
        attrs.u64(c"conn_rx_dropped", stats.rx_dropped)
    }

    /// The protocol core's counters and the datagrams the inbox dropped.
    pub(crate) fn stats(&self) -> (Stats, u64, u64) {
        let st = self.state.lock();
        let c = &self.counters;
        (
            *st.conn.stats(),
            c.inbox_drops.load(Relaxed),
            c.runs.load(Relaxed),
        )
    }
}
