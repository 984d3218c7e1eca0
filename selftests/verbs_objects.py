#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
#
# Verbs objects of a metaroce device through stock rdma-core (the rxe provider) and
# pyverbs: PD, MR, CQ, RC QP, AH, SRQ, UD QP. One case per invocation, run by verbs_objects.sh:
#   verbs_objects.py CASE DEV [PEER_DEV]
# Exits 0 on success; prints why and exits 1 on failure.

import errno
import os
import select
import sys
import time

import pyverbs.enums as e
from pyverbs.addr import AH, AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ, CompChannel
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)


def refused(err, fn, what):
    """fn() must fail with errno err."""
    try:
        fn()
    except PyverbsRDMAError as ex:
        check(ex.error_code == err, f'{what}: errno {ex.error_code}, expected {err} ({ex})')
        return
    raise Fail(f'{what}: accepted, expected errno {err}')


def roce_v2_ipv4_gid(ctx):
    """Index and GID of the port's IPv4-mapped GID."""
    for i in range(16):
        try:
            gid = ctx.query_gid(1, i)
        except PyverbsRDMAError:
            continue
        if str(gid).startswith('0000:0000:0000:0000:0000:ffff:'):
            return i, gid
    raise Fail('no IPv4-mapped GID')


def case_mr(dev):
    ctx = Context(name=dev)
    pd = PD(ctx)
    LW, RW, RR, RA = (e.IBV_ACCESS_LOCAL_WRITE, e.IBV_ACCESS_REMOTE_WRITE,
                      e.IBV_ACCESS_REMOTE_READ, e.IBV_ACCESS_REMOTE_ATOMIC)
    valid = [0, LW, RR, LW | RW, LW | RR, LW | RA, LW | RW | RR, LW | RW | RA,
             LW | RR | RA, LW | RW | RR | RA]
    keys = set()
    mrs = []
    for acc in valid:
        for size in (1, 4096, 65537, 1 << 20):
            mr = MR(pd, size, acc)
            check(mr.lkey == mr.rkey, f'lkey {mr.lkey:#x} != rkey {mr.rkey:#x}')
            check(mr.lkey >> 8 != 0, f'key index 0 for access {acc:#x}')
            check(mr.lkey not in keys, f'duplicate key {mr.lkey:#x}')
            keys.add(mr.lkey)
            mrs.append(mr)
    for mr in mrs:
        mr.close()
    # Remote write or atomic without local write: ib_check_mr_access says EINVAL.
    for acc in (RW, RA, RW | RR, RW | RA | RR):
        refused(errno.EINVAL, lambda: MR(pd, 4096, acc), f'MR access {acc:#x}')
    # Rights the device does not implement.
    refused(errno.EOPNOTSUPP, lambda: MR(pd, 4096, LW | e.IBV_ACCESS_MW_BIND), 'MR with MW_BIND')
    refused(errno.EOPNOTSUPP, lambda: MR(pd, 4096, LW | e.IBV_ACCESS_ON_DEMAND), 'ODP MR')
    # Keys are recycled only with a new random byte: register/deregister repeatedly.
    for _ in range(64):
        MR(pd, 4096, LW).close()
    pd.close()
    ctx.close()


def case_cq(dev):
    ctx = Context(name=dev)
    max_cqe = ctx.query_device().max_cqe
    for n in (1, 2, 15, 16, 63, 100, 4096, max_cqe):
        cq = CQ(ctx, n, None, None, 0)
        check(cq.cqe >= n, f'CQ of {n} has cqe {cq.cqe}')
        cq.close()
    refused(errno.EINVAL, lambda: CQ(ctx, max_cqe + 1, None, None, 0), 'CQ above max_cqe')
    cq = CQ(ctx, 16, None, None, 0)
    for n in (100, 1000, 5000):
        cq.resize(n)
        check(cq.cqe >= n, f'resize to {n} gave {cq.cqe}')
        npolled, _ = cq.poll(4)
        check(npolled == 0, 'completions in a fresh CQ')
    cq.req_notify(0)
    cq.req_notify(1)
    cq.close()
    ctx.close()


def make_rc_qp(pd, cq, send_wr=64, recv_wr=64, send_sge=4, recv_sge=4, inline=64):
    cap = QPCap(max_send_wr=send_wr, max_recv_wr=recv_wr, max_send_sge=send_sge,
                max_recv_sge=recv_sge, max_inline_data=inline)
    init = QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap, sq_sig_all=1)
    return QP(pd, init)


def case_qp_create(dev):
    ctx = Context(name=dev)
    attr = ctx.query_device()
    pd = PD(ctx)
    cq = CQ(ctx, 256, None, None, 0)
    qpns = set()
    qps = []
    for (sw, rw, ss, rs, il) in ((1, 1, 1, 1, 0), (64, 64, 4, 4, 64), (100, 1000, 16, 32, 256),
                                  (attr.max_qp_wr, attr.max_qp_wr, attr.max_sge, attr.max_sge, 512)):
        qp = make_rc_qp(pd, cq, sw, rw, ss, rs, il)
        check(qp.qp_num not in (0, 1) and qp.qp_num not in qpns, f'QPN {qp.qp_num}')
        qpns.add(qp.qp_num)
        qa, qi = qp.query(e.IBV_QP_STATE | e.IBV_QP_CAP)
        check(qa.qp_state == e.IBV_QPS_RESET, f'new QP in state {qa.qp_state}')
        c = qi.cap
        check(c.max_send_wr >= sw and c.max_recv_wr >= rw, f'caps {c.max_send_wr}/{c.max_recv_wr} < {sw}/{rw}')
        check(c.max_send_sge >= ss and c.max_recv_sge >= rs, f'sge {c.max_send_sge}/{c.max_recv_sge}')
        check(c.max_inline_data >= il, f'inline {c.max_inline_data} < {il}')
        qps.append(qp)
    refused(errno.EINVAL, lambda: make_rc_qp(pd, cq, send_wr=attr.max_qp_wr + 1), 'send_wr above max')
    refused(errno.EINVAL, lambda: make_rc_qp(pd, cq, recv_sge=attr.max_sge + 1), 'recv_sge above max')
    refused(errno.EINVAL, lambda: make_rc_qp(pd, cq, inline=4096), 'inline above max')
    uc = QPInitAttr(qp_type=e.IBV_QPT_UC, scq=cq, rcq=cq, cap=QPCap())
    refused(errno.EOPNOTSUPP, lambda: QP(pd, uc), 'UC QP')
    for qp in qps:
        qp.close()
    cq.close()
    pd.close()
    ctx.close()


