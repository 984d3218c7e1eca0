/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C helpers for static inline functions and macros that bindgen cannot bind.
 *
 * Most helpers do exactly what the inline function of the same name does. A few hold
 * a loop or a decision of their own, and each says what it adds: the walks over a
 * umem's pages (copies, the 8-byte atomic, zero-copy fragments, placement from an
 * skb), the GSO burst and batching-receive helpers, the link speed query and the
 * workqueue helper. They stay in C because every step of them is an inline function
 * or macro (kmap_local_page()/kunmap_local(), cmpxchg64(), skb_shinfo(),
 * skb_can_coalesce(), skb_fill_page_desc(), for_each_sgtable_page(), preemption
 * control), so a Rust loop would cross into a helper per page or fragment of every
 * packet, and the kernel crate has no type for an skb's fragments. The page walks have
 * a second reason: they touch application memory that user space, and other QPs'
 * transfers, may write at the same moment (RDMA orders none of it). C's memcpy() and
 * cmpxchg64() on such pages are the kernel's idiom, as in rdma_rxe; in Rust a copy
 * that races a write is undefined behaviour, and kernel::page::BorrowedPage's
 * read_raw()/write_raw() (like Atomic::from_ptr() for the word of an atomic) require
 * the caller to rule such races out, which a device cannot. Each checks its bounds
 * from its own arguments before touching memory; their only callers are the safe types
 * of rust/rdma (mr.rs, skb.rs, udp.rs, netdev.rs, work.rs) that hold the invariants.
 * When the kernel crate gains a type for racy shared memory (as UserSlice is for user
 * addresses) and one for an skb's fragments, these loops move to Rust.
 * Implementations: rust/helpers/metaroce_helpers.c.
 */
#ifndef METAROCE_HELPERS_H
#define METAROCE_HELPERS_H

#include <linux/types.h>

struct ib_device;
struct ib_umem;
struct ib_ucontext;
struct ib_udata;
struct net;
struct net_device;

/* linux/netdevice.h */
void metaroce_dev_hold(struct net_device *ndev);
void metaroce_dev_put(struct net_device *ndev);
struct net *metaroce_dev_net(const struct net_device *ndev);
struct net_device *metaroce_netdev_notifier_info_to_dev(void *info);
const char *metaroce_netdev_name(const struct net_device *ndev);
unsigned int metaroce_netdev_mtu(const struct net_device *ndev);
int metaroce_netdev_ifindex(const struct net_device *ndev);
/* Copies min(addr_len, len) bytes of dev_addr into @buf; returns the count. */
unsigned int metaroce_netdev_addr(const struct net_device *ndev, u8 *buf, unsigned int len);
bool metaroce_netdev_is_vlan(const struct net_device *ndev);
/* netif_running() && netif_carrier_ok(): ib_get_curr_port_state() == ACTIVE. */
bool metaroce_netdev_port_active(const struct net_device *ndev);
/*
 * __ethtool_get_link_ksettings() under RTNL (taken here: process context, RTNL not
 * held): the link speed in Mb/s, 0 if unknown or on error.
 */
u32 metaroce_netdev_speed_mbps(struct net_device *ndev);

/* rdma/ib_verbs.h */
bool metaroce_ib_device_try_get(struct ib_device *dev);
void metaroce_ib_mark_name_assigned_by_user(struct ib_device *dev);
/* get_device()/put_device() on ib_device::dev: pins the memory, not the registration. */
void metaroce_ib_device_pin(struct ib_device *dev);
void metaroce_ib_device_unpin(struct ib_device *dev);

/* rdma/uverbs_ioctl.h: rdma_udata_to_drv_context() without the driver's container_of. */
struct ib_ucontext *metaroce_udata_to_ucontext(struct ib_udata *udata);

/* linux/vmalloc.h: vmalloc_user() is a macro (alloc_hooks). */
void *metaroce_vmalloc_user(unsigned long size);

/*
 * rdma/ib_umem.h: a umem's pages as an array, and ib_umem_copy_from() in both
 * directions and an 8-byte atomic on an aligned word over that array (with the two
 * below, the only helpers with a loop).
 */
long metaroce_umem_pages(struct ib_umem *umem, struct page **pages, size_t n);
size_t metaroce_umem_num_pages(struct ib_umem *umem);
size_t metaroce_umem_offset(struct ib_umem *umem);
int metaroce_pages_copy(struct page *const *pages, size_t npages, size_t pos, void *buf,
			size_t len, bool to_pages);
