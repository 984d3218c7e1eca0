# SPDX-License-Identifier: GPL-2.0
#
# The extended verbs of the rxe provider and the device attributes, through pyverbs,
# one case per run (selftests/xverbs.sh): two devices (mroce0 on vethA, mroce1 on
# vethB) opened by one process, as rc_common.py does.
#
#   attrs DEV             the device attributes common checks read (rxe's values where
#                         the provider or the tests depend on them)
#   qp_ex DEV PEER        every ibv_qp_ex builder on RC, data and atomics checked, the
#                         completions read through ibv_cq_ex
#   ud_ex DEV PEER        ibv_wr_set_ud_addr on a UD QP, the receive read through ibv_cq_ex
#   rereg DEV PEER        re-registration of the access rights and the PD (the uverbs
#                         REREG_MR command: rdma-core's rxe provider has no rereg_mr), with
#                         traffic after it, and the accesses that must then fail

import ctypes
import errno
import os
import socket
import struct
import sys
import time

import pyverbs.enums as e
from pyverbs.addr import AH, AHAttr, GlobalRoute
from pyverbs.cq import CQEX, CqInitAttrEx
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QPAttr, QPCap, QPEx, QPInitAttrEx
from pyverbs.wr import SGE, RecvWR

from rc_common import ACCESS_ALL, Fail, check, roce_v2_ipv4_gid

RXE = os.environ.get("MROCE_TYPE") == "rxe"

# What the rxe provider's ibv_create_cq_ex accepts (providers/rxe/rxe.c).
WC_FLAGS = (e.IBV_WC_EX_WITH_BYTE_LEN | e.IBV_WC_EX_WITH_IMM | e.IBV_WC_EX_WITH_QP_NUM |
            e.IBV_WC_EX_WITH_SRC_QP | e.IBV_WC_EX_WITH_SLID | e.IBV_WC_EX_WITH_SL |
            e.IBV_WC_EX_WITH_DLID_PATH_BITS)
RC_OPS = (e.IBV_QP_EX_WITH_SEND | e.IBV_QP_EX_WITH_SEND_WITH_IMM | e.IBV_QP_EX_WITH_RDMA_WRITE |
          e.IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | e.IBV_QP_EX_WITH_RDMA_READ |
          e.IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | e.IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)
INIT_MASK = e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS
RTR_MASK = (e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU | e.IBV_QP_DEST_QPN |
            e.IBV_QP_RQ_PSN | e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER)
RTS_MASK = (e.IBV_QP_STATE | e.IBV_QP_TIMEOUT | e.IBV_QP_RETRY_CNT | e.IBV_QP_RNR_RETRY |
            e.IBV_QP_SQ_PSN | e.IBV_QP_MAX_QP_RD_ATOMIC)
WC_NAMES = {v: k for k, v in vars(e).items() if k.startswith('IBV_WC_') and not k.startswith('IBV_WC_EX')}


def uverbs_fds():
    """This process's uverbs command files (one per open device context)."""
    fds = set()
    for name in os.listdir('/proc/self/fd'):
        try:
            if os.readlink(f'/proc/self/fd/{name}').startswith('/dev/infiniband/uverbs'):
                fds.add(int(name))
        except OSError:
            continue
    return fds


class Side:
    """One end: context, PD, an extended CQ for sends and one for receives, an extended
    QP, and a 64 KiB MR with every right."""

    def __init__(self, dev, qp_type=e.IBV_QPT_RC, ops=RC_OPS, inline=64):
        self.dev = dev
        before = uverbs_fds()
        self.ctx = Context(name=dev)
        new = uverbs_fds() - before
        self.cmd_fd = new.pop() if len(new) == 1 else None
        self.pd = PD(self.ctx)
        self.scq = CQEX(self.ctx, CqInitAttrEx(cqe=256, wc_flags=WC_FLAGS))
        self.rcq = CQEX(self.ctx, CqInitAttrEx(cqe=256, wc_flags=WC_FLAGS))
        cap = QPCap(max_send_wr=64, max_recv_wr=64, max_send_sge=4, max_recv_sge=4,
                    max_inline_data=inline)
        ia = QPInitAttrEx(qp_type=qp_type, scq=self.scq, rcq=self.rcq, pd=self.pd, cap=cap,
                          sq_sig_all=0,
                          comp_mask=e.IBV_QP_INIT_ATTR_PD | e.IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
                          send_ops_flags=ops)
        self.qp = QPEx(self.ctx, ia)
        self.gid_index, self.gid = roce_v2_ipv4_gid(self.ctx)
        self.mr = MR(self.pd, 65536, ACCESS_ALL)

    def recv(self, wr_id, off, length, mr=None):
        mr = mr or self.mr
        self.qp.post_recv(RecvWR(wr_id=wr_id, num_sge=1, sg=[SGE(mr.buf + off, length, mr.lkey)]))


