/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C helpers for the networking abstractions in rust/rdma (skb.rs, udp.rs, route.rs):
 * static inline functions and macros that bindgen cannot bind.
 *
 * Each helper does exactly what the inline function or macro of the same name
 * does; none holds logic of its own. Implementations: rust/helpers/net_helpers.c.
 */
#ifndef METAROCE_NET_HELPERS_H
#define METAROCE_NET_HELPERS_H

#include <linux/types.h>
/* Also the input of bindgen for these abstractions: */
#include <linux/skbuff.h>
#include <net/flow.h>
#include <net/ip6_route.h>
#include <net/net_namespace.h>
#include <net/route.h>

/* linux/skbuff.h */
struct sk_buff *metaroce_alloc_skb(unsigned int size, gfp_t priority);
void metaroce_skb_reserve(struct sk_buff *skb, int len);
unsigned int metaroce_skb_headroom(const struct sk_buff *skb);
int metaroce_skb_tailroom(const struct sk_buff *skb);
unsigned int metaroce_skb_headlen(const struct sk_buff *skb);
bool metaroce_pskb_may_pull(struct sk_buff *skb, unsigned int len);
unsigned char *metaroce_skb_network_header(const struct sk_buff *skb);
/* skb->dev */
struct net_device *metaroce_skb_dev(const struct sk_buff *skb);
void metaroce_skb_dst_drop(struct sk_buff *skb);
void metaroce_kfree_skb(struct sk_buff *skb);
void metaroce_consume_skb(struct sk_buff *skb);

/* linux/netdevice.h */
unsigned int metaroce_ll_reserved_space(const struct net_device *dev);

/* linux/bottom_half.h */
void metaroce_local_bh_disable(void);
void metaroce_local_bh_enable(void);

/* net/sock.h */
void *metaroce_rcu_dereference_sk_user_data(const struct sock *sk);

/* net/route.h, net/ipv6.h (a stub returning an error without CONFIG_IPV6) */
void metaroce_ip_rt_put(struct rtable *rt);
int metaroce_ip4_dst_hoplimit(const struct rtable *rt);
struct dst_entry *metaroce_ip6_dst_lookup_flow(struct net *net, const struct sock *sk,
						struct flowi6 *fl6);

/*
 * linux/inetdevice.h, net/addrconf.h: the netdev that owns a local address of @net
 * (__ip_dev_find without a reference, ipv6_dev_find; NULL without CONFIG_IPV6), or
 * NULL. Under the RCU read lock; the device is not held.
 */
struct net_device *metaroce_ip_dev_find_rcu(struct net *net, __be32 addr);
struct net_device *metaroce_ipv6_dev_find_rcu(struct net *net, const struct in6_addr *addr);
/* dev->flags & IFF_LOOPBACK */
bool metaroce_netdev_is_loopback(const struct net_device *dev);

#endif /* METAROCE_NET_HELPERS_H */