class Side:
    def __init__(self, dev):
        self.ctx = Context(name=dev)
        self.pd = PD(self.ctx)
        self.cq = CQ(self.ctx, 64, None, None, 0)
        self.qp = make_rc_qp(self.pd, self.cq)
        self.mr = MR(self.pd, 4096, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
        self.gid_index, self.gid = roce_v2_ipv4_gid(self.ctx)


def rtr_attr(me, peer, psn=0x1234):
    a = QPAttr(qp_state=e.IBV_QPS_RTR)
    a.path_mtu = e.IBV_MTU_1024
    a.dest_qp_num = peer.qp.qp_num
    a.rq_psn = psn
    a.max_dest_rd_atomic = 4
    a.min_rnr_timer = 12
    gr = GlobalRoute(dgid=peer.gid, sgid_index=me.gid_index, hop_limit=64, traffic_class=2,
                     flow_label=0x1abc)
    a.ah_attr = AHAttr(gr=gr, is_global=1, port_num=1)
    return a


RTR_MASK = (e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU | e.IBV_QP_DEST_QPN |
            e.IBV_QP_RQ_PSN | e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER)
RTS_MASK = (e.IBV_QP_STATE | e.IBV_QP_TIMEOUT | e.IBV_QP_RETRY_CNT | e.IBV_QP_RNR_RETRY |
            e.IBV_QP_SQ_PSN | e.IBV_QP_MAX_QP_RD_ATOMIC)
INIT_MASK = e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS


def to_init(side):
    a = QPAttr(qp_state=e.IBV_QPS_INIT)
    a.pkey_index = 0
    a.port_num = 1
    a.qp_access_flags = e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ
    side.qp.modify(a, INIT_MASK)


def to_rts(side, psn=0x4321):
    a = QPAttr(qp_state=e.IBV_QPS_RTS)
    a.timeout = 14
    a.retry_cnt = 7
    a.rnr_retry = 7
    a.sq_psn = psn
    a.max_rd_atomic = 4
    side.qp.modify(a, RTS_MASK)


def case_qp_connect(dev, peer_dev):
    a, b = Side(dev), Side(peer_dev)
    # Invalid transitions and masks, with the errno pyverbs shows (EINVAL).
    refused(errno.EINVAL, lambda: to_rts(a), 'RESET -> RTS')
    refused(errno.EINVAL, lambda: a.qp.modify(rtr_attr(a, b), RTR_MASK), 'RESET -> RTR')
    bad = QPAttr(qp_state=e.IBV_QPS_INIT)
    refused(errno.EINVAL, lambda: a.qp.modify(bad, e.IBV_QP_STATE), 'RESET -> INIT without port/pkey/access')
    to_init(a)
    to_init(b)
    refused(errno.EINVAL, lambda: to_rts(a), 'INIT -> RTS')
    refused(errno.EINVAL, lambda: a.qp.modify(rtr_attr(a, b), RTR_MASK & ~e.IBV_QP_DEST_QPN),
            'INIT -> RTR without DEST_QPN')
    big = rtr_attr(a, b)
    big.max_dest_rd_atomic = 255
    refused(errno.EINVAL, lambda: a.qp.modify(big, RTR_MASK), 'max_dest_rd_atomic above max')
    a.qp.modify(rtr_attr(a, b, 0x1234), RTR_MASK)
    b.qp.modify(rtr_attr(b, a, 0x4321), RTR_MASK)
    to_rts(a, 0x4321)
    to_rts(b, 0x1234)
    qa, qi = a.qp.query(RTR_MASK | RTS_MASK | INIT_MASK)
    got = dict(state=qa.qp_state, dest=qa.dest_qp_num, rq_psn=qa.rq_psn, sq_psn=qa.sq_psn,
               mtu=qa.path_mtu, timeout=qa.timeout, retry=qa.retry_cnt, rnr=qa.rnr_retry,
               rd=qa.max_rd_atomic, drd=qa.max_dest_rd_atomic, rnr_timer=qa.min_rnr_timer,
               port=qa.port_num, access=qa.qp_access_flags, dgid=str(qa.ah_attr.dgid),
               sgid_index=qa.ah_attr.sgid_index, hop=qa.ah_attr.hop_limit,
               tclass=qa.ah_attr.traffic_class, flow=qa.ah_attr.flow_label)
    want = dict(state=e.IBV_QPS_RTS, dest=b.qp.qp_num, rq_psn=0x1234, sq_psn=0x4321,
                mtu=e.IBV_MTU_1024, timeout=14, retry=7, rnr=7, rd=4, drd=4, rnr_timer=12,
                port=1, access=e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ,
                dgid=str(b.gid), sgid_index=a.gid_index, hop=64, tclass=2, flow=0x1abc)
    check(got == want, f'query_qp: got {got}, want {want}')
    # RTS -> SQD -> RTS, RTS -> RTS, then RESET and back to INIT.
    a.qp.modify(QPAttr(qp_state=e.IBV_QPS_SQD), e.IBV_QP_STATE)
    check(a.qp.query(e.IBV_QP_STATE)[0].qp_state == e.IBV_QPS_SQD, 'not SQD')
    a.qp.modify(QPAttr(qp_state=e.IBV_QPS_RTS), e.IBV_QP_STATE)
    refused(errno.EINVAL, lambda: a.qp.modify(QPAttr(qp_state=e.IBV_QPS_RTR), e.IBV_QP_STATE), 'RTS -> RTR')
    a.qp.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
    a.qp.modify(QPAttr(qp_state=e.IBV_QPS_RESET), e.IBV_QP_STATE)
    to_init(a)
    check(a.qp.query(e.IBV_QP_STATE)[0].qp_state == e.IBV_QPS_INIT, 'not INIT after reset')


def poll_all(cq, want):
    wcs = []
    for _ in range(100):
        n, got = cq.poll(want - len(wcs))
        wcs += got[:n]
        if len(wcs) >= want:
            break
    return wcs


def case_flush(dev, peer_dev):
    a, b = Side(dev), Side(peer_dev)
    to_init(a)
    to_init(b)
    # Receives are posted into the shared ring: no kernel call.
    nrecv = 10
    for i in range(nrecv):
        a.qp.post_recv(RecvWR(wr_id=1000 + i, num_sge=1, sg=[SGE(a.mr.buf, 64, a.mr.lkey)]))
    # Posting a send before RTS fails (the doorbell says EINVAL), as with rdma_rxe.
    swr = SendWR(wr_id=5000, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(a.mr.buf, 16, a.mr.lkey)])
    refused(errno.EINVAL, lambda: a.qp.post_send(swr), 'post_send in INIT')
    npolled, _ = a.cq.poll(1)
    check(npolled == 0, 'a completion before the flush')
    a.qp.modify(rtr_attr(a, b), RTR_MASK)
    to_rts(a)
    nsend = 3
    for i in range(nsend):
        a.qp.post_send(SendWR(wr_id=2000 + i, opcode=e.IBV_WR_SEND, num_sge=1,
                              sg=[SGE(a.mr.buf, 16, a.mr.lkey)]))
    # The refused post left its WQE in the ring (rdma-core writes it before the
    # doorbell), so it is flushed too, first.
    want = nrecv + 1 + nsend
    # Resize below the unpolled count is refused (nothing unpolled yet: any size fits).
    a.qp.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
    refused(errno.EINVAL, lambda: a.cq.resize(want - 2), 'resize below unpolled completions')
    a.cq.resize(want + 100)
    wcs = poll_all(a.cq, want)
    check(len(wcs) == want, f'{len(wcs)} completions, want {want}')
    for wc in wcs:
        check(wc.status == e.IBV_WC_WR_FLUSH_ERR, f'status {wc.status} of wr {wc.wr_id}')
        check(wc.qp_num == a.qp.qp_num, f'qp_num {wc.qp_num}')
    recv = [wc.wr_id for wc in wcs if wc.opcode == e.IBV_WC_RECV]
    send = [wc.wr_id for wc in wcs if wc.opcode == e.IBV_WC_SEND]
    check(recv == [1000 + i for i in range(nrecv)], f'receive wr_ids {recv}')
    check(send == [5000] + [2000 + i for i in range(nsend)], f'send wr_ids {send}')
    # In ERR, a new send is flushed at its doorbell.
    a.qp.post_send(SendWR(wr_id=7777, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
                          sg=[SGE(a.mr.buf, 8, a.mr.lkey)]))
    wcs = poll_all(a.cq, 1)
    check(len(wcs) == 1 and wcs[0].wr_id == 7777 and wcs[0].status == e.IBV_WC_WR_FLUSH_ERR
          and wcs[0].opcode == e.IBV_WC_RDMA_WRITE, f'post in ERR: {wcs}')
    npolled, _ = a.cq.poll(1)
    check(npolled == 0, 'extra completions')