def connect(a, b, access=ACCESS_ALL & ~e.IBV_ACCESS_LOCAL_WRITE):
    for me in (a, b):
        at = QPAttr(qp_state=e.IBV_QPS_INIT)
        at.pkey_index = 0
        at.port_num = 1
        at.qp_access_flags = access
        me.qp.modify(at, INIT_MASK)
    for me, peer in ((a, b), (b, a)):
        at = QPAttr(qp_state=e.IBV_QPS_RTR)
        at.path_mtu = e.IBV_MTU_1024
        at.dest_qp_num = peer.qp.qp_num
        at.rq_psn = 0x100
        at.max_dest_rd_atomic = 16
        at.min_rnr_timer = 1
        gr = GlobalRoute(dgid=peer.gid, sgid_index=me.gid_index, hop_limit=64)
        at.ah_attr = AHAttr(gr=gr, is_global=1, port_num=1)
        me.qp.modify(at, RTR_MASK)
    for me in (a, b):
        at = QPAttr(qp_state=e.IBV_QPS_RTS)
        at.timeout = 14
        at.retry_cnt = 7
        at.rnr_retry = 7
        at.sq_psn = 0x100
        at.max_rd_atomic = 16
        me.qp.modify(at, RTS_MASK)


class Wc:
    """One completion as read through the ibv_cq_ex accessors."""

    def __str__(self):
        return (f'wr_id={self.wr_id} status={WC_NAMES.get(self.status, self.status)} '
                f'opcode={self.opcode} byte_len={self.byte_len} imm={self.imm:#x} '
                f'qp_num={self.qp_num} src_qp={self.src_qp} wc_flags={self.wc_flags:#x} '
                f'slid={self.slid} sl={self.sl} dlid_path_bits={self.dlid_path_bits}')


def read_wc(cq):
    w = Wc()
    w.wr_id = cq.wr_id
    w.status = cq.status
    w.opcode = cq.read_opcode()
    w.byte_len = cq.read_byte_len()
    w.wc_flags = cq.read_wc_flags()
    # pyverbs returns the __be32 as stored; the builders took it in host order.
    w.imm = socket.ntohl(cq.read_imm_data()) if w.wc_flags & e.IBV_WC_WITH_IMM else 0
    w.qp_num = cq.read_qp_num()
    w.src_qp = cq.read_src_qp()
    w.slid, w.sl, w.dlid_path_bits = cq.read_slid(), cq.read_sl(), cq.read_dlid_path_bits()
    return w


def poll_ex(cq, want, timeout=30.0, what='completions'):
    """ibv_start_poll/ibv_next_poll/ibv_end_poll until want completions; returns them.

    rdma-core's rxe provider (libibverbs 44, the provider of rxe and metaroce alike)
    ends the batch itself when ibv_next_poll returns ENOENT (it stores the consumer
    index and unlocks): calling ibv_end_poll after that would skip a completion and
    unlock twice, so a batch ends with ibv_end_poll only after a successful read."""
    wcs = []
    deadline = time.monotonic() + timeout
    while len(wcs) < want:
        ret = cq.start_poll(None)
        if ret == errno.ENOENT:
            if time.monotonic() > deadline:
                raise Fail(f'{what}: {len(wcs)} of {want} after {timeout:.0f} s')
            time.sleep(0.001)
            continue
        check(ret == 0, f'{what}: ibv_start_poll returned {ret}')
        wcs.append(read_wc(cq))
        ended = False
        while len(wcs) < want:
            ret = cq.poll_next()
            if ret == errno.ENOENT:
                ended = True
                break
            check(ret == 0, f'{what}: ibv_next_poll returned {ret}')
            wcs.append(read_wc(cq))
        if not ended:
            cq.end_poll()
    return wcs


DEVIATIONS = []


def deviation(cond, what):
    """A check where rdma_rxe is known to differ: recorded on rxe (the case ends as
    XFAIL, exit 2), a failure on metaroce."""
    if cond:
        return
    if not RXE:
        raise Fail(what)
    print(f'rxe deviation: {what}')
    DEVIATIONS.append(what)


def expect(wc, what, **fields):
    for k, v in fields.items():
        got = getattr(wc, k)
        check(got == v, f'{what}: {k} {got!r}, expected {v!r} ({wc})')


