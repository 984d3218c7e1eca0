/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The transport's tracepoints (system "metaroce"): see
 * Documentation/metaroce/driver.rst, "Tracepoints". Each is fired through a
 * helper of rust/helpers/trace.c that the Rust side calls (rust/rdma/trace.rs).
 *
 * conn is the local connection id, as /sys/kernel/debug/metaroce/DEV/conns
 * shows it; path and psn are the MetaRoCE header's.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM metaroce

#if !defined(_METAROCE_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _METAROCE_TRACE_H

#include <linux/tracepoint.h>

/* MetaRoCE packet types (Documentation/metaroce/spec.rst, "Packet types"). */
#define metaroce_show_type(t)						\
	__print_symbolic(t, { 0x01, "SEND" }, { 0x02, "SEND_IMM" },	\
			 { 0x03, "WRITE" }, { 0x04, "WRITE_IMM" },	\
			 { 0x05, "READ_REQ" }, { 0x06, "READ_RESP" },	\
			 { 0x07, "CMP_SWAP" }, { 0x08, "FETCH_ADD" },	\
			 { 0x09, "ATOMIC_RESP" }, { 0x10, "ACK" },	\
			 { 0x11, "NAK" }, { 0x12, "CONTROL" })

/* Why a received datagram was dropped (0: it was taken). */
#define metaroce_show_drop(d)						\
	__print_symbolic(d, { 0, "ok" }, { 1, "malformed" },		\
			 { 2, "wrong_connection" }, { 3, "closed" },	\
			 { 4, "out_of_window" }, { 5, "invalid" },	\
			 { 6, "no_qp" })

/* A datagram of a connection left; retx is 1 for a retransmission. */
TRACE_EVENT(metaroce_packet_tx,
	TP_PROTO(u32 conn, u8 type, u8 path, u32 psn, u32 len, bool retx),
	TP_ARGS(conn, type, path, psn, len, retx),
	TP_STRUCT__entry(
		__field(u32, conn)
		__field(u8, type)
		__field(u8, path)
		__field(bool, retx)
		__field(u32, psn)
		__field(u32, len)
	),
	TP_fast_assign(
		__entry->conn = conn;
		__entry->type = type;
		__entry->path = path;
		__entry->retx = retx;
		__entry->psn = psn;
		__entry->len = len;
	),
	TP_printk("conn=%08x %s path=%u psn=%u len=%u retx=%u",
		  __entry->conn, metaroce_show_type(__entry->type), __entry->path,
		  __entry->psn, __entry->len, __entry->retx)
);

/* A datagram reached its connection: taken, or dropped and why. */
TRACE_EVENT(metaroce_packet_rx,
	TP_PROTO(u32 conn, u8 type, u8 path, u32 psn, u32 len, bool ce, u8 drop),
	TP_ARGS(conn, type, path, psn, len, ce, drop),
	TP_STRUCT__entry(
		__field(u32, conn)
		__field(u8, type)
		__field(u8, path)
		__field(bool, ce)
		__field(u8, drop)
		__field(u32, psn)
		__field(u32, len)
	),
	TP_fast_assign(
		__entry->conn = conn;
		__entry->type = type;
		__entry->path = path;
		__entry->ce = ce;
		__entry->drop = drop;
		__entry->psn = psn;
		__entry->len = len;
	),
	TP_printk("conn=%08x %s path=%u psn=%u len=%u ce=%u %s",
		  __entry->conn, metaroce_show_type(__entry->type), __entry->path,
		  __entry->psn, __entry->len, __entry->ce,
		  metaroce_show_drop(__entry->drop))
);

DECLARE_EVENT_CLASS(metaroce_path_count,
	TP_PROTO(u32 conn, u8 path, u32 count, u64 total),
	TP_ARGS(conn, path, count, total),
	TP_STRUCT__entry(
		__field(u32, conn)
		__field(u8, path)
		__field(u32, count)
		__field(u64, total)
	),
	TP_fast_assign(
		__entry->conn = conn;
		__entry->path = path;
		__entry->count = count;
		__entry->total = total;
	),
	TP_printk("conn=%08x path=%u count=%u total=%llu",
		  __entry->conn, __entry->path, __entry->count, __entry->total)
);

/* Retransmission timeouts of a path in one run of its connection. */
DEFINE_EVENT(metaroce_path_count, metaroce_rto,
	TP_PROTO(u32 conn, u8 path, u32 count, u64 total),
	TP_ARGS(conn, path, count, total));

/* Packets of a path declared lost by a SACK gap in one run. */
DEFINE_EVENT(metaroce_path_count, metaroce_loss,
	TP_PROTO(u32 conn, u8 path, u32 count, u64 total),
	TP_ARGS(conn, path, count, total));

/* ECN-CE marks the receiver echoed for a path in one run. */
DEFINE_EVENT(metaroce_path_count, metaroce_ecn,
	TP_PROTO(u32 conn, u8 path, u32 count, u64 total),
	TP_ARGS(conn, path, count, total));

/* A path was retired after repeated timeouts; count is its new UDP source port. */
DEFINE_EVENT(metaroce_path_count, metaroce_path_retired,
	TP_PROTO(u32 conn, u8 path, u32 count, u64 total),
	TP_ARGS(conn, path, count, total));

/* The peer's fair-share rate hint for this connection changed (bytes/s, 0 = none). */
TRACE_EVENT(metaroce_rate_hint,
	TP_PROTO(u32 conn, u64 old_bps, u64 new_bps),
	TP_ARGS(conn, old_bps, new_bps),
	TP_STRUCT__entry(
		__field(u32, conn)
		__field(u64, old_bps)
		__field(u64, new_bps)
	),
	TP_fast_assign(
		__entry->conn = conn;
		__entry->old_bps = old_bps;
		__entry->new_bps = new_bps;
	),
	TP_printk("conn=%08x %llu -> %llu B/s",
		  __entry->conn, __entry->old_bps, __entry->new_bps)
);

/* A QP entered the error state; status is the ib_wc_status that caused it. */
TRACE_EVENT(metaroce_qp_error,
	TP_PROTO(u32 conn, u32 qpn, u32 status),
	TP_ARGS(conn, qpn, status),
	TP_STRUCT__entry(
		__field(u32, conn)
		__field(u32, qpn)
		__field(u32, status)
	),
	TP_fast_assign(
		__entry->conn = conn;
		__entry->qpn = qpn;
		__entry->status = status;
	),
	TP_printk("conn=%08x qpn=%u status=%u", __entry->conn, __entry->qpn,
		  __entry->status)
);

#endif /* _METAROCE_TRACE_H */

/* Out of the kernel tree: the header is found through -I$(src)/include. */
#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH metaroce
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE trace
#include <trace/define_trace.h>