def poll_until(cq, want, seconds=30):
    """Completions from cq until want arrived or seconds passed (the VM is slow)."""
    wcs, end = [], time.monotonic() + seconds
    while len(wcs) < want and time.monotonic() < end:
        n, got = cq.poll(want - len(wcs))
        wcs += got[:n]
        if n == 0:
            time.sleep(0.01)
    return wcs


def async_event(ctx, want, what):
    ev = ctx.get_async_event()
    check(ev.event_type == want, f'{what}: async event {ev.event_type}, want {want}')
    ev.ack()


def connect(a, b):
    to_init(a)
    to_init(b)
    a.qp.modify(rtr_attr(a, b, 0x1234), RTR_MASK)
    b.qp.modify(rtr_attr(b, a, 0x4321), RTR_MASK)
    to_rts(a, 0x4321)
    to_rts(b, 0x1234)


def case_srq(dev, peer_dev):
    a, b = Side(dev), Side(peer_dev)
    d = b.ctx.query_device()
    check(d.max_srq > 0 and d.max_srq_wr > 0 and d.max_srq_sge > 0,
          f'max_srq {d.max_srq} max_srq_wr {d.max_srq_wr} max_srq_sge {d.max_srq_sge}')
    refused(errno.EINVAL, lambda: SRQ(b.pd, SrqInitAttr(SrqAttr(max_wr=d.max_srq_wr + 1))),
            'max_wr above max_srq_wr')
    refused(errno.EINVAL, lambda: SRQ(b.pd, SrqInitAttr(SrqAttr(max_wr=16, max_sge=d.max_srq_sge + 1))),
            'max_sge above max_srq_sge')
    srq = SRQ(b.pd, SrqInitAttr(SrqAttr(max_wr=16, max_sge=2)))
    q = srq.query()
    check(q.max_wr >= 16 and q.max_sge >= 2 and q.srq_limit == 0,
          f'query_srq: max_wr {q.max_wr} max_sge {q.max_sge} limit {q.srq_limit}')
    refused(errno.EINVAL, lambda: srq.modify(SrqAttr(srq_limit=q.max_wr + 1), e.IBV_SRQ_LIMIT),
            'limit above max_wr')
    srq.modify(SrqAttr(srq_limit=4), e.IBV_SRQ_LIMIT)
    check(srq.query().srq_limit == 4, 'limit not armed')
    # B's QP receives from the SRQ: no receive ring of its own.
    b.qp.close()
    cap = QPCap(max_send_wr=16, max_recv_wr=0, max_send_sge=1, max_recv_sge=0)
    b.qp = QP(b.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=b.cq, rcq=b.cq, srq=srq, cap=cap, sq_sig_all=1))
    for i in range(8):
        srq.post_recv(RecvWR(wr_id=300 + i, num_sge=1, sg=[SGE(b.mr.buf + 64 * i, 64, b.mr.lkey)]))
    connect(a, b)
    n = 5
    for i in range(n):
        a.mr.write(bytes([i + 1]) * 32, 32, 2048 + 32 * i)
        a.qp.post_send(SendWR(wr_id=i, opcode=e.IBV_WR_SEND, num_sge=1,
                              sg=[SGE(a.mr.buf + 2048 + 32 * i, 32, a.mr.lkey)]))
    wa = poll_until(a.cq, n)
    check(len(wa) == n and all(w.status == e.IBV_WC_SUCCESS for w in wa),
          f'sends: {[(w.wr_id, w.status) for w in wa]}')
    wb = poll_until(b.cq, n)
    got = [(w.wr_id, w.status, w.opcode, w.byte_len, w.qp_num) for w in wb]
    want = [(300 + i, e.IBV_WC_SUCCESS, e.IBV_WC_RECV, 32, b.qp.qp_num) for i in range(n)]
    check(got == want, f'receives: got {got}, want {want}')
    for i in range(n):
        check(b.mr.read(32, 64 * i) == bytes([i + 1]) * 32, f'receive {i}: wrong bytes')
    # 3 WQEs left, below the limit of 4: the event fires once and disarms the limit.
    async_event(b.ctx, e.IBV_EVENT_SRQ_LIMIT_REACHED, 'SRQ below its limit')
    check(srq.query().srq_limit == 0, 'limit still armed after its event')
    # Resizing keeps the 3 waiting WQEs (305..307) in order and holds more than before.
    refused(errno.EINVAL, lambda: srq.modify(SrqAttr(max_wr=d.max_srq_wr + 1), e.IBV_SRQ_MAX_WR),
            'resize above max_srq_wr')
    refused(errno.EINVAL, lambda: srq.modify(SrqAttr(max_wr=1), e.IBV_SRQ_MAX_WR),
            'resize below the WQEs waiting')
    refused(errno.EINVAL, lambda: srq.modify(SrqAttr(max_wr=64, srq_limit=65),
                                             e.IBV_SRQ_MAX_WR | e.IBV_SRQ_LIMIT),
            'resize with a limit above max_wr')
    srq.modify(SrqAttr(max_wr=64), e.IBV_SRQ_MAX_WR)
    q = srq.query()
    check(q.max_wr >= 64 and q.srq_limit == 0, f'after resize: max_wr {q.max_wr} limit {q.srq_limit}')
    for i in range(8, 48):
        srq.post_recv(RecvWR(wr_id=300 + i, num_sge=1, sg=[SGE(b.mr.buf + 64 * i, 64, b.mr.lkey)]))
    for first in range(n, 45, 8):
        batch = range(first, min(first + 8, 45))
        for i in batch:
            a.mr.write(bytes([i + 1]) * 32, 32, 2048 + 32 * i)
            a.qp.post_send(SendWR(wr_id=i, opcode=e.IBV_WR_SEND, num_sge=1,
                                  sg=[SGE(a.mr.buf + 2048 + 32 * i, 32, a.mr.lkey)]))
        wa = poll_until(a.cq, len(batch))
        check(len(wa) == len(batch) and all(w.status == e.IBV_WC_SUCCESS for w in wa),
              f'sends after resize: {[(w.wr_id, w.status) for w in wa]}')
        wb = poll_until(b.cq, len(batch))
        got = [(w.wr_id, w.status, w.byte_len) for w in wb]
        want = [(300 + i, e.IBV_WC_SUCCESS, 32) for i in batch]
        check(got == want, f'receives after resize: got {got}, want {want}')
    for i in range(n, 45):
        check(b.mr.read(32, 64 * i) == bytes([i + 1]) * 32, f'receive {i} after resize: wrong bytes')
    check(srq.query().max_wr == q.max_wr, 'max_wr changed by traffic')
    # In ERR the QP takes no more WQEs: LAST_WQE_REACHED, and the SRQ's WQEs stay there.
    b.qp.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
    async_event(b.ctx, e.IBV_EVENT_QP_LAST_WQE_REACHED, 'SRQ QP in ERR')
    npolled, _ = b.cq.poll(1)
    check(npolled == 0, 'the SRQ\'s WQEs were flushed with the QP')