def post(side, wr_id, build, sges=None, inline=None, flags=e.IBV_SEND_SIGNALED, ud=None):
    """One work request through the ibv_qp_ex builders: wr_start, wr_id/wr_flags, the
    opcode builder, the UD address, the SGE(s) or inline data, wr_complete."""
    qp = side.qp
    qp.wr_start()
    qp.wr_id = wr_id
    qp.wr_flags = flags
    build(qp)
    if ud:
        qp.wr_set_ud_addr(*ud)
    if inline is not None:
        qp.wr_set_inline_data(*inline)
    elif sges is not None and len(sges) == 1:
        s = sges[0]
        qp.wr_set_sge(s)
    elif sges is not None:
        qp.wr_set_sge_list(len(sges), sges)
    qp.wr_complete()


def pattern(n, seed):
    return bytes((seed + 7 * i) % 251 for i in range(n))


def case_attrs(dev):
    """The values rxe reports where the provider or common tests read them, and only
    capability flags for what works."""
    ctx = Context(name=dev)
    a = ctx.query_device()
    print(f'vendor_id {a.vendor_id:#x} vendor_part_id {a.vendor_part_id} hw_ver {a.hw_ver:#x} '
          f'fw_ver {a.fw_version!r} sys_image_guid {a.sys_image_guid:#x} node_guid {a.node_guid:#x} '
          f'device_cap_flags {a.device_cap_flags:#x} atomic_caps {a.atomic_caps} max_mw {a.max_mw}')
    check(a.vendor_id == 0xFFFFFF, f'vendor_id {a.vendor_id:#x}, rxe reports 0xffffff')
    check(a.vendor_part_id == 0, f'vendor_part_id {a.vendor_part_id}, rxe reports 0')
    check(a.sys_image_guid != 0 and a.sys_image_guid == a.node_guid,
          f'sys_image_guid {a.sys_image_guid:#x} is not the node GUID {a.node_guid:#x}')
    check(a.atomic_caps == e.IBV_ATOMIC_HCA, f'atomic_caps {a.atomic_caps}, expected IBV_ATOMIC_HCA')
    flags = a.device_cap_flags
    must = (e.IBV_DEVICE_PORT_ACTIVE_EVENT | e.IBV_DEVICE_SYS_IMAGE_GUID |
            e.IBV_DEVICE_RC_RNR_NAK_GEN)
    check(flags & must == must, f'device_cap_flags {flags:#x} lack {must & ~flags:#x}')
    # Not implemented here: memory windows, automatic path migration, SRQ resize,
    # fast registration (MEM_MGT_EXTENSIONS: no kernel ULP uses the device's MRs).
    never = (e.IBV_DEVICE_MEM_WINDOW | e.IBV_DEVICE_MEM_WINDOW_TYPE_2B |
             e.IBV_DEVICE_AUTO_PATH_MIG | e.IBV_DEVICE_MEM_MGT_EXTENSIONS)
    if RXE:
        print(f'rxe: device_cap_flags {flags & never:#x} of {never:#x}, max_mw {a.max_mw} (rxe has them)')
    else:
        check(flags & never == 0, f'device_cap_flags {flags:#x} claim {flags & never:#x}')
        check(a.max_mw == 0, f'max_mw {a.max_mw}: memory windows are not implemented')
    check(a.max_qp_wr >= 16384 and a.max_sge == 32 and a.max_sge_rd == 32,
          f'max_qp_wr {a.max_qp_wr} max_sge {a.max_sge} max_sge_rd {a.max_sge_rd}')
    check(a.max_qp_rd_atom == 128 and a.max_qp_init_rd_atom == 128,
          f'max_qp_rd_atom {a.max_qp_rd_atom} max_qp_init_rd_atom {a.max_qp_init_rd_atom}')
    check(a.max_res_rd_atom > 0, f'max_res_rd_atom {a.max_res_rd_atom}')
    check(a.max_pkeys >= 1 and a.phys_port_cnt == 1, f'max_pkeys {a.max_pkeys} ports {a.phys_port_cnt}')
    # fw_ver: the provider prints the kernel's 64-bit fw_ver as major.minor.sub_minor.
    fw = a.fw_version.decode() if isinstance(a.fw_version, bytes) else str(a.fw_version)
    check(fw.count('.') == 2, f'fw_ver {fw!r}')
    ctx.close()