int metaroce_pages_atomic64(struct page *const *pages, size_t npages, size_t pos,
			    bool is_cas, u64 compare_add, u64 swap, u64 *orig);

/*
 * The same page array and socket buffers: bytes of the pages appended to an skb as
 * paged fragments (zero-copy transmit), and bytes of an skb, linear part and
 * fragments alike, copied into the pages (placement of a received payload).
 */
struct sk_buff;
int metaroce_pages_to_skb(struct page *const *pages, size_t npages, size_t pos, size_t len,
			  struct sk_buff *skb);
int metaroce_pages_copy_from_skb(struct page *const *pages, size_t npages, size_t pos,
				 const struct sk_buff *skb, size_t offset, size_t len);

/* UDP GSO bursts: one datagram payload appended to a burst as its next segment, and
 * the burst marked for UDP segmentation offload (rust/rdma/skb.rs, GsoBurst). */
int metaroce_skb_gso_append(struct sk_buff *burst, struct sk_buff *pkt, unsigned int max_len);
void metaroce_skb_set_udp_gso(struct sk_buff *skb, unsigned int seg_len, unsigned int segs);

/* Batching receive (rust/rdma/udp.rs, the `gro` parameter): a tunnel socket that takes
 * UDP GSO/GRO buffers whole and hands them to @data_ready, which dequeues them with
 * metaroce_udp_recv; the ingress netdev of a dequeued buffer; the GSO segment size of a
 * buffer (0: one datagram); a pointer to the bytes of @skb's data from @offset on that
 * lie in one piece (its linear part, one fragment, or those of a frag_list buffer), at
 * most @max, their count in *@len (0 and NULL when there are none in one piece). */
void metaroce_udp_sock_batch_rx(struct sock *sk, void (*data_ready)(struct sock *sk));
struct sk_buff *metaroce_udp_recv(struct sock *sk);
struct net_device *metaroce_skb_iif_dev_rcu(const struct sock *sk, const struct sk_buff *skb);
unsigned int metaroce_skb_gso_size(const struct sk_buff *skb);
const u8 *metaroce_skb_contig(const struct sk_buff *skb, unsigned int offset, unsigned int max,
			      unsigned int *len);
struct sk_buff *metaroce_skb_get(struct sk_buff *skb);
void metaroce_skb_push_udp(struct sk_buff *skb);

/* linux/spinlock.h: the bottom-half spinlock (rust/rdma/sync.rs) */
struct spinlock;
void metaroce_spin_lock_bh(struct spinlock *lock);
void metaroce_spin_unlock_bh(struct spinlock *lock);
int metaroce_spin_trylock_bh(struct spinlock *lock);

/*
 * linux/workqueue.h: queue_work_on() to the first online CPU after @cpu, wrapping
 * around (@cpu itself if it is the only one). Preemption stays disabled from the
 * choice to the queueing, so the chosen CPU cannot complete going offline in between
 * (that takes stop_machine): a bottom-half pool must not be kicked on an offline CPU.
 */
struct workqueue_struct;
struct work_struct;
bool metaroce_queue_work_after_cpu(unsigned int cpu, struct workqueue_struct *wq,
				   struct work_struct *work);

/* Whether the current task is a user task: neither a kernel thread nor idle. */
bool metaroce_current_is_user_task(void);

/* linux/sched/clock.h: local_clock(), a static inline with some configurations. */
u64 metaroce_local_clock(void);

/*
 * net/netlink.h: the RDMA_NLDEV_ATTR_DRIVER nest that a fill_res_*_entry callback
 * puts its rdma_nl_put_driver_*() attributes in (NULL when the message is full),
 * and its end or cancellation.
 */
struct sk_buff;
struct nlattr;
struct nlattr *metaroce_nla_nest_start_driver(struct sk_buff *msg);
void metaroce_nla_nest_end(struct sk_buff *msg, struct nlattr *nest);
void metaroce_nla_nest_cancel(struct sk_buff *msg, struct nlattr *nest);

/* Build-time layout checks the Rust side relies on. */
size_t metaroce_sizeof_ib_device(void);

#endif /* METAROCE_HELPERS_H */
