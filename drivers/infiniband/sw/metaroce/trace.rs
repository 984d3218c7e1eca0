// SPDX-License-Identifier: GPL-2.0

//! What the connection's runs report to the `metaroce` tracepoints
//! ([`rdma::trace`]; Documentation/metaroce/driver.rst, "Tracepoints").
//!
//! Packets are traced as they leave and arrive, their header parsed only while a
//! packet tracepoint is enabled. Timeouts, SACK losses, ECN echoes and the peer's
//! rate hint live inside the protocol core: a run snapshots the core's counters
//! before it feeds the core and reports what changed after, and only while one of
//! those tracepoints is enabled.

use crate::transport::Conn;
use metaroce_proto::{constants::MAX_PATHS, path::PathStats, wire::Header, RxDrop};
use rdma::trace::{self, PacketFields, RxVerdict};

/// The fields of the packet tracepoints from a datagram of connection `conn`, or
/// `None` when no packet tracepoint is enabled (or the header does not parse).
#[inline]
pub(crate) fn packet(conn: u32, datagram: &[u8], len: usize) -> Option<PacketFields> {
    if !trace::packet_enabled() {
        return None;
    }
    let h = Header::parse(datagram).ok()?;
    Some(PacketFields {
        conn,
        ty: h.ty,
        path: h.path,
        psn: h.psn,
        len: u32::try_from(len).unwrap_or(u32::MAX),
    })
}

/// How `metaroce_packet_rx` shows the core's verdict on a datagram.
pub(crate) fn verdict(r: &Result<(), RxDrop>) -> RxVerdict {
    match r {
        Ok(()) => RxVerdict::Ok,
        Err(RxDrop::Malformed(_)) => RxVerdict::Malformed,
        Err(RxDrop::WrongConnection) => RxVerdict::WrongConnection,
        Err(RxDrop::Closed) => RxVerdict::Closed,
        Err(RxDrop::OutOfWindow) => RxVerdict::OutOfWindow,
        Err(RxDrop::Invalid) => RxVerdict::Invalid,
        Err(RxDrop::NoQp) => RxVerdict::NoQp,
    }
}

/// The core's counters whose changes over a run the run tracepoints report: per
/// path, timeouts, SACK losses and ECN echoes, and the peer's rate hint.
pub(crate) struct RunSnapshot {
    paths: [[u64; 3]; MAX_PATHS],
    rate_hint: u64,
}

impl RunSnapshot {
    fn counters(p: &PathStats) -> [u64; 3] {
        [p.timeouts, p.lost, p.ecn_marks]
    }

    /// Takes the snapshot when a run tracepoint is enabled.
    #[inline]
    pub(crate) fn take(conn: &Conn) -> Option<Self> {
        if !trace::run_enabled() {
            return None;
        }
        let mut paths = [[0; 3]; MAX_PATHS];
        for (i, p) in paths.iter_mut().enumerate() {
            *p = Self::counters(&conn.path_stats(i).unwrap_or_default());
        }
        Some(Self {
            paths,
            rate_hint: conn.peer_rate_hint(),
        })
    }

    /// Reports what changed since the snapshot.
    pub(crate) fn report(&self, conn: &Conn) {
        let id = conn.config().local_conn_id;
        let fire: [fn(u32, u8, u32, u64); 3] = [trace::rto, trace::loss, trace::ecn];
        for (i, before) in self.paths.iter().enumerate() {
            let now = Self::counters(&conn.path_stats(i).unwrap_or_default());
            for ((f, was), is) in fire.iter().zip(before).zip(now) {
                if is != *was {
                    let n = u32::try_from(is.wrapping_sub(*was)).unwrap_or(u32::MAX);
                    f(id, i as u8, n, is);
                }
            }
        }
        let hint = conn.peer_rate_hint();
        if hint != self.rate_hint {
            trace::rate_hint(id, self.rate_hint, hint);
        }
    }
}