def case_qp_ex(dev, peer_dev):
    a, b = Side(dev), Side(peer_dev)
    connect(a, b)
    qa, qb = a.qp.qp_num, b.qp.qp_num

    # SEND, gathered from two SGEs (ibv_wr_set_sge_list).
    data = pattern(3000, 1)
    a.mr.write(data, len(data), 0)
    b.recv(1, 8192, 4096)
    post(a, 11, lambda q: q.wr_send(),
         sges=[SGE(a.mr.buf, 1000, a.mr.lkey), SGE(a.mr.buf + 1000, 2000, a.mr.lkey)])
    [s] = poll_ex(a.scq, 1, what='SEND completion')
    expect(s, 'SEND', wr_id=11, status=e.IBV_WC_SUCCESS, opcode=e.IBV_WC_SEND, qp_num=qa)
    [r] = poll_ex(b.rcq, 1, what='SEND receive')
    # RoCE has no LIDs; service level 0 (the QPs' AVs ask for none).
    expect(r, 'SEND recv', wr_id=1, status=e.IBV_WC_SUCCESS, opcode=e.IBV_WC_RECV, qp_num=qb,
           slid=0, sl=0, dlid_path_bits=0)
    check(not r.wc_flags & e.IBV_WC_WITH_IMM, f'SEND recv: wc_flags {r.wc_flags:#x} has WITH_IMM')
    deviation(r.byte_len == 3000 and b.mr.read(3000, 8192) == data,
              f'SEND of 2 SGEs (ibv_wr_set_sge_list): byte_len {r.byte_len} of 3000, '
              f'data {"equal" if b.mr.read(3000, 8192) == data else "differs"}')

    # SEND with immediate (ibv_wr_set_sge).
    data = pattern(100, 2)
    a.mr.write(data, len(data), 0)
    b.recv(2, 12288, 4096)
    post(a, 12, lambda q: q.wr_send_imm(0x1234abcd), sges=[SGE(a.mr.buf, 100, a.mr.lkey)])
    [s] = poll_ex(a.scq, 1, what='SEND_WITH_IMM completion')
    expect(s, 'SEND_WITH_IMM', wr_id=12, status=e.IBV_WC_SUCCESS, opcode=e.IBV_WC_SEND)
    [r] = poll_ex(b.rcq, 1, what='SEND_WITH_IMM receive')
    expect(r, 'SEND_WITH_IMM recv', wr_id=2, status=e.IBV_WC_SUCCESS, opcode=e.IBV_WC_RECV,
           byte_len=100, imm=0x1234abcd)
    check(r.wc_flags & e.IBV_WC_WITH_IMM, f'SEND_WITH_IMM recv: wc_flags {r.wc_flags:#x}')
    check(b.mr.read(100, 12288) == data, 'SEND_WITH_IMM: data differs')

    # Inline SEND (ibv_wr_set_inline_data, with IBV_SEND_INLINE in wr_flags as rxe needs):
    # the bytes are copied at posting time.
    data = pattern(48, 3)
    a.mr.write(data, len(data), 256)
    b.recv(3, 16384, 4096)
    post(a, 13, lambda q: q.wr_send(), inline=(a.mr.buf + 256, 48),
         flags=e.IBV_SEND_SIGNALED | e.IBV_SEND_INLINE)
    a.mr.write(b'\0' * 48, 48, 256)
    [s] = poll_ex(a.scq, 1, what='inline SEND completion')
    expect(s, 'inline SEND', wr_id=13, status=e.IBV_WC_SUCCESS, opcode=e.IBV_WC_SEND)
    [r] = poll_ex(b.rcq, 1, what='inline SEND receive')
    expect(r, 'inline SEND recv', wr_id=3, status=e.IBV_WC_SUCCESS, byte_len=48)
    check(b.mr.read(48, 16384) == data, 'inline SEND: data differs')

    # RDMA WRITE: no receive consumed.
    data = pattern(5000, 4)
    a.mr.write(data, len(data), 0)
    post(a, 14, lambda q: q.wr_rdma_write(b.mr.rkey, b.mr.buf + 20000), sges=[SGE(a.mr.buf, 5000, a.mr.lkey)])
    [s] = poll_ex(a.scq, 1, what='WRITE completion')
    expect(s, 'WRITE', wr_id=14, status=e.IBV_WC_SUCCESS, opcode=e.IBV_WC_RDMA_WRITE)
    check(b.mr.read(5000, 20000) == data, 'WRITE: data differs')

    # RDMA WRITE with immediate: the data, and a receive completion with the immediate.
    data = pattern(700, 5)
    a.mr.write(data, len(data), 0)
    b.recv(4, 0, 16)
    post(a, 15, lambda q: q.wr_rdma_write_imm(b.mr.rkey, b.mr.buf + 30000, 0xfeed0001),
         sges=[SGE(a.mr.buf, 700, a.mr.lkey)])
    [s] = poll_ex(a.scq, 1, what='WRITE_WITH_IMM completion')
    expect(s, 'WRITE_WITH_IMM', wr_id=15, status=e.IBV_WC_SUCCESS, opcode=e.IBV_WC_RDMA_WRITE)
    [r] = poll_ex(b.rcq, 1, what='WRITE_WITH_IMM receive')
    expect(r, 'WRITE_WITH_IMM recv', wr_id=4, status=e.IBV_WC_SUCCESS,
           opcode=e.IBV_WC_RECV_RDMA_WITH_IMM, byte_len=700, imm=0xfeed0001, qp_num=qb)
    check(b.mr.read(700, 30000) == data, 'WRITE_WITH_IMM: data differs')

    # RDMA READ into two local SGEs.
    data = pattern(2500, 6)
    b.mr.write(data, len(data), 40000)
    a.mr.write(b'\0' * 4096, 4096, 8192)
    post(a, 16, lambda q: q.wr_rdma_read(b.mr.rkey, b.mr.buf + 40000),
         sges=[SGE(a.mr.buf + 8192, 500, a.mr.lkey), SGE(a.mr.buf + 9000, 2000, a.mr.lkey)])
    [s] = poll_ex(a.scq, 1, what='READ completion')
    expect(s, 'READ', wr_id=16, status=e.IBV_WC_SUCCESS, opcode=e.IBV_WC_RDMA_READ)
    got = a.mr.read(500, 8192) + a.mr.read(2000, 9000)
    deviation(s.byte_len == 2500 and got == data,
              f'READ into 2 SGEs (ibv_wr_set_sge_list): byte_len {s.byte_len} of 2500, '
              f'data {"equal" if got == data else "differs"}')

    # Atomics: compare and swap (a match, then a mismatch), fetch and add.
    b.mr.write(struct.pack('<Q', 0x1111222233334444), 8, 50000)
    post(a, 17, lambda q: q.wr_atomic_cmp_swp(b.mr.rkey, b.mr.buf + 50000, 0x1111222233334444, 0xabcdef),
         sges=[SGE(a.mr.buf + 100, 8, a.mr.lkey)])
    post(a, 18, lambda q: q.wr_atomic_cmp_swp(b.mr.rkey, b.mr.buf + 50000, 0x5, 0x6),
         sges=[SGE(a.mr.buf + 108, 8, a.mr.lkey)])
    post(a, 19, lambda q: q.wr_atomic_fetch_add(b.mr.rkey, b.mr.buf + 50000, 0x100),
         sges=[SGE(a.mr.buf + 116, 8, a.mr.lkey)])
    wcs = poll_ex(a.scq, 3, what='atomic completions')
    for w, (i, op) in zip(wcs, [(17, e.IBV_WC_COMP_SWAP), (18, e.IBV_WC_COMP_SWAP), (19, e.IBV_WC_FETCH_ADD)]):
        expect(w, f'atomic {i}', wr_id=i, status=e.IBV_WC_SUCCESS, opcode=op, byte_len=8)
    got = struct.unpack('<3Q', a.mr.read(24, 100))
    check(got == (0x1111222233334444, 0xabcdef, 0xabcdef),
          f'atomic results {[hex(x) for x in got]}')
    final = struct.unpack('<Q', b.mr.read(8, 50000))[0]
    check(final == 0xabcdef + 0x100, f'atomic target {final:#x}, expected {0xabcdef + 0x100:#x}')

    # Unsignaled requests complete nothing; a signaled one after them does.
    a.mr.write(b'\x77' * 64, 64, 0)
    post(a, 20, lambda q: q.wr_rdma_write(b.mr.rkey, b.mr.buf + 60000), sges=[SGE(a.mr.buf, 64, a.mr.lkey)],
         flags=0)
    post(a, 21, lambda q: q.wr_rdma_write(b.mr.rkey, b.mr.buf + 60064), sges=[SGE(a.mr.buf, 64, a.mr.lkey)])
    [s] = poll_ex(a.scq, 1, what='signaled WRITE after an unsignaled one')
    expect(s, 'signaled WRITE', wr_id=21, status=e.IBV_WC_SUCCESS)
    check(b.mr.read(128, 60000) == b'\x77' * 128, 'unsignaled WRITE: data differs')

    # A batch of several builders between one wr_start and one wr_complete.
    a.mr.write(pattern(64, 9), 64, 0)
    b.recv(5, 0, 64)
    q = a.qp
    q.wr_start()
    q.wr_id, q.wr_flags = 30, e.IBV_SEND_SIGNALED
    q.wr_rdma_write(b.mr.rkey, b.mr.buf + 61000)
    q.wr_set_sge(SGE(a.mr.buf, 64, a.mr.lkey))
    q.wr_id, q.wr_flags = 31, e.IBV_SEND_SIGNALED
    q.wr_send()
    q.wr_set_sge(SGE(a.mr.buf, 64, a.mr.lkey))
    q.wr_complete()
    wcs = poll_ex(a.scq, 2, what='batch completions')
    check([w.wr_id for w in wcs] == [30, 31], f'batch completions {[str(w) for w in wcs]}')
    [r] = poll_ex(b.rcq, 1, what='batch receive')
    expect(r, 'batch recv', wr_id=5, byte_len=64, status=e.IBV_WC_SUCCESS)
    check(b.mr.read(64, 61000) == pattern(64, 9) and b.mr.read(64, 0) == pattern(64, 9),
          'batch: data differs')
    # Inline WRITE without IBV_SEND_INLINE in wr_flags (the provider's
    # wr_set_inline_data does not set it; mlx5 applications never do): metaroce takes
    # a WQE with a length and no SGE as inline; rdma_rxe fails it.
    data = pattern(40, 10)
    a.mr.write(data, len(data), 512)
    post(a, 32, lambda q: q.wr_rdma_write(b.mr.rkey, b.mr.buf + 62000), inline=(a.mr.buf + 512, 40))
    [s] = poll_ex(a.scq, 1, what='inline WRITE without the flag')
    deviation(s.status == e.IBV_WC_SUCCESS and b.mr.read(40, 62000) == data,
              f'inline WRITE without IBV_SEND_INLINE: {s}, data '
              f'{"equal" if b.mr.read(40, 62000) == data else "differs"}')
    if DEVIATIONS:
        sys.exit(2)
    print('qp_ex: SEND (2 SGEs), SEND_WITH_IMM, inline SEND, WRITE, WRITE_WITH_IMM, READ, '
          'CMP_AND_SWP (hit, miss), FETCH_AND_ADD, unsignaled, batch, inline WRITE without the flag: ok')


