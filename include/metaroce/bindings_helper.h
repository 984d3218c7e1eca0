/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Input for bindgen: the RDMA and networking headers that the kernel's own
 * `kernel::bindings` do not cover, plus our helpers.
 */
#include <linux/netdevice.h>
#include <linux/skbuff.h>
#include <net/udp_tunnel.h>
#include <net/dst_cache.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_cache.h>
#include <linux/vmalloc.h>
#include <linux/random.h>
#include <rdma/ib_mad.h>
#include <rdma/rdma_netlink.h>
#include <rdma/uverbs_ioctl.h>
#include <uapi/rdma/rdma_user_rxe.h>
#include <uapi/rdma/ib_user_verbs.h>

#include "helpers.h"
#include "net_helpers.h"
#include "trace_helpers.h"
#include "params.h"
