// SPDX-License-Identifier: GPL-2.0
/*
 * The transport's tracepoints (include/metaroce/trace.h): defined here, and fired
 * through one helper each for rust/rdma/trace.rs. A disabled tracepoint costs the
 * call and its static branch.
 */
#define CREATE_TRACE_POINTS
#include <metaroce/trace.h>

#include "../../include/metaroce/trace_helpers.h"

bool metaroce_trace_packet_enabled(void)
{
	return trace_metaroce_packet_tx_enabled() || trace_metaroce_packet_rx_enabled();
}

bool metaroce_trace_run_enabled(void)
{
	return trace_metaroce_rto_enabled() || trace_metaroce_loss_enabled() ||
	       trace_metaroce_ecn_enabled() || trace_metaroce_rate_hint_enabled();
}

void metaroce_trace_packet_tx(u32 conn, u8 type, u8 path, u32 psn, u32 len, bool retx)
{
	trace_metaroce_packet_tx(conn, type, path, psn, len, retx);
}

void metaroce_trace_packet_rx(u32 conn, u8 type, u8 path, u32 psn, u32 len, bool ce, u8 drop)
{
	trace_metaroce_packet_rx(conn, type, path, psn, len, ce, drop);
}

void metaroce_trace_rto(u32 conn, u8 path, u32 count, u64 total)
{
	trace_metaroce_rto(conn, path, count, total);
}

void metaroce_trace_loss(u32 conn, u8 path, u32 count, u64 total)
{
	trace_metaroce_loss(conn, path, count, total);
}

void metaroce_trace_ecn(u32 conn, u8 path, u32 count, u64 total)
{
	trace_metaroce_ecn(conn, path, count, total);
}

void metaroce_trace_path_retired(u32 conn, u8 path, u32 new_port, u64 total)
{
	trace_metaroce_path_retired(conn, path, new_port, total);
}

void metaroce_trace_rate_hint(u32 conn, u64 old_bps, u64 new_bps)
{
	trace_metaroce_rate_hint(conn, old_bps, new_bps);
}

void metaroce_trace_qp_error(u32 conn, u32 qpn, u32 status)
{
	trace_metaroce_qp_error(conn, qpn, status);
}
