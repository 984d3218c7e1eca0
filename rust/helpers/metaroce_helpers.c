// SPDX-License-Identifier: GPL-2.0
/*
 * C helpers for the Rust abstractions in rust/rdma: most are one line, wrapping a
 * static inline function or macro of the kernel headers; the page walks, the GSO
 * burst and batching-receive helpers hold a loop each, for the reasons
 * include/metaroce/helpers.h gives.
 */
#include <linux/ethtool.h>
#include <linux/if_vlan.h>
#include <linux/netdevice.h>
#include <linux/overflow.h>
#include <linux/rtnetlink.h>
#include <linux/highmem.h>
#include <linux/scatterlist.h>
#include <linux/sched.h>
#include <linux/sched/clock.h>
#include <linux/skbuff.h>
#include <linux/udp.h>
#include <linux/vmalloc.h>
#include <linux/workqueue.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_netlink.h>
#include <net/netlink.h>
#include <net/sock.h>
#include <net/udp.h>
#include <rdma/uverbs_ioctl.h>

#include "../../include/metaroce/helpers.h"

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

u32 metaroce_netdev_speed_mbps(struct net_device *ndev)
{
	struct ethtool_link_ksettings ks;
	u32 speed = 0;
	int err;

	rtnl_lock();
	err = __ethtool_get_link_ksettings(ndev, &ks);
	rtnl_unlock();
	if (!err && ks.base.speed != SPEED_UNKNOWN)
		speed = ks.base.speed;
	return speed;
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

void *metaroce_vmalloc_user(unsigned long size)
{
	return vmalloc_user(size);
}

/*
 * Stores the pages of @umem, in order, in @pages (room for @n): one walk of its
 * scatterlist at registration, so that a transfer finds its page by index rather than
 * by walking the list from the start (which costs a lookup in a region of N pages
 * O(N)). Returns the number of pages, or -EINVAL if there are more than @n.
 */
long metaroce_umem_pages(struct ib_umem *umem, struct page **pages, size_t n)
{
	struct sg_page_iter it;
	size_t i = 0;

	for_each_sgtable_page(&umem->sgt_append.sgt, &it, 0) {
		if (i == n)
			return -EINVAL;
		pages[i++] = sg_page_iter_page(&it);
	}
	return i;
}

size_t metaroce_umem_num_pages(struct ib_umem *umem)
{
	return ib_umem_num_pages(umem);
}

size_t metaroce_umem_offset(struct ib_umem *umem)
{
	return ib_umem_offset(umem);
}

/*
 * Copies between @buf and bytes [@pos, @pos + @len) of the @npages pages of @pages,
 * page by page, in either direction.
 */
int metaroce_pages_copy(struct page *const *pages, size_t npages, size_t pos, void *buf,
			size_t len, bool to_pages)
{
	size_t end;

	if (check_add_overflow(pos, len, &end) || end > npages << PAGE_SHIFT)
		return -EFAULT;
	while (len) {
		size_t in = pos & ~PAGE_MASK;
		size_t n = min_t(size_t, len, PAGE_SIZE - in);
		void *va = kmap_local_page(pages[pos >> PAGE_SHIFT]);

		if (to_pages)
			memcpy(va + in, buf, n);
		else
			memcpy(buf, va + in, n);
		kunmap_local(va);
		buf += n;
		len -= n;
		pos += n;
	}
	return 0;
}

/*
 * The 8-byte atomic of an RDMA ATOMIC request on the aligned word at byte @pos of the
 * @npages pages of @pages: compare-and-swap when @is_cas, else fetch-and-add. Returns
 * the original value in @orig. Atomic against other CPUs, as the IB spec's
 * ATOMIC_HCA requires.
 */
int metaroce_pages_atomic64(struct page *const *pages, size_t npages, size_t pos,
			    bool is_cas, u64 compare_add, u64 swap, u64 *orig)
{
	u8 *va;
	u64 *word;
	u64 old;

	if (pos & 7)
		return -EINVAL;
	if (pos >> PAGE_SHIFT >= npages)
		return -EFAULT;
	va = kmap_local_page(pages[pos >> PAGE_SHIFT]);
	word = (u64 *)(va + (pos & ~PAGE_MASK));
	if (is_cas) {
		old = cmpxchg64(word, compare_add, swap);
	} else {
		old = READ_ONCE(*word);
		while (!try_cmpxchg64(word, &old, old + compare_add))
			;
	}
	kunmap_local(va);
	*orig = old;
	return 0;
}

/*
 * Appends bytes [@pos, @pos + @len) of the @npages pages of @pages to @skb as paged
 * fragments, without copying: each fragment holds a reference on its page, so the
 * page outlives the region's unpinning for as long as the skb lives. The pages are
 * user memory that may change meanwhile, which SKBFL_SHARED_FRAG tells the stack
 * (it copies them before it checksums them in software). Returns -EFAULT out of
 * range and -EMSGSIZE when @skb runs out of fragment slots; @skb then holds the
 * fragments appended so far.
 */
int metaroce_pages_to_skb(struct page *const *pages, size_t npages, size_t pos, size_t len,
			  struct sk_buff *skb)
{
	size_t end;

	if (check_add_overflow(pos, len, &end) || end > npages << PAGE_SHIFT ||
	    len > INT_MAX - skb->len)
		return -EFAULT;
	skb_shinfo(skb)->flags |= SKBFL_SHARED_FRAG;
	while (len) {
		size_t in = pos & ~PAGE_MASK;
		size_t n = min_t(size_t, len, PAGE_SIZE - in);
		struct page *page = pages[pos >> PAGE_SHIFT];
		int i = skb_shinfo(skb)->nr_frags;

		if (skb_can_coalesce(skb, i, page, in)) {
			skb_frag_size_add(&skb_shinfo(skb)->frags[i - 1], n);
		} else {
			if (i >= MAX_SKB_FRAGS)
				return -EMSGSIZE;
			get_page(page);
			skb_fill_page_desc(skb, i, page, in, n);
		}
		skb->len += n;
		skb->data_len += n;
		skb->truesize += n;
		len -= n;
		pos += n;
	}
	return 0;
}

/*
 * UDP GSO bursts (rust/rdma/skb.rs, GsoBurst): @pkt, a whole datagram payload (linear
 * headers, then possibly paged fragments), is appended to @burst as its next
 * segment, without copying the fragments: the linear bytes of @pkt are copied into a
 * page fragment of their own (netdev_alloc_frag), which becomes a fragment of @burst,
 * and @pkt's fragments move over with their page references. @pkt is left with its
 * linear part only, for the caller to free. Returns -EMSGSIZE, with neither buffer
 * changed, when @burst lacks fragment slots or would pass @max_len bytes; -ENOMEM
 * when no page fragment could be had; -EINVAL for a @pkt with a frag_list.
 */
int metaroce_skb_gso_append(struct sk_buff *burst, struct sk_buff *pkt, unsigned int max_len)
{
	struct skb_shared_info *b = skb_shinfo(burst), *p = skb_shinfo(pkt);
	unsigned int hlen = skb_headlen(pkt);
	int need = p->nr_frags + (hlen ? 1 : 0);
	int i;

	if (skb_has_frag_list(pkt) || skb_has_frag_list(burst))
		return -EINVAL;
	if (b->nr_frags + need > MAX_SKB_FRAGS || pkt->len > max_len ||
	    burst->len > max_len - pkt->len)
		return -EMSGSIZE;
	if (hlen) {
		void *va = netdev_alloc_frag(SKB_DATA_ALIGN(hlen));
		struct page *page;

		if (!va)
			return -ENOMEM;
		memcpy(va, pkt->data, hlen);
		page = virt_to_head_page(va);
		skb_fill_page_desc(burst, b->nr_frags, page, va - page_address(page), hlen);
		burst->len += hlen;
		burst->data_len += hlen;
		burst->truesize += SKB_DATA_ALIGN(hlen);
	}
	for (i = 0; i < p->nr_frags; i++) {
		unsigned int n = skb_frag_size(&p->frags[i]);

		b->frags[b->nr_frags++] = p->frags[i];
		burst->len += n;
		burst->data_len += n;
		burst->truesize += n;
	}
	b->flags |= p->flags & SKBFL_SHARED_FRAG;
	/* The page references moved to @burst. */
	pkt->truesize -= pkt->data_len;
	pkt->len -= pkt->data_len;
	pkt->data_len = 0;
	p->nr_frags = 0;
	return 0;
}

/*
 * Marks @skb, a UDP payload of @segs segments of @seg_len bytes (the last possibly
 * shorter), for UDP segmentation offload: gso_type SKB_GSO_UDP_L4, gso_size @seg_len,
 * and the checksum partial from the UDP header that udp_tunnel_xmit_skb and
 * udp_tunnel6_xmit_skb push in front of the data (as udp4_hwcsum does for a UDP
 * socket's GSO skb; __udp_gso_segment requires it).
 */
void metaroce_skb_set_udp_gso(struct sk_buff *skb, unsigned int seg_len, unsigned int segs)
{
	skb_shinfo(skb)->gso_size = seg_len;
	skb_shinfo(skb)->gso_type = SKB_GSO_UDP_L4;
	skb_shinfo(skb)->gso_segs = segs;
	skb->ip_summed = CHECKSUM_PARTIAL;
	skb->csum_start = skb_headroom(skb) - sizeof(struct udphdr);
	skb->csum_offset = offsetof(struct udphdr, check);
}

/*
 * Batching receive: @sk, a tunnel socket without an encap_rcv, takes UDP GSO buffers
 * (a sender's UDP_SEGMENT burst, or UDP GRO's aggregate: GRO_ENABLED makes UDP GRO
 * aggregate the socket's datagrams, as the UDP_GRO socket option does) into its queue
 * whole instead of segmenting them, and calls @data_ready for each. An encap_rcv
 * socket would have them segmented first (udp_unexpected_gso). The receive buffer is
 * large: @data_ready empties the queue at once, so it only bounds a burst.
 */
void metaroce_udp_sock_batch_rx(struct sock *sk, void (*data_ready)(struct sock *sk))
{
	udp_set_bit(ACCEPT_L4, sk);
	udp_set_bit(GRO_ENABLED, sk);
	lock_sock(sk);
	sk->sk_userlocks |= SOCK_RCVBUF_LOCK;
	WRITE_ONCE(sk->sk_rcvbuf, 16 << 20);
	release_sock(sk);
	write_lock_bh(&sk->sk_callback_lock);
	sk->sk_data_ready = data_ready;
	write_unlock_bh(&sk->sk_callback_lock);
}

/*
 * The next datagram of @sk's queue, its data at the UDP payload, or NULL when the queue
 * is empty. Datagrams whose checksum fails are dropped and counted as udp_recvmsg
 * does.
 */
struct sk_buff *metaroce_udp_recv(struct sock *sk)
{
	struct sk_buff *skb;
	int err;

	while ((skb = skb_recv_udp(sk, MSG_DONTWAIT, &err))) {
		if (udp_skb_csum_unnecessary(skb) || !__udp_lib_checksum_complete(skb))
			return skb;
		if (sk->sk_family == AF_INET)
			__UDP_INC_STATS(sock_net(sk), UDP_MIB_CSUMERRORS);
		kfree_skb_reason(skb, SKB_DROP_REASON_UDP_CSUM);
	}
	return NULL;
}

/*
 * The netdev a dequeued datagram came in on (skb->dev is gone: the queue reuses it as
 * dev_scratch). Under the RCU read lock; not held.
 */
struct net_device *metaroce_skb_iif_dev_rcu(const struct sock *sk, const struct sk_buff *skb)
{
	return dev_get_by_index_rcu(sock_net(sk), skb->skb_iif);
}

unsigned int metaroce_skb_gso_size(const struct sk_buff *skb)
{
	return skb_is_gso(skb) ? skb_shinfo(skb)->gso_size : 0;
}

/* A GRO aggregate may continue in a frag_list of buffers (skb_gro_receive): one level. */
static const u8 *skb_contig(const struct sk_buff *skb, unsigned int offset, unsigned int max,
			    unsigned int *len, bool nested)
{
	unsigned int start = skb_headlen(skb);
	struct sk_buff *frag_iter;
	int i;

	*len = 0;
	if (offset < start) {
		*len = min(start - offset, max);
		return skb->data + offset;
	}
	for (i = 0; i < skb_shinfo(skb)->nr_frags; i++) {
		const skb_frag_t *f = &skb_shinfo(skb)->frags[i];
		unsigned int end = start + skb_frag_size(f);

		if (offset < end) {
			const u8 *va = skb_frag_address_safe(f);

			if (!va)
				return NULL;
			*len = min(end - offset, max);
			return va + (offset - start);
		}
		start = end;
	}
	if (nested)
		return NULL;
	skb_walk_frags(skb, frag_iter) {
		unsigned int end = start + frag_iter->len;

		if (offset < end)
			return skb_contig(frag_iter, offset - start, max, len, true);
		start = end;
	}
	return NULL;
}

const u8 *metaroce_skb_contig(const struct sk_buff *skb, unsigned int offset, unsigned int max,
			      unsigned int *len)
{
	return skb_contig(skb, offset, max, len, false);
}

struct sk_buff *metaroce_skb_get(struct sk_buff *skb)
{
	return skb_get(skb);
}

/* The UDP header that the socket's queue pulled, back in front of the data. */
void metaroce_skb_push_udp(struct sk_buff *skb)
{
	__skb_push(skb, sizeof(struct udphdr));
}

/*
 * Copies @len bytes of @skb's data from byte @offset on (through its linear part and
 * fragments) into bytes [@pos, @pos + @len) of the @npages pages of @pages.
 */
int metaroce_pages_copy_from_skb(struct page *const *pages, size_t npages, size_t pos,
				 const struct sk_buff *skb, size_t offset, size_t len)
{
	size_t end;

	if (check_add_overflow(pos, len, &end) || end > npages << PAGE_SHIFT ||
	    offset > skb->len || len > skb->len - offset)
		return -EFAULT;
	while (len) {
		size_t in = pos & ~PAGE_MASK;
		size_t n = min_t(size_t, len, PAGE_SIZE - in);
		void *va = kmap_local_page(pages[pos >> PAGE_SHIFT]);
		int err = skb_copy_bits(skb, offset, va + in, n);

		kunmap_local(va);
		if (err)
			return err;
		offset += n;
		len -= n;
		pos += n;
	}
	return 0;
}

struct ib_ucontext *metaroce_udata_to_ucontext(struct ib_udata *udata)
{
	return container_of(udata, struct uverbs_attr_bundle, driver_udata)->context;
}

void metaroce_spin_lock_bh(struct spinlock *lock)
{
	spin_lock_bh(lock);
}

void metaroce_spin_unlock_bh(struct spinlock *lock)
{
	spin_unlock_bh(lock);
}

int metaroce_spin_trylock_bh(struct spinlock *lock)
{
	return spin_trylock_bh(lock);
}

bool metaroce_queue_work_after_cpu(unsigned int cpu, struct workqueue_struct *wq,
				   struct work_struct *work)
{
	unsigned int target;
	bool queued;

	preempt_disable();
	target = cpumask_next_wrap(cpu, cpu_online_mask);
	if (target >= nr_cpu_ids)
		target = smp_processor_id();
	queued = queue_work_on(target, wq, work);
	preempt_enable();
	return queued;
}

bool metaroce_current_is_user_task(void)
{
	return !(current->flags & (PF_KTHREAD | PF_IDLE));
}

u64 metaroce_local_clock(void)
{
	return local_clock();
}

struct nlattr *metaroce_nla_nest_start_driver(struct sk_buff *msg)
{
	return nla_nest_start(msg, RDMA_NLDEV_ATTR_DRIVER);
}

void metaroce_nla_nest_end(struct sk_buff *msg, struct nlattr *nest)
{
	nla_nest_end(msg, nest);
}

void metaroce_nla_nest_cancel(struct sk_buff *msg, struct nlattr *nest)
{
	nla_nest_cancel(msg, nest);
}