def qp_attr(state, **fields):
    a = QPAttr(qp_state=state)
    for k, v in fields.items():
        setattr(a, k, v)
    return a


def rdma(wr_id, opcode, mr, off, length, rmr, roff):
    wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1, send_flags=e.IBV_SEND_SIGNALED,
                sg=[SGE(mr.buf + off, length, mr.lkey)])
    wr.set_wr_rdma(rmr.rkey, rmr.buf + roff)
    return wr


def completed(cq, ids, what):
    wcs = poll_until(cq, len(ids))
    got = [(w.wr_id, w.status) for w in wcs]
    check(got == [(i, e.IBV_WC_SUCCESS) for i in ids], f'{what}: completions {got}, want {ids}')


def case_qp_modify_live(dev, peer_dev):
    """Modifying a QP that moved data: RTS -> RTS goes on where the streams were;
    SQD finishes what was started, starts nothing new (the QP still answers its
    peer), raises SQ_DRAINED, takes new limits and resumes at SQD -> RTS."""
    a, b = Side(dev), Side(peer_dev)
    acc = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ
    piece = 2048
    ma, mb = MR(a.pd, 32 * piece, acc), MR(b.pd, 32 * piece, acc)
    connect(a, b)
    step = iter(range(1, 1000))

    def pattern(k):
        return bytes((k * 37 + i) % 251 for i in range(piece))

    def write_read(k, who=a, src=ma, dst=mb):
        """WRITE piece k from src to dst, READ it back into src's upper half."""
        src.write(pattern(k), piece, k * piece)
        who.qp.post_send(rdma(next(step), e.IBV_WR_RDMA_WRITE, src, k * piece, piece, dst, k * piece))
        check(len(poll_until(who.cq, 1)) == 1, f'WRITE {k} did not complete')
        who.qp.post_send(rdma(next(step), e.IBV_WR_RDMA_READ, src, (16 + k) * piece, piece, dst, k * piece))
        check(len(poll_until(who.cq, 1)) == 1, f'READ {k} did not complete')
        check(dst.read(piece, k * piece) == pattern(k), f'piece {k} not written')
        check(src.read(piece, (16 + k) * piece) == pattern(k), f'piece {k} not read back')

    # WRITEs and READs only: no SEND has used a receive yet.
    write_read(1)
    a.qp.modify(qp_attr(e.IBV_QPS_RTS, min_rnr_timer=14), e.IBV_QP_STATE | e.IBV_QP_MIN_RNR_TIMER)
    write_read(2)
    a.qp.modify(QPAttr(qp_state=e.IBV_QPS_RTS), e.IBV_QP_STATE)
    write_read(3)
    check(mb.read(piece, piece) == pattern(1), 'piece 1 overwritten')
    # RTS -> SQD with notification: the 4 WRITEs handed over before it complete, the
    # 2 posted in SQD wait.
    first = [100 + k for k in range(4, 8)]
    for k in range(4, 8):
        ma.write(pattern(k), piece, k * piece)
    for k, wr_id in zip(range(4, 8), first):
        a.qp.post_send(rdma(wr_id, e.IBV_WR_RDMA_WRITE, ma, k * piece, piece, mb, k * piece))
    a.qp.modify(qp_attr(e.IBV_QPS_SQD, en_sqd_async_notify=1),
                e.IBV_QP_STATE | e.IBV_QP_EN_SQD_ASYNC_NOTIFY)
    held = [100 + k for k in range(8, 10)]
    for k, wr_id in zip(range(8, 10), held):
        ma.write(pattern(k), piece, k * piece)
        a.qp.post_send(rdma(wr_id, e.IBV_WR_RDMA_WRITE, ma, k * piece, piece, mb, k * piece))
    async_event(a.ctx, e.IBV_EVENT_SQ_DRAINED, 'SQD')
    completed(a.cq, first, 'WRITEs started before SQD')
    q = a.qp.query(e.IBV_QP_STATE)[0]
    check(q.qp_state == e.IBV_QPS_SQD and q.sq_draining == 0,
          f'after SQ_DRAINED: state {q.qp_state} sq_draining {q.sq_draining}')
    # The peer's requests are still served by the drained QP.
    write_read(10, who=b, src=mb, dst=ma)
    time.sleep(1)
    n, _ = a.cq.poll(1)
    check(n == 0, 'a WRITE posted in SQD completed')
    for k in range(8, 10):
        check(mb.read(piece, k * piece) == bytes(piece), f'WRITE {k} posted in SQD was executed')
    # SQD -> SQD: new send-side limits, applied when the QP resumes.
    mask = (e.IBV_QP_STATE | e.IBV_QP_MAX_QP_RD_ATOMIC | e.IBV_QP_RETRY_CNT | e.IBV_QP_TIMEOUT |
            e.IBV_QP_RNR_RETRY)
    a.qp.modify(qp_attr(e.IBV_QPS_SQD, max_rd_atomic=1, retry_cnt=5, timeout=16, rnr_retry=6),
                mask)
    q = a.qp.query(mask)[0]
    got = (q.qp_state, q.max_rd_atomic, q.retry_cnt, q.timeout, q.rnr_retry)
    check(got == (e.IBV_QPS_SQD, 1, 5, 16, 6), f'after SQD -> SQD: {got}')
    a.qp.modify(QPAttr(qp_state=e.IBV_QPS_RTS), e.IBV_QP_STATE)
    completed(a.cq, held, 'WRITEs posted in SQD, after SQD -> RTS')
    for k in range(4, 10):
        check(mb.read(piece, k * piece) == pattern(k), f'piece {k} not written')
    # One READ at a time now: 6 in a row still all complete, in order.
    reads = [200 + k for k in range(4, 10)]
    for k, wr_id in zip(range(4, 10), reads):
        a.qp.post_send(rdma(wr_id, e.IBV_WR_RDMA_READ, ma, (16 + k) * piece, piece, mb, k * piece))
    completed(a.cq, reads, 'READs after SQD -> RTS')
    for k in range(4, 10):
        check(ma.read(piece, (16 + k) * piece) == pattern(k), f'piece {k} not read back')
    # And SENDs: the receive stream goes on too.
    b.qp.post_recv(RecvWR(wr_id=9, num_sge=1, sg=[SGE(b.mr.buf, 64, b.mr.lkey)]))
    a.mr.write(b'q' * 64, 64, 0)
    a.qp.post_send(SendWR(wr_id=300, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(a.mr.buf, 64, a.mr.lkey)]))
    completed(a.cq, [300], 'SEND')
    completed(b.cq, [9], 'receive')
    check(b.mr.read(64, 0) == b'q' * 64, 'SEND bytes')
    a.qp.modify(QPAttr(qp_state=e.IBV_QPS_RTS), e.IBV_QP_STATE)
    write_read(11)


