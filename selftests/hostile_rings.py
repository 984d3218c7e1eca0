# SPDX-License-Identifier: GPL-2.0
#
# A hostile local user (issue 35, item 4): the rings a user QP, SRQ and CQ share with
# the kernel are plain memory of the process, so it can write anything into them
# while the kernel reads them. Two RC QPs (mroce0 and mroce1, one receiving from an
# SRQ) and their CQs are set up and connected; then, for SECONDS, writer threads put
# random bytes at random places of every uverbs mapping (indices, ring headers, WQEs:
# opcodes, SGE counts and lengths, keys, addresses, inline sizes, AH numbers) while
# this process keeps posting sends, receives and SRQ receives, which makes the kernel
# read the rings, and polling the CQs.
#
# The provider reads the same memory, so this process may die of SIGSEGV or SIGBUS:
# that is user space's own business and allowed. What is checked by
# hostile_packets.sh afterwards is the kernel's side: no splat, every QP and
# connection gone once the process is, and the devices still carrying a
# content-checked ping-pong.
#
#   hostile_rings.py DEV PEER_DEV SECONDS WRITERS SEED

import ctypes
import random
import sys
import threading
import time

import pyverbs.enums as e
from pyverbs.pyverbs_error import PyverbsError, PyverbsRDMAError
from pyverbs.qp import QPCap, QPInitAttr, QP
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
from pyverbs.wr import RecvWR, SendWR, SGE

from rc_common import Side, connect


def uverbs_mappings():
    """(start, length) of every mapping of a uverbs device file: the queues."""
    maps = []
    with open('/proc/self/maps') as f:
        for line in f:
            if '/dev/infiniband/uverbs' in line:
                start, end = (int(x, 16) for x in line.split()[0].split('-'))
                maps.append((start, end - start))
    return maps


def scribble(maps, rnd, deadline):
    """A writer: random bytes, words and indices at random places of the queues."""
    while time.monotonic() < deadline:
        start, length = rnd.choice(maps)
        kind = rnd.randrange(4)
        if kind == 0 and rnd.randrange(64) == 0:
            # The ring header's element size and index mask: the provider reads them
            # too, and dies of them at once, so rarely.
            off, data = rnd.choice((0, 4)), rnd.getrandbits(32).to_bytes(4, 'little')
        elif kind <= 1:    # an index one off, or far off
            off = rnd.choice((128, 256, 384)) if length > 384 else 0
            data = rnd.choice((1, 0xffffffff, 0x7fffffff, rnd.getrandbits(32))).to_bytes(4, 'little')
        elif kind == 2:    # a WQE or CQE field
            off, data = rnd.randrange(0, length - 8, 4), rnd.getrandbits(64).to_bytes(8, 'little')
        else:              # a run of garbage
            n = rnd.randrange(1, 256)
            off, data = rnd.randrange(0, length - n), rnd.randbytes(n)
        ctypes.memmove(start + off, data, len(data))


def main():
    dev, peer_dev, seconds, writers, seed = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    a, b = Side(dev), Side(peer_dev)
    srq = SRQ(b.pd, SrqInitAttr(SrqAttr(max_wr=64, max_sge=4)))
    b.qp = QP(b.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=b.scq, rcq=b.rcq, srq=srq,
                               cap=QPCap(max_send_wr=64, max_recv_wr=64, max_send_sge=4,
                                         max_recv_sge=4, max_inline_data=0), sq_sig_all=1))
    connect(a, b)
    mra, mrb = a.mr(1 << 16), b.mr(1 << 16)
    maps = uverbs_mappings()
    print(f'{len(maps)} uverbs mappings, {sum(m[1] for m in maps)} bytes', flush=True)
    deadline = time.monotonic() + seconds
    threads = [threading.Thread(target=scribble, args=(maps, random.Random(seed * 100 + w), deadline))
               for w in range(writers)]
    for t in threads:
        t.start()

    rnd = random.Random(seed)
    rounds = posted = errors = 0
    while time.monotonic() < deadline:
        rounds += 1
        try:
            length = rnd.choice((0, 1, 4096, 65536, 1 << 20, 0xffffffff))
            sge = SGE(mra.buf, length & 0xffffffff, rnd.choice((mra.lkey, mra.lkey ^ 0x100, 0)))
            op = rnd.choice((e.IBV_WR_SEND, e.IBV_WR_RDMA_WRITE, e.IBV_WR_RDMA_READ))
            wr = SendWR(wr_id=posted, opcode=op, num_sge=1, sg=[sge])
            if op != e.IBV_WR_SEND:
                wr.set_wr_rdma(rnd.choice((mrb.rkey, mrb.rkey + 1)), mrb.buf + rnd.randrange(0, 1 << 17))
            a.qp.post_send(wr)
            srq.post_recv(RecvWR(wr_id=posted, num_sge=1, sg=[SGE(mrb.buf, 4096, mrb.lkey)]))
            a.qp.post_recv(RecvWR(wr_id=posted, num_sge=1, sg=[SGE(mra.buf, 4096, mra.lkey)]))
            b.qp.post_send(SendWR(wr_id=posted, opcode=e.IBV_WR_SEND, num_sge=1,
                                  sg=[SGE(mrb.buf, 512, mrb.lkey)]))
            posted += 1
        except (PyverbsError, PyverbsRDMAError):
            errors += 1
        for cq in (a.scq, a.rcq, b.scq, b.rcq):
            try:
                cq.poll(16)
            except (PyverbsError, PyverbsRDMAError):
                errors += 1
        if rounds % 64 == 0:
            # Progress, for when the provider dies of the garbage (SIGSEGV).
            print(f'{posted} rounds posted, {errors} refused', flush=True)
            time.sleep(0.001)
    for t in threads:
        t.join()
    print(f'{posted} rounds posted, {errors} refused: done', flush=True)


if __name__ == '__main__':
    main()
