# SPDX-License-Identifier: GPL-2.0
#
# Shared by rc_integrity.py and rc_errors.py: two RC QPs on two devices (mroce0 on
# vethA, mroce1 on vethB) opened by one process, as verbs_objects.py does: the RDMA
# subsystem is in shared namespace mode, so a process in either namespace sees both
# devices, and their traffic still crosses the veth pair.

import os
import select
import time

import pyverbs.enums as e
from pyverbs.addr import AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr

ACCESS_ALL = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE |
              e.IBV_ACCESS_REMOTE_READ | e.IBV_ACCESS_REMOTE_ATOMIC)

INIT_MASK = e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS
RTR_MASK = (e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU | e.IBV_QP_DEST_QPN |
            e.IBV_QP_RQ_PSN | e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER)
RTS_MASK = (e.IBV_QP_STATE | e.IBV_QP_TIMEOUT | e.IBV_QP_RETRY_CNT | e.IBV_QP_RNR_RETRY |
            e.IBV_QP_SQ_PSN | e.IBV_QP_MAX_QP_RD_ATOMIC)

WC_STATUS = {v: k for k, v in vars(e).items() if k.startswith('IBV_WC_') and k.endswith('_ERR')}
WC_STATUS[e.IBV_WC_SUCCESS] = 'IBV_WC_SUCCESS'
QP_STATE = {v: k for k, v in vars(e).items() if k.startswith('IBV_QPS_')}


def status_name(status):
    return WC_STATUS.get(status, str(status))


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)


def roce_v2_ipv4_gid(ctx, addr=None):
    """Index and GID of the port's first IPv4-mapped GID, or of the one of addr."""
    for i in range(16):
        try:
            gid = ctx.query_gid(1, i)
        except PyverbsRDMAError:
            continue
        text = str(gid)
        if not text.startswith('0000:0000:0000:0000:0000:ffff:'):
            continue
        ip = '.'.join(str(b) for b in bytes.fromhex(text[30:].replace(':', '')))
        if addr is None or ip == addr:
            return i, gid
    raise Fail(f'no IPv4-mapped GID{" for " + addr if addr else ""}')


class Side:
    """One end: context, PD, a send and a receive CQ, an RC QP, and MRs."""

    def __init__(self, dev, send_wr=64, recv_wr=64, sge=4, cqe=1024, sig_all=1, addr=None):
        self.dev = dev
        before = event_fds()
        self.ctx = Context(name=dev)
        # The context's asynchronous event file, to wait for an event with a timeout.
        new = event_fds() - before
        self.async_fd = new.pop() if len(new) == 1 else None
        self.pd = PD(self.ctx)
        self.scq = CQ(self.ctx, cqe, None, None, 0)
        self.rcq = CQ(self.ctx, cqe, None, None, 0)
        cap = QPCap(max_send_wr=send_wr, max_recv_wr=recv_wr, max_send_sge=sge,
                    max_recv_sge=sge, max_inline_data=0)
        self.qp = QP(self.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.scq, rcq=self.rcq,
                                         cap=cap, sq_sig_all=sig_all))
        self.gid_index, self.gid = roce_v2_ipv4_gid(self.ctx, addr)

    def mr(self, size, access=ACCESS_ALL):
        return MR(self.pd, size, access)

    def state(self):
        return self.qp.query(e.IBV_QP_STATE)[0].qp_state

    def async_event(self, wait=5.0):
        """The next asynchronous event's type (acknowledged), or None after wait s."""
        check(self.async_fd is not None, f'{self.dev}: no asynchronous event file found')
        if not select.select([self.async_fd], [], [], wait)[0]:
            return None
        ev = self.ctx.get_async_event()
        kind = ev.event_type
        ev.ack()
        return kind


def event_fds():
    """This process's uverbs event files (asynchronous events, completion channels)."""
    fds = set()
    for name in os.listdir('/proc/self/fd'):
        try:
            if 'infinibandevent' in os.readlink(f'/proc/self/fd/{name}'):
                fds.add(int(name))
        except OSError:
            continue
    return fds


def to_init(side, access=ACCESS_ALL & ~e.IBV_ACCESS_LOCAL_WRITE):
    a = QPAttr(qp_state=e.IBV_QPS_INIT)
    a.pkey_index = 0
    a.port_num = 1
    a.qp_access_flags = access
    side.qp.modify(a, INIT_MASK)


def to_rtr(me, peer, rq_psn, min_rnr_timer=1, max_dest_rd_atomic=16, mtu=e.IBV_MTU_1024):
    a = QPAttr(qp_state=e.IBV_QPS_RTR)
    a.path_mtu = mtu
    a.dest_qp_num = peer.qp.qp_num
    a.rq_psn = rq_psn
    a.max_dest_rd_atomic = max_dest_rd_atomic
    a.min_rnr_timer = min_rnr_timer
    gr = GlobalRoute(dgid=peer.gid, sgid_index=me.gid_index, hop_limit=64)
    a.ah_attr = AHAttr(gr=gr, is_global=1, port_num=1)
    me.qp.modify(a, RTR_MASK)


def to_rts(me, sq_psn, timeout=14, retry_cnt=7, rnr_retry=7, max_rd_atomic=16):
    a = QPAttr(qp_state=e.IBV_QPS_RTS)
    a.timeout = timeout
    a.retry_cnt = retry_cnt
    a.rnr_retry = rnr_retry
    a.sq_psn = sq_psn
    a.max_rd_atomic = max_rd_atomic
    me.qp.modify(a, RTS_MASK)


def connect(a, b, psn_a=0x10000, psn_b=0xfff000, a_rts=None, b_rts=None, a_rtr=None,
            b_rtr=None, access=ACCESS_ALL & ~e.IBV_ACCESS_LOCAL_WRITE):
    """INIT, RTR and RTS on both QPs; *_rts / *_rtr are extra keyword arguments."""
    to_init(a, access)
    to_init(b, access)
    to_rtr(a, b, psn_b, **(a_rtr or {}))
    to_rtr(b, a, psn_a, **(b_rtr or {}))
    to_rts(a, psn_a, **(a_rts or {}))
    to_rts(b, psn_b, **(b_rts or {}))


def poll(cq, want, timeout=60.0, what='completions'):
    """Polls until want completions arrived or timeout seconds passed; returns them."""
    wcs = []
    deadline = time.monotonic() + timeout
    while len(wcs) < want:
        n, got = cq.poll(min(want - len(wcs), 64))
        if n:
            wcs += got[:n]
            continue
        if time.monotonic() > deadline:
            raise Fail(f'{what}: {len(wcs)} of {want} after {timeout:.0f} s')
        time.sleep(0.0005)
    return wcs


def poll_one(cq, timeout=60.0, what='a completion'):
    return poll(cq, 1, timeout, what)[0]


def no_completion(cq, wait=0.5, what='CQ'):
    """Nothing arrives on cq within wait seconds."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        n, got = cq.poll(1)
        check(n == 0, f'{what}: unexpected completion wr_id {got[0].wr_id if n else None} '
                      f'status {status_name(got[0].status) if n else None}')
        time.sleep(0.01)
