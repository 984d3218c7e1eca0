// SPDX-License-Identifier: GPL-2.0
/*
 * Module parameters writable at run time (/sys/module/metaroce/parameters/), read
 * with READ_ONCE wherever the driver needs them.
 */
#include <linux/compiler.h>
#include <linux/moduleparam.h>

#include "../../include/metaroce/params.h"

static unsigned int rx_capacity_mbps;
module_param(rx_capacity_mbps, uint, 0644);
MODULE_PARM_DESC(rx_capacity_mbps,
		 "Inbound capacity in Mb/s a device shares among the peers sending to it (rate hints in ACKs); 0 = the netdev's link speed when the device was created (no hint if unknown)");

static bool rate_hints = true;
module_param(rate_hints, bool, 0644);
MODULE_PARM_DESC(rate_hints,
		 "Put the receiver's fair-share rate hint in every ACK (N: every ACK carries hint 0)");

static bool gso;
module_param(gso, bool, 0644);
MODULE_PARM_DESC(gso,
		 "Send a burst of a path's equal-size datagrams as one UDP GSO buffer (default N: one buffer per datagram)");

static bool gro;
module_param(gro, bool, 0644);
MODULE_PARM_DESC(gro,
		 "Receive UDP GSO/GRO buffers whole and walk their datagrams in place (tunnel sockets created after it is set; default N: the UDP stack segments them)");

static unsigned int path_burst = 1;
module_param(path_burst, uint, 0644);
MODULE_PARM_DESC(path_burst,
		 "Data packets a new connection puts on one path before the next (1..64, default 1: packet by packet); more makes larger UDP GSO bursts");

static unsigned int pacing_burst_us = 20;
module_param(pacing_burst_us, uint, 0644);
MODULE_PARM_DESC(pacing_burst_us,
		 "How far, in us, a new connection's pacing clock may lag behind the current time: the largest burst pacing allows (spec default 20)");

static unsigned int pacing_gain_pct = 100;
module_param(pacing_gain_pct, uint, 0644);
MODULE_PARM_DESC(pacing_gain_pct,
		 "A new connection paces at this share, in percent, of its window per smoothed RTT (100..400; default 100, the spec's default)");

static unsigned int paths = 8;
module_param(paths, uint, 0644);
MODULE_PARM_DESC(paths,
		 "Paths (UDP source ports) of a new connection (1..16, default 8)");

static bool tail_probe;
module_param(tail_probe, bool, 0644);
MODULE_PARM_DESC(tail_probe,
		 "A new connection's paths declare their packets lost after 2 SRTT without an ACK instead of waiting for the RTO (spec MR-RTX-15; default N)");

static unsigned int window_ack_req;
module_param(window_ack_req, uint, 0644);
MODULE_PARM_DESC(window_ack_req,
		 "A new connection asks for an ACK at a full window only when that window holds at most this many packets (0, the default: always)");

u32 metaroce_param_rx_capacity_mbps(void)
{
	return READ_ONCE(rx_capacity_mbps);
}

bool metaroce_param_rate_hints(void)
{
	return READ_ONCE(rate_hints);
}

bool metaroce_param_gso(void)
{
	return READ_ONCE(gso);
}

bool metaroce_param_gro(void)
{
	return READ_ONCE(gro);
}

u32 metaroce_param_path_burst(void)
{
	return READ_ONCE(path_burst);
}

u32 metaroce_param_pacing_burst_us(void)
{
	return READ_ONCE(pacing_burst_us);
}

u32 metaroce_param_pacing_gain_pct(void)
{
	return READ_ONCE(pacing_gain_pct);
}

bool metaroce_param_tail_probe(void)
{
	return READ_ONCE(tail_probe);
}

u32 metaroce_param_window_ack_req(void)
{
	return READ_ONCE(window_ack_req);
}

u32 metaroce_param_paths(void)
{
	return READ_ONCE(paths);
}