def case_comm_est(dev, peer_dev):
    """The first request reaching a QP in RTR raises IBV_EVENT_COMM_EST, once; the
    data lands as in RTS."""
    a = Side(dev)
    before = event_fds()
    b = Side(peer_dev)
    new = event_fds() - before
    check(len(new) == 1, f'cannot tell the async event fd among {new}')
    async_fd = new.pop()[0]
    acc = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ
    ma, mb = MR(a.pd, 4096, acc), MR(b.pd, 4096, acc)
    to_init(a)
    to_init(b)
    a.qp.modify(rtr_attr(a, b, 0x1234), RTR_MASK)
    b.qp.modify(rtr_attr(b, a, 0x4321), RTR_MASK)
    to_rts(a, 0x4321)
    # B stays in RTR, as a passive side whose RTU is late.
    check(not select.select([async_fd], [], [], 0.5)[0], 'an async event before any request')
    ma.write(b'w' * 256, 256, 0)
    a.qp.post_send(rdma(1, e.IBV_WR_RDMA_WRITE, ma, 0, 256, mb, 0))
    completed(a.cq, [1], 'WRITE to a QP in RTR')
    async_event(b.ctx, e.IBV_EVENT_COMM_EST, 'first request in RTR')
    check(mb.read(256, 0) == b'w' * 256, 'WRITE to a QP in RTR: bytes')
    b.qp.post_recv(RecvWR(wr_id=7, num_sge=1, sg=[SGE(b.mr.buf, 64, b.mr.lkey)]))
    a.qp.post_send(SendWR(wr_id=2, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(a.mr.buf, 16, a.mr.lkey)]))
    completed(a.cq, [2], 'SEND to a QP in RTR')
    completed(b.cq, [7], 'receive in RTR')
    to_rts(b, 0x1234)
    b.qp.post_send(rdma(3, e.IBV_WR_RDMA_READ, mb, 1024, 256, ma, 0))
    completed(b.cq, [3], 'READ once in RTS')
    check(mb.read(256, 1024) == b'w' * 256, 'READ back: bytes')
    check(not select.select([async_fd], [], [], 1.0)[0], 'a second async event')


