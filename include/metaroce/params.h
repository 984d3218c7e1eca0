/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The module parameters that may change while the module runs (mode 0644): the
 * Rust `module!` macro makes read-only ones only. Implementations:
 * rust/helpers/params.c; read through rust/rdma/params.rs.
 */
#ifndef METAROCE_PARAMS_H
#define METAROCE_PARAMS_H

#include <linux/types.h>

/* rx_capacity_mbps: a device's inbound capacity for rate hints, 0 = its netdev's speed. */
u32 metaroce_param_rx_capacity_mbps(void);
/* rate_hints: whether ACKs carry the receiver's fair-share rate hint. */
bool metaroce_param_rate_hints(void);
/* gso: whether a burst of a path's datagrams leaves as one UDP GSO buffer. */
bool metaroce_param_gso(void);
/* gro: whether the tunnel sockets take UDP GSO/GRO buffers whole. */
bool metaroce_param_gro(void);
/* path_burst: data packets a new connection puts on one path before the next. */
u32 metaroce_param_path_burst(void);
/* pacing_burst_us: the pacing burst of new connections, in microseconds. */
u32 metaroce_param_pacing_burst_us(void);
/* pacing_gain_pct: a new connection's pacing rate per window and SRTT, in percent. */
u32 metaroce_param_pacing_gain_pct(void);
/* paths: the number of paths of new connections. */
u32 metaroce_param_paths(void);
/* tail_probe: whether a new connection's paths keep probe timers (MR-RTX-15). */
bool metaroce_param_tail_probe(void);
/* window_ack_req: the largest window (packets) whose filling asks for an ACK; 0 = any. */
u32 metaroce_param_window_ack_req(void);

#endif /* METAROCE_PARAMS_H */