def case_ud_ex(dev, peer_dev):
    ops = e.IBV_QP_EX_WITH_SEND | e.IBV_QP_EX_WITH_SEND_WITH_IMM
    a, b = Side(dev, e.IBV_QPT_UD, ops), Side(peer_dev, e.IBV_QPT_UD, ops)
    for me in (a, b):
        at = QPAttr(qp_state=e.IBV_QPS_INIT)
        at.pkey_index = 0
        at.port_num = 1
        at.qkey = 0x11112222
        me.qp.modify(at, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_QKEY)
        me.qp.modify(QPAttr(qp_state=e.IBV_QPS_RTR), e.IBV_QP_STATE)
        at = QPAttr(qp_state=e.IBV_QPS_RTS)
        at.sq_psn = 0
        me.qp.modify(at, e.IBV_QP_STATE | e.IBV_QP_SQ_PSN)
    ah = AH(a.pd, attr=AHAttr(gr=GlobalRoute(dgid=b.gid, sgid_index=a.gid_index, hop_limit=64),
                              is_global=1, port_num=1))
    qa, qb = a.qp.qp_num, b.qp.qp_num
    data = pattern(300, 11)
    a.mr.write(data, len(data), 0)
    b.recv(1, 0, 40 + 512)
    b.recv(2, 1024, 40 + 512)
    post(a, 41, lambda q: q.wr_send(), sges=[SGE(a.mr.buf, 300, a.mr.lkey)], ud=(ah, qb, 0x11112222))
    post(a, 42, lambda q: q.wr_send_imm(0xc0ffee), sges=[SGE(a.mr.buf, 300, a.mr.lkey)],
         ud=(ah, qb, 0x11112222))
    wcs = poll_ex(a.scq, 2, what='UD send completions')
    for w, i in zip(wcs, (41, 42)):
        expect(w, f'UD send {i}', wr_id=i, status=e.IBV_WC_SUCCESS, opcode=e.IBV_WC_SEND)
    r1, r2 = poll_ex(b.rcq, 2, what='UD receives')
    expect(r1, 'UD recv', wr_id=1, status=e.IBV_WC_SUCCESS, opcode=e.IBV_WC_RECV, byte_len=340,
           qp_num=qb, src_qp=qa)
    check(r1.wc_flags & e.IBV_WC_GRH and not r1.wc_flags & e.IBV_WC_WITH_IMM,
          f'UD recv: wc_flags {r1.wc_flags:#x}')
    expect(r2, 'UD recv imm', wr_id=2, status=e.IBV_WC_SUCCESS, byte_len=340, imm=0xc0ffee, src_qp=qa)
    check(r2.wc_flags & e.IBV_WC_WITH_IMM, f'UD recv imm: wc_flags {r2.wc_flags:#x}')
    check(b.mr.read(300, 40) == data and b.mr.read(300, 1064) == data, 'UD: data differs')
    check(r1.qp_num == qb and r2.qp_num == qb, 'UD: qp_num')
    # A wrong Q_Key: the datagram is dropped, no receive completes.
    b.recv(3, 2048, 40 + 512)
    post(a, 43, lambda q: q.wr_send(), sges=[SGE(a.mr.buf, 300, a.mr.lkey)], ud=(ah, qb, 0x1))
    poll_ex(a.scq, 1, what='UD send with a wrong Q_Key')
    try:
        poll_ex(b.rcq, 1, timeout=1.0, what='UD receive')
    except Fail:
        pass
    else:
        raise Fail('a datagram with the wrong Q_Key was received')
    print('ud_ex: SEND and SEND_WITH_IMM through ibv_wr_set_ud_addr, Q_Key checked: ok')