def event_fds():
    """(fd, target) of this process's uverbs event files (async events, completion channels)."""
    fds = set()
    for name in os.listdir('/proc/self/fd'):
        try:
            target = os.readlink(f'/proc/self/fd/{name}')
        except OSError:
            continue
        if 'infinibandevent' in target:
            fds.add((int(name), target))
    return fds


def case_solicited(dev, peer_dev):
    """A CQ armed for solicited completions only wakes for a SEND with IBV_SEND_SOLICITED."""
    a, b = Side(dev), Side(peer_dev)
    before = event_fds()
    ch = CompChannel(b.ctx)
    new = event_fds() - before
    check(len(new) == 1, f'cannot tell the completion channel\'s fd among {new}')
    fd = new.pop()[0]

    def woken(seconds):
        """The channel has an event (select does not consume it)."""
        return bool(select.select([fd], [], [], seconds)[0])

    b.qp.close()
    b.cq = CQ(b.ctx, 64, None, ch, 0)
    b.qp = make_rc_qp(b.pd, b.cq)
    connect(a, b)
    for i in range(2):
        b.qp.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(b.mr.buf + 64 * i, 64, b.mr.lkey)]))
    b.cq.req_notify(1)

    def send(wr_id, flags):
        a.qp.post_send(SendWR(wr_id=wr_id, opcode=e.IBV_WR_SEND, num_sge=1, send_flags=flags,
                              sg=[SGE(a.mr.buf, 16, a.mr.lkey)]))
        check(len(poll_until(a.cq, 1)) == 1, f'send {wr_id} did not complete')
        check(len(poll_until(b.cq, 1)) == 1, f'SEND {wr_id} not received')

    send(7, e.IBV_SEND_SIGNALED)
    check(not woken(1), 'a CQ armed for solicited completions woke for an unsolicited SEND')
    send(8, e.IBV_SEND_SIGNALED | e.IBV_SEND_SOLICITED)
    check(woken(10), 'no completion event for a solicited SEND')
    ch.get_cq_event(b.cq)
    b.cq.ack_events(1)


def case_cq_overflow(dev):
    ctx = Context(name=dev)
    pd = PD(ctx)
    cq = CQ(ctx, 1, None, None, 0)
    qp = make_rc_qp(pd, cq, recv_wr=8)
    mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)
    to_init_plain(qp)
    n = cq.cqe + 3
    for i in range(n):
        qp.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(mr.buf, 8, mr.lkey)]))
    qp.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
    ev = ctx.get_async_event()
    check(ev.event_type == e.IBV_EVENT_CQ_ERR, f'async event {ev.event_type}, want CQ_ERR')
    ev.ack()
    wcs = poll_all(cq, cq.cqe)
    check(len(wcs) == cq.cqe, f'{len(wcs)} completions in a CQ of {cq.cqe}')


def to_init_plain(qp):
    a = QPAttr(qp_state=e.IBV_QPS_INIT)
    a.pkey_index = 0
    a.port_num = 1
    a.qp_access_flags = 0
    qp.modify(a, INIT_MASK)


def case_ah(dev, peer_dev):
    me, peer = Context(name=dev), Context(name=peer_dev)
    idx, _ = roce_v2_ipv4_gid(me)
    _, pgid = roce_v2_ipv4_gid(peer)
    pd = PD(me)
    ahs = []
    for i in range(8):
        gr = GlobalRoute(dgid=pgid, sgid_index=idx, hop_limit=64)
        ahs.append(AH(pd, attr=AHAttr(gr=gr, is_global=1, port_num=1)))
    for ah in ahs:
        ah.close()
    gr = GlobalRoute(dgid=pgid, sgid_index=200)
    try:
        AH(pd, attr=AHAttr(gr=gr, is_global=1, port_num=1))
    except PyverbsRDMAError:
        pass
    else:
        raise Fail('AH with a nonexistent source GID index accepted')
    pd.close()


