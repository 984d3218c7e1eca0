#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
#
# Many RC QPs between two devices: N pairs created, connected, used (one SEND per
# pair, content checked) and destroyed, with the kernel memory they take and the
# connection sharing visible in the device counters.
#   many_qps.py DEV PEER_DEV N
# Prints "memory: ..." and "counters: ..." lines; exits 0 on success, 1 with the
# reason on failure.

import subprocess
import sys
import time

import pyverbs.enums as e
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QPAttr
from pyverbs.wr import SGE, RecvWR, SendWR

sys.path.insert(0, sys.path[0])
from verbs_objects import (RTR_MASK, RTS_MASK, Fail, Side, check, make_rc_qp,  # noqa: E402
                           poll_until, rtr_attr, to_init, to_rts)

MSG = 64


def meminfo():
    """Kernel memory in KiB: slab plus vmalloc (the rings are vmalloc_user)."""
    m = {}
    with open('/proc/meminfo') as f:
        for line in f:
            k, v = line.split(':')
            m[k] = int(v.split()[0])
    return m['Slab'] + m['VmallocUsed']


def counters(dev):
    out = subprocess.run(['rdma', 'statistic', 'show', 'link', f'{dev}/1'], capture_output=True,
                         text=True, check=True).stdout.split()
    return {out[i]: int(out[i + 1]) for i in range(len(out) - 1) if out[i + 1].isdigit()}


class Pair:
    """One QP on each side, handled as the Side helpers expect."""

    def __init__(self, a, b, i):
        self.a = Side.__new__(Side)
        self.b = Side.__new__(Side)
        for mine, side in ((self.a, a), (self.b, b)):
            mine.ctx, mine.pd, mine.cq, mine.mr = side.ctx, side.pd, side.cq, side.mr
            mine.gid_index, mine.gid = side.gid_index, side.gid
            mine.qp = make_rc_qp(side.pd, side.cq, send_wr=2, recv_wr=2, send_sge=1, recv_sge=1, inline=0)


def main(dev, peer_dev, n):
    a, b = Side(dev), Side(peer_dev)
    # One CQ per side for all QPs, with room for every completion.
    from pyverbs.cq import CQ
    from pyverbs.mr import MR
    for s in (a, b):
        s.qp.close()
        s.cq = CQ(s.ctx, 2 * n + 16, None, None, 0)
        s.mr = MR(s.pd, MSG * n, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
    c0 = (counters(dev), counters(peer_dev))
    m0 = meminfo()
    t0 = time.monotonic()
    pairs = [Pair(a, b, i) for i in range(n)]
    m1 = meminfo()
    for p in pairs:
        to_init(p.a)
        to_init(p.b)
        p.a.qp.modify(rtr_attr(p.a, p.b, 0x1000), RTR_MASK)
        p.b.qp.modify(rtr_attr(p.b, p.a, 0x2000), RTR_MASK)
        to_rts(p.a, 0x2000)
        to_rts(p.b, 0x1000)
    m2 = meminfo()
    c1 = (counters(dev), counters(peer_dev))
    t1 = time.monotonic()
    for i, p in enumerate(pairs):
        p.b.qp.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(b.mr.buf + MSG * i, MSG, b.mr.lkey)]))
    for i, p in enumerate(pairs):
        a.mr.write(i.to_bytes(4, 'little') * (MSG // 4), MSG, MSG * i)
        p.a.qp.post_send(SendWR(wr_id=i, opcode=e.IBV_WR_SEND, num_sge=1,
                                sg=[SGE(a.mr.buf + MSG * i, MSG, a.mr.lkey)]))
    wa = poll_until(a.cq, n, seconds=300)
    wb = poll_until(b.cq, n, seconds=300)
    t2 = time.monotonic()
    check(len(wa) == n and all(w.status == e.IBV_WC_SUCCESS for w in wa),
          f'{len(wa)} of {n} sends completed; failed: {[(w.wr_id, w.status) for w in wa if w.status][:5]}')
    check(len(wb) == n and all(w.status == e.IBV_WC_SUCCESS for w in wb),
          f'{len(wb)} of {n} receives completed; failed: {[(w.wr_id, w.status) for w in wb if w.status][:5]}')
    qpn_of = {p.b.qp.qp_num: i for i, p in enumerate(pairs)}
    for w in wb:
        check(qpn_of.get(w.qp_num) == w.wr_id, f'receive {w.wr_id} completed on QP {w.qp_num}')
        got = b.mr.read(MSG, MSG * w.wr_id)
        check(got == w.wr_id.to_bytes(4, 'little') * (MSG // 4), f'QP pair {w.wr_id}: wrong bytes')
    opened = [c1[k]['conns_opened'] - c0[k]['conns_opened'] for k in (0, 1)]
    bound = [c1[k]['qps_bound'] - c0[k]['qps_bound'] for k in (0, 1)]
    print(f'counters: {n} QP pairs bound {bound[0]} + {bound[1]} times over {opened[0]} + {opened[1]} '
          f'connection(s); conns_open {c1[0]["conns_open"]} + {c1[1]["conns_open"]}')
    check(bound == [n, n], f'qps_bound grew by {bound}, want {n} on each side')
    check(opened == [1, 1] and c1[0]['conns_open'] == 1 and c1[1]['conns_open'] == 1,
          f'{opened} connections opened, {c1[0]["conns_open"]}/{c1[1]["conns_open"]} open: want one per side')
    per_qp = (m1 - m0) / (2 * n)
    per_binding = (m2 - m1) / (2 * n)
    print(f'memory: {per_qp:.1f} KiB per QP created (rings, objects), {per_binding:.1f} KiB more per QP '
          f'bound to the connection (its stream state), {(m2 - m0) / 1024:.1f} MiB for {2 * n} QPs; '
          f'create+connect {t1 - t0:.1f} s, {n} SENDs {t2 - t1:.1f} s')
    for p in pairs:
        p.a.qp.close()
        p.b.qp.close()
    c2 = (counters(dev), counters(peer_dev))
    check(c2[0]['conns_open'] == 0 and c2[1]['conns_open'] == 0,
          f'connections still open after destroying every QP: {c2[0]["conns_open"]}/{c2[1]["conns_open"]}')


if __name__ == '__main__':
    try:
        main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
    except (Fail, PyverbsRDMAError) as ex:
        print(f'FAIL: {type(ex).__name__}: {ex}')
        sys.exit(1)
