#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Malformed MADs at a device's QP1, the GSI QP the kernel's CM listens on
(selftests/hostile_packets.sh, issue 35).

    cm_mads.py FROM_DEV TO_ADDR COUNT SEED

A UD QP on FROM_DEV with the GSI Q_Key (0x80010000; root may set a controlled one)
sends COUNT 256-byte MADs to QPN 1 of the device whose IPv4 address is TO_ADDR: CM
MADs (class 0x07) of every method and attribute with random fields (REQ, REP, RTU,
REJ, DREQ, DREP, MRA, LAP, APR, SIDR and unknown attributes; communication ids,
service ids, lengths and counts at boundary values), other management classes and
versions, and random bytes. ib_core's MAD and CM layers parse them above the
driver: nothing may crash or hang, and the connection manager must keep serving
(hostile_packets.sh runs rping meanwhile). Prints what it sent; exits 0.
"""

import random
import struct
import sys
import time

import pyverbs.enums as e
from pyverbs.addr import AH, AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, SendWR

from rc_common import roce_v2_ipv4_gid

GSI_QKEY = 0x80010000
MAD_LEN = 256
CM_CLASS = 0x07
# CM attribute ids (IB spec 12.6): ClassPortInfo, REQ .. SIDR_REP, and some unknown.
CM_ATTRS = [0x0001, 0x0010, 0x0011, 0x0012, 0x0013, 0x0014, 0x0015, 0x0016, 0x0017, 0x0018,
            0x0019, 0x001A, 0x0000, 0x00FF, 0xFFFF]
METHODS = [0x01, 0x02, 0x03, 0x05, 0x06, 0x07, 0x81, 0x82, 0x86, 0x00, 0x7F, 0xFF]
BOUNDARY32 = [0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]


def mad(rng):
    """One MAD: mostly CM with a valid common header and random or boundary fields."""
    kind = rng.random()
    if kind < 0.1:
        return bytes(rng.getrandbits(8) for _ in range(MAD_LEN))
    mgmt_class = CM_CLASS if kind < 0.8 else rng.choice([0x01, 0x03, 0x04, 0x06, 0x81, 0x10])
    base_version = 1 if rng.random() < 0.9 else rng.choice([0, 2, 0xFF])
    class_version = 2 if rng.random() < 0.8 else rng.choice([0, 1, 3, 0xFF])
    hdr = struct.pack('>BBBBHHQHHI', base_version, mgmt_class, class_version,
                      rng.choice(METHODS), rng.choice([0, 0, 0x8000, 0xFFFF]), 0,
                      rng.getrandbits(64), rng.choice(CM_ATTRS), 0,
                      rng.choice(BOUNDARY32 + [rng.getrandbits(32)]))
    body = bytearray(rng.getrandbits(8) for _ in range(MAD_LEN - len(hdr)))
    # Communication ids, service ids, QPNs, lengths at boundary values.
    for _ in range(rng.randrange(0, 6)):
        i = rng.randrange(0, len(body) - 4) & ~3
        body[i:i + 4] = struct.pack('>I', rng.choice(BOUNDARY32))
    if rng.random() < 0.3:
        body = body[:rng.randrange(0, len(body))]
    return hdr + bytes(body)


def main():
    dev, to_addr, count, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    rng = random.Random(seed)
    ctx = Context(name=dev)
    pd = PD(ctx)
    cq = CQ(ctx, 256, None, None, 0)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq, rcq=cq, sq_sig_all=1,
                           cap=QPCap(max_send_wr=64, max_recv_wr=1, max_send_sge=1,
                                     max_recv_sge=1)))
    a = QPAttr(qp_state=e.IBV_QPS_INIT)
    a.pkey_index, a.port_num, a.qkey = 0, 1, GSI_QKEY
    qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_QKEY)
    qp.modify(QPAttr(qp_state=e.IBV_QPS_RTR), e.IBV_QP_STATE)
    a = QPAttr(qp_state=e.IBV_QPS_RTS)
    a.sq_psn = 0
    qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_SQ_PSN)
    gid_index, _ = roce_v2_ipv4_gid(ctx)
    dgid = GID('0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x'
               % tuple(int(x) for x in to_addr.split('.')))
    ah = AH(pd, attr=AHAttr(gr=GlobalRoute(dgid=dgid, sgid_index=gid_index, hop_limit=64),
                            is_global=1, port_num=1))
    mr = MR(pd, MAD_LEN * 64, e.IBV_ACCESS_LOCAL_WRITE)
    sent = failed = 0
    start = time.monotonic()
    for i in range(count):
        slot = i % 64
        m = mad(rng)
        mr.write(m, len(m), slot * MAD_LEN)
        wr = SendWR(wr_id=i, opcode=e.IBV_WR_SEND, num_sge=1,
                    sg=[SGE(mr.buf + slot * MAD_LEN, len(m), mr.lkey)])
        # The high bit: the QP's own (controlled) Q_Key goes on the wire.
        wr.set_wr_ud(ah, 1, 0x80000000)
        qp.post_send(wr)
        n, wcs = cq.poll(1)
        while n == 0:
            time.sleep(0.0005)
            n, wcs = cq.poll(1)
        sent += 1
        failed += wcs[0].status != e.IBV_WC_SUCCESS
    print(f'sent {sent} MADs to QP1 of {to_addr} in {time.monotonic() - start:.1f} s '
          f'({failed} send completions in error)')


if __name__ == '__main__':
    main()