UD_MASK_INIT = e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_QKEY


def make_ud_qp(side, qkey):
    cap = QPCap(max_send_wr=16, max_recv_wr=16, max_send_sge=1, max_recv_sge=1)
    qp = QP(side.pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=side.cq, rcq=side.cq, cap=cap, sq_sig_all=1))
    a = QPAttr(qp_state=e.IBV_QPS_INIT)
    a.pkey_index = 0
    a.port_num = 1
    a.qkey = qkey
    qp.modify(a, UD_MASK_INIT)
    qp.modify(QPAttr(qp_state=e.IBV_QPS_RTR), e.IBV_QP_STATE)
    a = QPAttr(qp_state=e.IBV_QPS_RTS)
    a.sq_psn = 0
    qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_SQ_PSN)
    return qp


def ud_send(side, qp, ah, dest, qkey, length, imm=None):
    """Sends length bytes of side.mr at 2048 (pattern 0x5a) to dest; returns the sender's status."""
    side.mr.write(b'\x5a' * length, length, 2048)
    op = e.IBV_WR_SEND_WITH_IMM if imm is not None else e.IBV_WR_SEND
    wr = SendWR(wr_id=length, opcode=op, num_sge=1, sg=[SGE(side.mr.buf + 2048, length, side.mr.lkey)])
    if imm is not None:
        wr.imm_data = imm
    wr.set_wr_ud(ah, dest.qp_num, qkey)
    qp.post_send(wr)
    wcs = poll_until(side.cq, 1)
    check(len(wcs) == 1 and wcs[0].wr_id == length, f'no send completion for {length} B')
    return wcs[0].status


def case_ud(dev, peer_dev):
    a, b = Side(dev), Side(peer_dev)
    qa, qb = make_ud_qp(a, 0x1111), make_ud_qp(b, 0x2222)
    qa2 = make_ud_qp(a, 0x2222)
    ah = AH(a.pd, attr=AHAttr(gr=GlobalRoute(dgid=b.gid, sgid_index=a.gid_index, hop_limit=64),
                              is_global=1, port_num=1))
    for i in range(3):
        qb.post_recv(RecvWR(wr_id=100 + i, num_sge=1, sg=[SGE(b.mr.buf + 1024 * i, 40 + 256, b.mr.lkey)]))
    # A datagram with immediate data: GRH area, then the payload.
    st = ud_send(a, qa, ah, qb, 0x2222, 200, imm=0x12345678)
    check(st == e.IBV_WC_SUCCESS, f'send status {st}')
    wb = poll_until(b.cq, 1)
    check(len(wb) == 1, 'datagram not received')
    w = wb[0]
    got = (w.wr_id, w.status, w.opcode, w.byte_len, w.src_qp, w.qp_num, bool(w.wc_flags & e.IBV_WC_GRH),
           bool(w.wc_flags & e.IBV_WC_WITH_IMM), w.imm_data)
    want = (100, e.IBV_WC_SUCCESS, e.IBV_WC_RECV, 240, qa.qp_num, qb.qp_num, True, True, 0x12345678)
    check(got == want, f'UD receive: got {got}, want {want}')
    grh = b.mr.read(40, 0)
    check(grh[:20] == bytes(20) and grh[20] == 0x45 and grh[29] == 17,
          f'GRH area is not 20 zero bytes and an IPv4/UDP header: {grh.hex()}')
    # mroce0 is 198.18.0.1, mroce1 198.18.0.2 (verbs_objects.sh).
    check(list(grh[32:40]) == [198, 18, 0, 1, 198, 18, 0, 2], f'GRH addresses {list(grh[32:40])}')
    check(b.mr.read(200, 40) == b'\x5a' * 200, 'UD payload differs')
    # A wrong Q_Key: dropped, no completion at the receiver.
    check(ud_send(a, qa, ah, qb, 0x3333, 64) == e.IBV_WC_SUCCESS, 'send with wrong Q_Key failed locally')
    # The QP's own Q_Key (high bit of the WR's): qa2 has the receiver's.
    check(ud_send(a, qa2, ah, qb, 0x80000000, 64) == e.IBV_WC_SUCCESS, 'send with own Q_Key failed')
    wb = poll_until(b.cq, 2, seconds=5)
    got = [(w.wr_id, w.byte_len, w.src_qp) for w in wb]
    check(got == [(101, 104, qa2.qp_num)], f'after a wrong and a right Q_Key: {got}, want one from {qa2.qp_num}')
    # A receive too short for GRH and payload: LOC_LEN_ERR, nothing placed, QP usable.
    check(ud_send(a, qa, ah, qb, 0x2222, 280) == e.IBV_WC_SUCCESS, 'send of 280 B failed')
    wb = poll_until(b.cq, 1)
    check(len(wb) == 1 and wb[0].wr_id == 102 and wb[0].status == e.IBV_WC_LOC_LEN_ERR,
          f'short receive: {[(w.wr_id, w.status) for w in wb]}')
    check(qb.query(e.IBV_QP_STATE)[0].qp_state == e.IBV_QPS_RTS, 'UD QP left RTS after a short receive')
    # Larger than the port MTU: a local length error at the sender.
    mtu = 128 << a.ctx.query_port(1).active_mtu
    check(ud_send(a, qa, ah, qb, 0x2222, mtu + 1) == e.IBV_WC_LOC_LEN_ERR, f'{mtu + 1} B over MTU {mtu} sent')


