// SPDX-License-Identifier: GPL-2.0
/*
 * C helpers for the networking abstractions in rust/rdma: one line each, wrapping
 * a static inline function or macro of the kernel headers.
 */
#include <linux/bottom_half.h>
#include <linux/inetdevice.h>
#include <linux/netdevice.h>
#include <linux/skbuff.h>
#include <net/addrconf.h>
#include <net/ipv6.h>
#include <net/route.h>
#include <net/sock.h>

#include "../../include/metaroce/net_helpers.h"

struct sk_buff *metaroce_alloc_skb(unsigned int size, gfp_t priority)
{
	return alloc_skb(size, priority);
}

void metaroce_skb_reserve(struct sk_buff *skb, int len)
{
	skb_reserve(skb, len);
}

unsigned int metaroce_skb_headroom(const struct sk_buff *skb)
{
	return skb_headroom(skb);
}

int metaroce_skb_tailroom(const struct sk_buff *skb)
{
	return skb_tailroom(skb);
}

unsigned int metaroce_skb_headlen(const struct sk_buff *skb)
{
	return skb_headlen(skb);
}

bool metaroce_pskb_may_pull(struct sk_buff *skb, unsigned int len)
{
	return pskb_may_pull(skb, len);
}

unsigned char *metaroce_skb_network_header(const struct sk_buff *skb)
{
	return skb_network_header(skb);
}

struct net_device *metaroce_skb_dev(const struct sk_buff *skb)
{
	return skb->dev;
}

void metaroce_skb_dst_drop(struct sk_buff *skb)
{
	skb_dst_drop(skb);
}

void metaroce_kfree_skb(struct sk_buff *skb)
{
	kfree_skb(skb);
}

void metaroce_consume_skb(struct sk_buff *skb)
{
	consume_skb(skb);
}

unsigned int metaroce_ll_reserved_space(const struct net_device *dev)
{
	return LL_RESERVED_SPACE(dev);
}

void metaroce_local_bh_disable(void)
{
	local_bh_disable();
}

void metaroce_local_bh_enable(void)
{
	local_bh_enable();
}

void *metaroce_rcu_dereference_sk_user_data(const struct sock *sk)
{
	return rcu_dereference_sk_user_data(sk);
}

void metaroce_ip_rt_put(struct rtable *rt)
{
	ip_rt_put(rt);
}

int metaroce_ip4_dst_hoplimit(const struct rtable *rt)
{
	return ip4_dst_hoplimit(&rt->dst);
}

struct dst_entry *metaroce_ip6_dst_lookup_flow(struct net *net, const struct sock *sk,
						struct flowi6 *fl6)
{
	return ip6_dst_lookup_flow(net, sk, fl6, NULL);
}

struct net_device *metaroce_ip_dev_find_rcu(struct net *net, __be32 addr)
{
	return __ip_dev_find(net, addr, false);
}

struct net_device *metaroce_ipv6_dev_find_rcu(struct net *net, const struct in6_addr *addr)
{
#if IS_ENABLED(CONFIG_IPV6)
	return ipv6_dev_find(net, addr, NULL);
#else
	return NULL;
#endif
}

bool metaroce_netdev_is_loopback(const struct net_device *dev)
{
	return dev->flags & IFF_LOOPBACK;
}
