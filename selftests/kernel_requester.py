#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""A kernel RC QP as the requester of every opcode against the userspace endpoint
(selftests/user_interop.sh, issue 36): the reverse of `metaroce-user check`.

    kernel_requester.py DEV PEER_IP USER_CMD...

Creates an RC QP on DEV (an unmodified pyverbs program), starts `USER_CMD server`
(metaroce-user, typically under `ip netns exec`) for that QPN with its own QPN 0x21,
PSN 0 both ways and a 1 MiB region, brings the QP to RTS towards PEER_IP, then:
WRITEs of 1 B .. 64 KiB at scattered offsets, each READ back and compared; SENDs of
the same sizes, each echo compared; FETCH_ADD and CMP_SWAP, each original value
compared with what the region held. Prints one `ok` line per check; exits 0, or 1
saying what differed.
"""

import random
import subprocess
import sys
import time
from types import SimpleNamespace

import pyverbs.enums as e
from pyverbs.addr import GID
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

from rc_common import Fail, check, poll, roce_v2_ipv4_gid, status_name, to_init, to_rtr, to_rts

USER_QPN, REGION, RKEY, VA = 0x21, 1 << 20, 0x1234, 0x10000
SIZES = (1, 8, 1024, 1025, 65536)
LOCAL = e.IBV_ACCESS_LOCAL_WRITE


def main():
    dev, peer, user_cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
    ctx = Context(name=dev)
    pd = PD(ctx)
    scq, rcq = CQ(ctx, 64, None, None, 0), CQ(ctx, 64, None, None, 0)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=scq, rcq=rcq, sq_sig_all=1,
                           cap=QPCap(max_send_wr=16, max_recv_wr=16, max_send_sge=1,
                                     max_recv_sge=1)))
    src, dst = MR(pd, REGION, LOCAL), MR(pd, REGION, LOCAL)
    gid_index, _ = roce_v2_ipv4_gid(ctx)
    user = subprocess.Popen(user_cmd + [
        'server', '--peer', own_address(ctx, gid_index), '--bind', peer, '--qpn', hex(USER_QPN), '--peer-qpn', hex(qp.qp_num), '--psn', '0',
        '--peer-psn', '0', '--rkey', hex(RKEY), '--va', hex(VA), '--region', str(REGION),
        '--time', '240'], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        run(qp, scq, rcq, src, dst, gid_index, peer)
    finally:
        user.kill()
        out, _ = user.communicate()
        for line in out.splitlines()[-4:]:
            print(f'user: {line}')


def own_address(ctx, gid_index):
    """This QP's IPv4 address, from its GID: the server's --peer."""
    text = str(ctx.query_gid(1, gid_index))
    return '.'.join(str(b) for b in bytes.fromhex(text[30:].replace(':', '')))


def post(qp, scq, wr, what):
    qp.post_send(wr)
    wc = poll(scq, 1, 60, what)[0]
    check(wc.status == e.IBV_WC_SUCCESS, f'{what}: {status_name(wc.status)}')
    return wc


def rdma(opcode, mr, length, raddr, wr_id=1):
    wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1, sg=[SGE(mr.buf, length, mr.lkey)])
    wr.set_wr_rdma(RKEY, raddr)
    return wr


def run(qp, scq, rcq, src, dst, gid_index, peer):
    me = SimpleNamespace(qp=qp, gid_index=gid_index)
    user = SimpleNamespace(qp=SimpleNamespace(qp_num=USER_QPN),
                           gid=GID('0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x'
                                   % tuple(int(x) for x in peer.split('.'))))
    to_init(me, e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ)
    to_rtr(me, user, 0)
    to_rts(me, 0)
    rng = random.Random(36)
    # The server starts listening a moment after it is spawned: the first WRITE's
    # retries (RC timeouts of 67 ms, 7 of them) cover that.
    time.sleep(0.5)
    for size in SIZES:
        off = rng.randrange(0, REGION // 2 - size) & ~7
        data = bytes(rng.getrandbits(8) for _ in range(size))
        src.write(data, size, 0)
        post(qp, scq, rdma(e.IBV_WR_RDMA_WRITE, src, size, VA + off), f'WRITE {size} B')
        post(qp, scq, rdma(e.IBV_WR_RDMA_READ, dst, size, VA + off), f'READ {size} B')
        check(dst.read(size, 0) == data, f'READ back of a {size}-byte WRITE differs')
        print(f'ok WRITE and READ back, {size} B at +{off:#x}')
    for size in SIZES:
        data = bytes(rng.getrandbits(8) for _ in range(size))
        src.write(data, size, 0)
        qp.post_recv(RecvWR(wr_id=2, num_sge=1, sg=[SGE(dst.buf, REGION, dst.lkey)]))
        post(qp, scq, SendWR(wr_id=3, opcode=e.IBV_WR_SEND, num_sge=1,
                             sg=[SGE(src.buf, size, src.lkey)]), f'SEND {size} B')
        wc = poll(rcq, 1, 60, f'echo of a {size}-byte SEND')[0]
        check(wc.status == e.IBV_WC_SUCCESS and wc.byte_len == size,
              f'echo of a {size}-byte SEND: {status_name(wc.status)}, {wc.byte_len} B')
        check(dst.read(size, 0) == data, f'echo of a {size}-byte SEND differs')
        print(f'ok SEND and its echo, {size} B')
    # Atomics on a zeroed word past the written half of the region.
    target = VA + REGION // 2 + 64
    steps = [('FETCH_ADD 5', e.IBV_WR_ATOMIC_FETCH_AND_ADD, 5, 0, 0),
             ('FETCH_ADD 7', e.IBV_WR_ATOMIC_FETCH_AND_ADD, 7, 0, 5),
             ('CMP_SWAP 12 -> 99', e.IBV_WR_ATOMIC_CMP_AND_SWP, 12, 99, 12),
             ('CMP_SWAP 12 -> 1 (no match)', e.IBV_WR_ATOMIC_CMP_AND_SWP, 12, 1, 99)]
    for what, opcode, compare_add, swap, want in steps:
        wr = SendWR(wr_id=4, opcode=opcode, num_sge=1, sg=[SGE(dst.buf, 8, dst.lkey)])
        wr.set_wr_atomic(RKEY, target, compare_add, swap)
        post(qp, scq, wr, what)
        orig = int.from_bytes(dst.read(8, 0), sys.byteorder)
        check(orig == want, f'{what}: original value {orig}, want {want}')
        print(f'ok {what}: original value {orig}')


if __name__ == '__main__':
    try:
        main()
    except Fail as err:
        print(f'FAIL {err}')
        sys.exit(1)
