// SPDX-License-Identifier: GPL-2.0

//! The transport's tracepoints (system `metaroce`).
//!
//! Defined in C ([`include/metaroce/trace.h`](srctree/include/metaroce/trace.h)) and
//! fired through one helper each (`rust/helpers/trace.c`). Every argument is a plain
//! value: the functions are safe. A caller that must compute an argument first asks
//! [`packet_enabled`] or [`run_enabled`] before doing the work.

use crate::bindings;

/// Whether `metaroce_packet_tx` or `metaroce_packet_rx` is enabled.
#[inline]
pub fn packet_enabled() -> bool {
    // SAFETY: Reads the tracepoints' static keys; no argument.
    unsafe { bindings::metaroce_trace_packet_enabled() }
}

/// Whether one of the tracepoints fed by a connection run's counters
/// (`metaroce_rto`, `metaroce_loss`, `metaroce_ecn`, `metaroce_rate_hint`) is enabled.
#[inline]
pub fn run_enabled() -> bool {
    // SAFETY: Reads the tracepoints' static keys; no argument.
    unsafe { bindings::metaroce_trace_run_enabled() }
}

/// Why a received datagram was dropped, as `metaroce_packet_rx` prints it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum RxVerdict {
    /// Taken.
    Ok = 0,
    /// Malformed or unsupported header.
    Malformed = 1,
    /// Addressed to another connection.
    WrongConnection = 2,
    /// The connection is closed.
    Closed = 3,
    /// Path or PSN outside the window.
    OutOfWindow = 4,
    /// Inconsistent with the connection's state.
    Invalid = 5,
    /// No QP for the packet's QPN, or the QP is in error.
    NoQp = 6,
}

/// A MetaRoCE packet header's fields that the packet tracepoints carry.
#[derive(Clone, Copy, Debug, Default)]
pub struct PacketFields {
    /// The local connection id.
    pub conn: u32,
    /// Packet type (the header's type field).
    pub ty: u8,
    /// Path id.
    pub path: u8,
    /// Path sequence number.
    pub psn: u32,
    /// Datagram length in bytes (the UDP payload).
    pub len: u32,
}

/// `metaroce_packet_tx`: a datagram left, `retx` when it is a retransmission.
#[inline]
pub fn packet_tx(p: &PacketFields, retx: bool) {
    // SAFETY: Plain values.
    unsafe { bindings::metaroce_trace_packet_tx(p.conn, p.ty, p.path, p.psn, p.len, retx) }
}

/// `metaroce_packet_rx`: a datagram reached its connection.
#[inline]
pub fn packet_rx(p: &PacketFields, ce: bool, verdict: RxVerdict) {
    // SAFETY: Plain values.
    unsafe {
        bindings::metaroce_trace_packet_rx(p.conn, p.ty, p.path, p.psn, p.len, ce, verdict as u8)
    }
}

/// `metaroce_rto`: `count` retransmission timeouts on `path` in one run, `total` since
/// the connection began.
pub fn rto(conn: u32, path: u8, count: u32, total: u64) {
    // SAFETY: Plain values.
    unsafe { bindings::metaroce_trace_rto(conn, path, count, total) }
}

/// `metaroce_loss`: `count` packets of `path` declared lost by a SACK gap in one run.
pub fn loss(conn: u32, path: u8, count: u32, total: u64) {
    // SAFETY: Plain values.
    unsafe { bindings::metaroce_trace_loss(conn, path, count, total) }
}

/// `metaroce_ecn`: `count` ECN-CE marks echoed for `path` in one run.
pub fn ecn(conn: u32, path: u8, count: u32, total: u64) {
    // SAFETY: Plain values.
    unsafe { bindings::metaroce_trace_ecn(conn, path, count, total) }
}

/// `metaroce_path_retired`: `path` was retired and now sends from `new_port`.
pub fn path_retired(conn: u32, path: u8, new_port: u16, total: u64) {
    // SAFETY: Plain values.
    unsafe { bindings::metaroce_trace_path_retired(conn, path, u32::from(new_port), total) }
}

/// `metaroce_rate_hint`: the peer's rate hint changed (bytes/s, 0 = none).
pub fn rate_hint(conn: u32, old_bps: u64, new_bps: u64) {
    // SAFETY: Plain values.
    unsafe { bindings::metaroce_trace_rate_hint(conn, old_bps, new_bps) }
}

/// `metaroce_qp_error`: QP `qpn` entered the error state with `status` (an
/// `ib_wc_status`).
pub fn qp_error(conn: u32, qpn: u32, status: u32) {
    // SAFETY: Plain values.
    unsafe { bindings::metaroce_trace_qp_error(conn, qpn, status) }
}
