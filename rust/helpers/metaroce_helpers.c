// SPDX-License-Identifier: GPL-2.0
/*
 * C helpers for the Rust abstractions in rust/rdma: one line each, wrapping a
 * static inline function or macro of the kernel headers.
 */
#include <linux/if_vlan.h>
#include <linux/netdevice.h>
#include <rdma/ib_verbs.h>

#include "../../include/metaroce/helpers.h"

#ifdef METAROCE_HAVE_RXE_SRC
#include "rxe.h"

/* Our fields after the ib_device (3 words) must end before what rxe's notifier writes. */
static_assert(offsetof(struct rxe_dev, stats_counters) >= sizeof(struct ib_device) + 64);
static_assert(offsetof(struct rxe_dev, port) >= sizeof(struct ib_device) + 64);

size_t metaroce_rxe_dev_size(void)
{
	return sizeof(struct rxe_dev);
}
#else
/* Without the rxe sources, a generous bound (struct rxe_dev is about 4 KiB in 7.3). */
size_t metaroce_rxe_dev_size(void)
{
	return sizeof(struct ib_device) + 8192;
}
#endif

void metaroce_dev_hold(struct net_device *ndev)
{
	dev_hold(ndev);
}

void metaroce_dev_put(struct net_device *ndev)
{
	dev_put(ndev);
}

struct net *metaroce_dev_net(const struct net_device *ndev)
{
	return dev_net(ndev);
}

struct net_device *metaroce_netdev_notifier_info_to_dev(void *info)
{
	return netdev_notifier_info_to_dev(info);
}

const char *metaroce_netdev_name(const struct net_device *ndev)
{
	return ndev->name;
}

unsigned int metaroce_netdev_mtu(const struct net_device *ndev)
{
	return READ_ONCE(ndev->mtu);
}

int metaroce_netdev_ifindex(const struct net_device *ndev)
{
	return ndev->ifindex;
}

unsigned int metaroce_netdev_addr(const struct net_device *ndev, u8 *buf,
				  unsigned int len)
{
	unsigned int n = min_t(unsigned int, ndev->addr_len, len);

	memcpy(buf, ndev->dev_addr, n);
	return n;
}

bool metaroce_netdev_is_vlan(const struct net_device *ndev)
{
	return is_vlan_dev(ndev);
}

bool metaroce_netdev_port_active(const struct net_device *ndev)
{
	return netif_running(ndev) && netif_carrier_ok(ndev);
}

bool metaroce_ib_device_try_get(struct ib_device *dev)
{
	return ib_device_try_get(dev);
}

void metaroce_ib_mark_name_assigned_by_user(struct ib_device *dev)
{
	ib_mark_name_assigned_by_user(dev);
}

void metaroce_ib_device_pin(struct ib_device *dev)
{
	get_device(&dev->dev);
}

void metaroce_ib_device_unpin(struct ib_device *dev)
{
	put_device(&dev->dev);
}

size_t metaroce_sizeof_ib_device(void)
{
	return sizeof(struct ib_device);
}
