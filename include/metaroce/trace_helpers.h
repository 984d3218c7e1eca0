/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers that fire the tracepoints of include/metaroce/trace.h, for Rust
 * (rust/rdma/trace.rs). Implementations: rust/helpers/trace.c.
 */
#ifndef METAROCE_TRACE_HELPERS_H
#define METAROCE_TRACE_HELPERS_H

#include <linux/types.h>

/* Whether a packet tracepoint is enabled (the caller then parses the header). */
bool metaroce_trace_packet_enabled(void);
/* Whether a tracepoint fed by a run's counters is enabled (rto, loss, ecn, rate_hint). */
bool metaroce_trace_run_enabled(void);

void metaroce_trace_packet_tx(u32 conn, u8 type, u8 path, u32 psn, u32 len, bool retx);
void metaroce_trace_packet_rx(u32 conn, u8 type, u8 path, u32 psn, u32 len, bool ce, u8 drop);
void metaroce_trace_rto(u32 conn, u8 path, u32 count, u64 total);
void metaroce_trace_loss(u32 conn, u8 path, u32 count, u64 total);
void metaroce_trace_ecn(u32 conn, u8 path, u32 count, u64 total);
void metaroce_trace_path_retired(u32 conn, u8 path, u32 new_port, u64 total);
void metaroce_trace_rate_hint(u32 conn, u64 old_bps, u64 new_bps);
void metaroce_trace_qp_error(u32 conn, u32 qpn, u32 status);

#endif /* METAROCE_TRACE_HELPERS_H */