def case_ud_dst(dev, peer_dev):
    """[MR-UD-5]: a datagram routed to the peer's interface for an address that is not
    one of the peer device's (198.18.9.2, on the peer namespace's lo; ud.sh adds it and
    the route) is dropped; the same datagram to the device's address is received."""
    a, b = Side(dev), Side(peer_dev)
    qa, qb = make_ud_qp(a, 0x1111), make_ud_qp(b, 0x2222)
    for i in range(2):
        qb.post_recv(RecvWR(wr_id=100 + i, num_sge=1, sg=[SGE(b.mr.buf + 1024 * i, 40 + 256, b.mr.lkey)]))
    other = GID(str(b.gid)[:-9] + 'c612:0902')
    for dgid, want in ((other, []), (b.gid, [100])):
        ah = AH(a.pd, attr=AHAttr(gr=GlobalRoute(dgid=dgid, sgid_index=a.gid_index, hop_limit=64),
                                  is_global=1, port_num=1))
        check(ud_send(a, qa, ah, qb, 0x2222, 64) == e.IBV_WC_SUCCESS, f'send to {dgid} failed locally')
        got = [w.wr_id for w in poll_until(b.cq, 1, seconds=3)]
        check(got == want, f'datagram to {dgid}: received {got}, want {want}')


def case_max_conns(dev, peer_dev, limit):
    """[MR-SEC-9]: with max_conns=limit, RTR of a QP to a new peer address beyond the
    limit fails with ENOSPC; QPs to the peers already connected still bind.
    device_lifecycle.sh gives the peer's vethB the addresses 198.18.0.2 to .9."""
    limit = int(limit)
    a, b = Side(dev), Side(peer_dev)
    prefix = str(b.gid)[:-4]
    qps = []

    def rtr(host):
        qp = make_rc_qp(a.pd, a.cq)
        qps.append(qp)
        s = Side.__new__(Side)
        s.qp = qp
        to_init(s)
        attr = rtr_attr(a, b)
        attr.ah_attr = AHAttr(gr=GlobalRoute(dgid=GID(prefix + f'{host:04x}'), sgid_index=a.gid_index,
                                             hop_limit=64), is_global=1, port_num=1)
        qp.modify(attr, RTR_MASK)

    for i in range(limit):
        rtr(2 + i)
    refused(errno.ENOSPC, lambda: rtr(2 + limit), f'RTR to peer {limit + 1} of max_conns {limit}')
    rtr(2)
    for qp in qps:
        qp.close()
    # The connections went with their QPs: a new peer is taken again.
    rtr(2 + limit)
    print(f'max_conns {limit}: peer {limit + 1} refused with ENOSPC, taken once the others went')


def case_conn_memory(dev, peer_dev, n, flag):
    """Holds RC QPs in RTR to n peer addresses (198.18.0.2 on, each one connection)
    until flag.go exists, with flag.ready written once they are; then destroys them
    and writes flag.done. device_lifecycle.sh reads the memory cgroup in between."""
    n = int(n)
    a, b = Side(dev), Side(peer_dev)
    prefix = str(b.gid)[:-4]
    qps = []
    for i in range(n):
        qp = make_rc_qp(a.pd, a.cq)
        qps.append(qp)
        s = Side.__new__(Side)
        s.qp = qp
        to_init(s)
        attr = rtr_attr(a, b)
        attr.ah_attr = AHAttr(gr=GlobalRoute(dgid=GID(prefix + f'{2 + i:04x}'), sgid_index=a.gid_index,
                                             hop_limit=64), is_global=1, port_num=1)
        qp.modify(attr, RTR_MASK)
    open(flag + '.ready', 'w').close()
    end = time.monotonic() + 60
    while not os.path.exists(flag + '.go') and time.monotonic() < end:
        time.sleep(0.05)
    for qp in qps:
        qp.close()
    open(flag + '.done', 'w').close()
    end = time.monotonic() + 60
    while not os.path.exists(flag + '.exit') and time.monotonic() < end:
        time.sleep(0.05)


def fill_to_limit(make, limit, what):
    """Creates objects with make() until one is refused, which must be with ENOMEM,
    after at most limit and at least limit - 16 (the kernel holds a few objects of its
    own: the MAD layer's PD, CQ and QP). A unit freed can be taken again."""
    objs = []
    while True:
        try:
            objs.append(make())
        except PyverbsRDMAError as ex:
            check(ex.error_code == errno.ENOMEM,
                  f'{what} {len(objs) + 1}: errno {ex.error_code}, expected ENOMEM')
            break
        check(len(objs) <= limit, f'{what}: {len(objs)} created, max_{what.lower()} {limit}')
    check(len(objs) >= limit - 16, f'{what}: refused after {len(objs)} of {limit}')
    objs.pop().close()
    objs.append(make())
    print(f'{what}: {len(objs)} created of max {limit}, then ENOMEM')
    return objs


def case_limits(dev):
    """One kind, CQs, up to its limit: the count is the same code (rdma::quota) for all
    six kinds; SRQs as well, 16384 more objects, took another 160 s under TCG."""
    ctx = Context(name=dev)
    attr = ctx.query_device()
    cqs = fill_to_limit(lambda: CQ(ctx, 1, None, None, 0), attr.max_cq, 'CQ')
    for o in cqs:
        o.close()
    ctx.close()


CASES = {
    'mr': case_mr, 'cq': case_cq, 'qp_create': case_qp_create, 'qp_connect': case_qp_connect,
    'flush': case_flush, 'cq_overflow': case_cq_overflow, 'ah': case_ah, 'srq': case_srq,
    'ud': case_ud, 'ud_dst': case_ud_dst, 'max_conns': case_max_conns,
    'conn_memory': case_conn_memory, 'solicited': case_solicited, 'limits': case_limits,
    'qp_modify_live': case_qp_modify_live, 'comm_est': case_comm_est,
}

if __name__ == '__main__':
    try:
        CASES[sys.argv[1]](*sys.argv[2:])
    except (Fail, PyverbsRDMAError) as ex:
        print(f'FAIL: {type(ex).__name__}: {ex}')
        sys.exit(1)