# enum ib_uverbs_write_cmds; IB_MR_REREG_* have the values of IBV_REREG_MR_CHANGE_*.
IB_USER_VERBS_CMD_REREG_MR = 11


def rereg_cmd(side, mr, flags, pd, access=0, start=0, length=0):
    """The uverbs REREG_MR command on the context's command file, as a provider's
    rereg_mr sends it (ibv_cmd_rereg_mr): rdma-core's rxe provider has no rereg_mr, so
    ibv_rereg_mr stops in libibverbs with EOPNOTSUPP before reaching any kernel.
    Returns the new (lkey, rkey); raises OSError with the kernel's errno."""
    check(side.cmd_fd is not None, f'{side.dev}: no uverbs command file found')
    resp = ctypes.create_string_buffer(8)
    body = struct.pack('=QIIQQQII', ctypes.addressof(resp), mr.handle, flags, start, length,
                       start, pd.handle, access)
    hdr = struct.pack('=IHH', IB_USER_VERBS_CMD_REREG_MR, (8 + len(body)) // 4, len(resp) // 4)
    os.write(side.cmd_fd, hdr + body)
    return struct.unpack('=II', resp.raw)


def rereg(side, mr, flags, pd, access=0):
    keys = rereg_cmd(side, mr, flags, pd, access)
    check(keys == (mr.lkey, mr.rkey), f'rereg: new keys {keys}, were {(mr.lkey, mr.rkey)}')


def case_rereg(dev, peer_dev):
    a, b = Side(dev), Side(peer_dev)
    connect(a, b)
    pd2 = PD(b.ctx)
    # Registered with local write only, in another PD than the QP's.
    m = MR(pd2, 8192, e.IBV_ACCESS_LOCAL_WRITE)
    lkey, rkey = m.lkey, m.rkey
    # What libibverbs does with the provider (printed: the kernel is not reached when
    # the provider has no rereg_mr).
    try:
        m.rereg(e.IBV_REREG_MR_CHANGE_ACCESS, b.pd, 0, 0, e.IBV_ACCESS_LOCAL_WRITE)
        print('ibv_rereg_mr: the provider re-registered the MR')
    except PyverbsRDMAError as ex:
        print(f'ibv_rereg_mr through the provider: {ex}')
    # Access: LOCAL_WRITE -> LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ; PD: pd2 -> the QP's.
    rereg(b, m, e.IBV_REREG_MR_CHANGE_ACCESS, b.pd, access=e.IBV_ACCESS_LOCAL_WRITE |
          e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ)
    rereg(b, m, e.IBV_REREG_MR_CHANGE_PD, b.pd)
    check((m.lkey, m.rkey) == (lkey, rkey), f'keys changed: {m.lkey:#x}/{m.rkey:#x}, were {lkey:#x}/{rkey:#x}')
    data = pattern(4000, 21)
    a.mr.write(data, len(data), 0)
    post(a, 51, lambda q: q.wr_rdma_write(m.rkey, m.buf + 100), sges=[SGE(a.mr.buf, 4000, a.mr.lkey)])
    [s] = poll_ex(a.scq, 1, what='WRITE after rereg')
    expect(s, 'WRITE after rereg', wr_id=51, status=e.IBV_WC_SUCCESS)
    check(m.read(4000, 100) == data, 'WRITE after rereg: data differs')
    # The MR as a local buffer of the QP's PD now: a receive into it.
    b.recv(1, 0, 4096, mr=m)
    post(a, 52, lambda q: q.wr_send(), sges=[SGE(a.mr.buf, 64, a.mr.lkey)])
    poll_ex(a.scq, 1, what='SEND into the re-registered MR')
    [r] = poll_ex(b.rcq, 1, what='receive into the re-registered MR')
    expect(r, 'receive into the re-registered MR', wr_id=1, status=e.IBV_WC_SUCCESS, byte_len=64)
    check(m.read(64, 0) == data[:64], 'receive into the re-registered MR: data differs')
    # Access: drop REMOTE_WRITE. A READ still works; a WRITE must now fail, memory unchanged.
    rereg(b, m, e.IBV_REREG_MR_CHANGE_ACCESS, b.pd, access=e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_READ)
    a.mr.write(b'\0' * 4000, 4000, 8192)
    post(a, 53, lambda q: q.wr_rdma_read(m.rkey, m.buf + 100), sges=[SGE(a.mr.buf + 8192, 4000, a.mr.lkey)])
    [s] = poll_ex(a.scq, 1, what='READ after dropping REMOTE_WRITE')
    expect(s, 'READ after dropping REMOTE_WRITE', wr_id=53, status=e.IBV_WC_SUCCESS)
    check(a.mr.read(4000, 8192) == data, 'READ after rereg: data differs')
    # Pages pinned read-only cannot become writable by a rereg of the access (EACCES,
    # ib_umem_check_rereg), and nothing changes.
    ro = MR(b.pd, 4096, 0)
    try:
        rereg(b, ro, e.IBV_REREG_MR_CHANGE_ACCESS, b.pd, access=e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
    except OSError as ex:
        check(ex.errno == errno.EACCES, f'rereg of a read-only MR to writable: errno {ex.errno}')
    else:
        raise Fail('rereg of a read-only MR to writable accepted')
    # Translation changes are not supported (as rxe): refused, the MR unchanged.
    try:
        rereg_cmd(b, m, e.IBV_REREG_MR_CHANGE_TRANSLATION, b.pd, start=ro.buf, length=4096)
    except OSError as ex:
        check(ex.errno == errno.EOPNOTSUPP, f'rereg TRANSLATION: errno {ex.errno}')
    else:
        raise Fail('rereg TRANSLATION accepted')
    a.mr.write(b'\xee' * 256, 256, 0)
    post(a, 54, lambda q: q.wr_rdma_write(m.rkey, m.buf + 100), sges=[SGE(a.mr.buf, 256, a.mr.lkey)])
    [s] = poll_ex(a.scq, 1, what='WRITE without REMOTE_WRITE')
    expect(s, 'WRITE without REMOTE_WRITE', wr_id=54, status=e.IBV_WC_REM_ACCESS_ERR)
    check(m.read(4000, 100) == data, 'WRITE without REMOTE_WRITE changed the memory')

    # PD: a fresh pair; the MR moved to another PD than the responder QP's: refused.
    a2, b2 = Side(dev), Side(peer_dev)
    connect(a2, b2)
    m2 = MR(b2.pd, 4096, ACCESS_ALL)
    post(a2, 61, lambda q: q.wr_rdma_write(m2.rkey, m2.buf), sges=[SGE(a2.mr.buf, 64, a2.mr.lkey)])
    [s] = poll_ex(a2.scq, 1, what='WRITE before the PD change')
    expect(s, 'WRITE before the PD change', wr_id=61, status=e.IBV_WC_SUCCESS)
    pd3 = PD(b2.ctx)
    rereg(b2, m2, e.IBV_REREG_MR_CHANGE_PD, pd3)
    m2.write(b'\x11' * 64, 64, 0)
    a2.mr.write(b'\x22' * 64, 64, 0)
    post(a2, 62, lambda q: q.wr_rdma_write(m2.rkey, m2.buf), sges=[SGE(a2.mr.buf, 64, a2.mr.lkey)])
    [s] = poll_ex(a2.scq, 1, what='WRITE after the PD change')
    expect(s, 'WRITE to an MR of another PD', wr_id=62, status=e.IBV_WC_REM_ACCESS_ERR)
    check(m2.read(64, 0) == b'\x11' * 64, 'WRITE to an MR of another PD changed the memory')
    for mr in (m, m2, ro):
        mr.close()
    print('rereg: ACCESS and PD changed with the keys kept, WRITE/SEND/READ after it, '
          'TRANSLATION refused, WRITE without the right and to another PD refused: ok')


CASES = {'attrs': case_attrs, 'qp_ex': case_qp_ex, 'ud_ex': case_ud_ex, 'rereg': case_rereg}

if __name__ == '__main__':
    try:
        CASES[sys.argv[1]](*sys.argv[2:])
    except (Fail, PyverbsRDMAError) as ex:
        print(f'FAIL: {type(ex).__name__}: {ex}')
        sys.exit(1)
