#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
#
# RC error paths as an application sees them, through stock rdma-core and pyverbs: the
# exact work completion status, the QP state after it, and that nothing was written
# where nothing may be. One case per invocation, run by rc_errors.sh:
#   rc_errors.py CASE DEV_A DEV_B [--type metaroce|rxe] [--ns-b NS]
# Exits 0 on success; 1 (printing why) on failure; 2 when the only mismatches are
# known deviations of rdma_rxe (--type rxe) from what the IB spec and applications
# expect, listed in RXE_DEVIATIONS: metaroce must behave as expected there.

import argparse
import ctypes
import errno
import mmap
import subprocess
import sys
import time

import pyverbs.enums as e
from pyverbs.mr import MR
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QPAttr
from pyverbs.wr import SGE, RecvWR, SendWR

from rc_common import (ACCESS_ALL, QP_STATE, Fail, Side, check, connect, no_completion,
                       poll, poll_one, status_name, to_init, to_rtr)

LW, RW, RR, RA = (e.IBV_ACCESS_LOCAL_WRITE, e.IBV_ACCESS_REMOTE_WRITE,
                  e.IBV_ACCESS_REMOTE_READ, e.IBV_ACCESS_REMOTE_ATOMIC)
SIZE = 65536

# Where rdma_rxe differs from the IB spec / what applications expect (key: the
# expectation's tag). Found by running these cases on rxe; rc_errors.sh reports them as
# XFAIL with MROCE_TYPE=rxe and as failures on metaroce.
RXE_DEVIATIONS = {
    # rxe_req.c sets IBV_WC_LOC_PROT_ERR on the WQE, then rxe_qp_error() flushes the
    # send queue from that WQE on, so it completes with IBV_WC_WR_FLUSH_ERR
    # (flush_send_wqe in rxe_comp.c); the application never learns the cause.
    'loc_prot_req': 'the failing WR completes with IBV_WC_WR_FLUSH_ERR',
    # copy_data() into a too short receive does not fail with -ENOSPC, so rxe_resp.c
    # takes RESPST_ERR_MALFORMED_WQE (class A): IBV_WC_LOC_QP_OP_ERR at the receiver and
    # a remote operational error NAK (IBV_WC_REM_OP_ERR) at the requester.
    'loc_len': 'the receiver gets IBV_WC_LOC_QP_OP_ERR',
    'rem_inv_req': 'the requester gets IBV_WC_REM_OP_ERR',
    # rxe_resp.c raises IBV_EVENT_QP_ACCESS_ERR only where check_rkey() returns
    # RESPST_ERR_RKEY_VIOLATION_EVENT, not for every class C access error.
    'access_event': 'the responder raises no IBV_EVENT_QP_ACCESS_ERR',
}

ARGS = None
DEVIATIONS = []


def expect(cond, tag, what):
    """An application-visible expectation; a known rxe deviation is recorded, not fatal."""
    if cond:
        return
    if ARGS.type == 'rxe' and tag in RXE_DEVIATIONS:
        DEVIATIONS.append(f'{what} [{tag}: {RXE_DEVIATIONS[tag]}]')
        print(f'XFAIL (rxe deviation) {what}')
        return
    raise Fail(what)


def fill(mr, byte):
    mr.write(bytes([byte]) * mr.length, mr.length, 0)


def untouched(mr, byte, what):
    data = mr.read(mr.length, 0)
    bad = [i for i, c in enumerate(data) if c != byte]
    check(not bad, f'{what}: {len(bad)} bytes changed, first at {bad[0] if bad else 0}')


def state_name(s):
    return QP_STATE.get(s, str(s))


def expect_state(side, want, tag, what, wait=5.0):
    """The QP reaches state want within wait seconds (a responder moves to ERR after
    sending its NAK, so the requester may see the NAK first)."""
    deadline = time.monotonic() + wait
    got = side.state()
    while got != want and time.monotonic() < deadline:
        time.sleep(0.01)
        got = side.state()
    expect(got == want, tag, f'{what}: QP of {side.dev} in {state_name(got)}, '
           f'want {state_name(want)}')


def wait_wc(cq, wr_id, what, timeout=60):
    wc = poll_one(cq, timeout, what)
    check(wc.wr_id == wr_id, f'{what}: wr_id {wc.wr_id}, want {wr_id}')
    return wc


def expect_status(wc, want, tag, what):
    expect(wc.status == want, tag, f'{what}: status {status_name(wc.status)}, '
           f'want {status_name(want)}')


def pair(**kw):
    a, b = Side(ARGS.dev_a), Side(ARGS.dev_b)
    connect(a, b, **kw)
    return a, b


def close(*sides):
    for s in sides:
        s.ctx.close()


def rdma_wr(wr_id, opcode, mr, length, rkey, raddr, lkey=None, addr=None):
    wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1,
                sg=[SGE(mr.buf if addr is None else addr, length,
                        mr.lkey if lkey is None else lkey)],
                send_flags=e.IBV_SEND_SIGNALED)
    wr.set_wr_rdma(rkey, raddr)
    return wr


def send_wr(wr_id, mr, length, lkey=None, addr=None):
    return SendWR(wr_id=wr_id, opcode=e.IBV_WR_SEND, num_sge=1,
                  sg=[SGE(mr.buf if addr is None else addr, length,
                          mr.lkey if lkey is None else lkey)],
                  send_flags=e.IBV_SEND_SIGNALED)


def remote_access_error(what, opcode, access=ACCESS_ALL, rkey=lambda mr: mr.rkey,
                        raddr=lambda mr: mr.buf, length=4096):
    """One RDMA op from A to a fresh MR on B that must fail with REM_ACCESS_ERR: the
    requester's QP goes to ERR, a following WR is flushed, the target is untouched."""
    a, b = pair()
    local = a.mr(SIZE)
    target = b.mr(SIZE, access)
    fill(local, 0x11)
    fill(target, 0x22)
    if opcode == e.IBV_WR_ATOMIC_FETCH_AND_ADD:
        wr = SendWR(wr_id=1, opcode=opcode, num_sge=1, sg=[SGE(local.buf, 8, local.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_atomic(rkey(target), raddr(target), 5, 0)
    else:
        wr = rdma_wr(1, opcode, local, length, rkey(target), raddr(target))
    a.qp.post_send(wr)
    wc = wait_wc(a.scq, 1, what)
    status = wc.status
    expect_status(wc, e.IBV_WC_REM_ACCESS_ERR, 'rem_access', what)
    expect_state(a, e.IBV_QPS_ERR, 'req_err_state', f'{what}: requester')
    # The IB spec puts the responder's QP in ERR too after a remote access error
    # (class C responder error, with an affiliated IBV_EVENT_QP_ACCESS_ERR).
    expect_state(b, e.IBV_QPS_ERR, 'resp_err_state', f'{what}: responder')
    ev = b.async_event()
    expect(ev == e.IBV_EVENT_QP_ACCESS_ERR, 'access_event',
           f'{what}: responder\'s asynchronous event {ev}, want IBV_EVENT_QP_ACCESS_ERR '
           f'({e.IBV_EVENT_QP_ACCESS_ERR})')
    a.qp.post_send(rdma_wr(2, e.IBV_WR_RDMA_WRITE, local, 64, target.rkey, target.buf))
    wc = wait_wc(a.scq, 2, f'{what}: WR after the error')
    expect_status(wc, e.IBV_WC_WR_FLUSH_ERR, 'flush', f'{what}: WR after the error')
    untouched(target, 0x22, f'{what}: target MR')
    if opcode == e.IBV_WR_RDMA_READ:
        untouched(local, 0x11, f'{what}: READ destination')
    print(f'{what}: {status_name(status)}, requester in {state_name(a.state())}, '
          f'responder in {state_name(b.state())} with event {ev}')
    close(a, b)


def case_bad_rkey():
    remote_access_error('WRITE with a bad rkey', e.IBV_WR_RDMA_WRITE,
                        rkey=lambda mr: mr.rkey ^ 0x5a)
    remote_access_error('READ with a bad rkey', e.IBV_WR_RDMA_READ,
                        rkey=lambda mr: mr.rkey ^ 0x5a)


def case_out_of_bounds():
    remote_access_error('WRITE past the end of the MR', e.IBV_WR_RDMA_WRITE,
                        raddr=lambda mr: mr.buf + SIZE - 8, length=16)
    remote_access_error('WRITE before the start of the MR', e.IBV_WR_RDMA_WRITE,
                        raddr=lambda mr: mr.buf - 1, length=16)
    remote_access_error('READ past the end of the MR', e.IBV_WR_RDMA_READ,
                        raddr=lambda mr: mr.buf + SIZE - 4095, length=4096)


def case_no_remote_write():
    remote_access_error('WRITE to an MR without REMOTE_WRITE', e.IBV_WR_RDMA_WRITE,
                        access=LW | RR | RA)


def case_no_remote_read():
    remote_access_error('READ from an MR without REMOTE_READ', e.IBV_WR_RDMA_READ,
                        access=LW | RW | RA)


def case_no_remote_atomic():
    remote_access_error('FETCH_AND_ADD on an MR without REMOTE_ATOMIC',
                        e.IBV_WR_ATOMIC_FETCH_AND_ADD, access=LW | RW | RR)


def case_rnr_exceeded():
    for rnr in (0, 1, 3):
        what = f'SEND without a receive, rnr_retry {rnr}'
        a, b = pair(a_rts=dict(rnr_retry=rnr), b_rtr=dict(min_rnr_timer=1))
        mr = a.mr(4096)
        t0 = time.monotonic()
        a.qp.post_send(send_wr(1, mr, 64))
        wc = wait_wc(a.scq, 1, what)
        expect_status(wc, e.IBV_WC_RNR_RETRY_EXC_ERR, 'rnr_exc', what)
        expect_state(a, e.IBV_QPS_ERR, 'req_err_state', f'{what}: requester')
        # An RNR NAK leaves the responder as it was.
        expect_state(b, e.IBV_QPS_RTS, 'rnr_resp_rts', f'{what}: responder')
        print(f'{what}: {status_name(wc.status)} after {time.monotonic() - t0:.2f} s')
        close(a, b)


def case_rnr_recovers():
    what = 'SEND with rnr_retry 7, receive posted 1 s late'
    a, b = pair(a_rts=dict(rnr_retry=7), b_rtr=dict(min_rnr_timer=1))
    src, dst = a.mr(4096), b.mr(4096)
    src.write(bytes(range(256)) * 16, 4096, 0)
    fill(dst, 0)
    a.qp.post_send(send_wr(1, src, 3000))
    no_completion(a.scq, 1.0, f'{what}: requester before the receive')
    b.qp.post_recv(RecvWR(wr_id=7, num_sge=1, sg=[SGE(dst.buf, 4096, dst.lkey)]))
    wc = wait_wc(a.scq, 1, f'{what}: requester')
    expect_status(wc, e.IBV_WC_SUCCESS, 'rnr_ok', f'{what}: requester')
    wc = wait_wc(b.rcq, 7, f'{what}: receiver')
    expect_status(wc, e.IBV_WC_SUCCESS, 'rnr_ok', f'{what}: receiver')
    check(wc.byte_len == 3000, f'{what}: byte_len {wc.byte_len}')
    check(dst.read(4096, 0) == (bytes(range(256)) * 16)[:3000] + bytes(1096), f'{what}: data')
    expect_state(a, e.IBV_QPS_RTS, 'rnr_ok', f'{what}: requester')
    expect_state(b, e.IBV_QPS_RTS, 'rnr_ok', f'{what}: responder')
    print(f'{what}: delivered')
    close(a, b)


def dereg_in_flight(what, opcode, want):
    """A streams 64 KiB opcode requests, 16 outstanding, at an MR of B that B
    deregisters after 50 completed: the requests before complete, a later one fails with
    a status in want and the requester's QP goes to ERR. The MR is over memory of this
    program, which stays mapped after ibv_dereg_mr: nothing may write it once that
    returned."""
    a, b = pair()
    local = a.mr(SIZE)
    fill(local, 0x33)
    mem = mmap.mmap(-1, SIZE)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(mem))
    target = MR(b.pd, SIZE, ACCESS_ALL, address=addr)
    rkey = target.rkey
    posted = done = 0
    failed = None
    deadline = time.monotonic() + 120
    while failed is None:
        while posted - done < 16:
            a.qp.post_send(rdma_wr(posted, opcode, local, SIZE, rkey, addr))
            posted += 1
        wc = wait_wc(a.scq, done, f'{what}: WR {done}')
        done += 1
        if wc.status != e.IBV_WC_SUCCESS:
            failed = wc
        elif done == 50:
            target.close()
            mem[:] = bytes([0x44]) * SIZE
        check(time.monotonic() < deadline, f'{what}: {done} WRs completed, none failed')
    check(done > 50, f'{what}: WR {done - 1} failed before the MR was deregistered: '
                     f'{status_name(failed.status)}')
    expect(failed.status in want, 'rem_access',
           f'{what}: status {status_name(failed.status)}, want one of '
           f'{", ".join(status_name(w) for w in want)}')
    expect_state(a, e.IBV_QPS_ERR, 'req_err_state', f'{what}: requester')
    for wc in poll(a.scq, posted - done, 60, f'{what}: the rest'):
        expect_status(wc, e.IBV_WC_WR_FLUSH_ERR, 'flush', f'{what}: WR {wc.wr_id}')
    got = mem[:]
    bad = [i for i, c in enumerate(got) if c != 0x44]
    check(not bad, f'{what}: {len(bad)} bytes written after ibv_dereg_mr, first at '
                   f'{bad[0] if bad else 0}')
    print(f'{what}: {done - 1} WRs completed, then {status_name(failed.status)}; '
          f'requester in {state_name(a.state())}')
    close(a, b)


def case_dereg_in_flight():
    dereg_in_flight('WRITEs into an MR deregistered under them', e.IBV_WR_RDMA_WRITE,
                    (e.IBV_WC_REM_ACCESS_ERR,))
    # A READ executed before the MR went but answered after turns into an access
    # error too ([MR-CMP-9]).
    dereg_in_flight('READs from an MR deregistered under them', e.IBV_WR_RDMA_READ,
                    (e.IBV_WC_REM_ACCESS_ERR,))


def retry_exceeded(what, breaker, repair=None):
    """A WRITE towards a peer that breaker() made unreachable: IBV_WC_RETRY_EXC_ERR with
    retry_cnt 2 and timeout 10 (4 ms), and the requester in ERR."""
    a, b = pair(a_rts=dict(retry_cnt=2, timeout=10))
    local, target = a.mr(SIZE), b.mr(SIZE)
    try:
        breaker(a, b)
        t0 = time.monotonic()
        a.qp.post_send(rdma_wr(1, e.IBV_WR_RDMA_WRITE, local, 8192, target.rkey, target.buf))
        wc = wait_wc(a.scq, 1, what)
        expect_status(wc, e.IBV_WC_RETRY_EXC_ERR, 'retry_exc', what)
        expect_state(a, e.IBV_QPS_ERR, 'req_err_state', f'{what}: requester')
        print(f'{what}: {status_name(wc.status)} after {time.monotonic() - t0:.2f} s')
    finally:
        if repair:
            repair()
    close(a, b)


def run(*cmd):
    subprocess.run(cmd, check=True)


def case_peer_qp_destroyed():
    retry_exceeded('WRITE to a destroyed peer QP', lambda a, b: b.qp.close())


def case_peer_qp_destroyed_others_stream():
    """Another QP pair between the same devices shares the connection and keeps
    completing WRITEs: the QP whose peer is gone still fails, by its own
    retry_cnt, and the other goes on."""
    what = 'WRITE to a destroyed peer QP while another QP streams'
    a, b = pair(a_rts=dict(retry_cnt=2, timeout=10))
    c, d = pair()
    local, target = a.mr(SIZE), b.mr(SIZE)
    src, dst = c.mr(SIZE), d.mr(SIZE)
    b.qp.close()
    t0 = time.monotonic()
    a.qp.post_send(rdma_wr(1, e.IBV_WR_RDMA_WRITE, local, 8192, target.rkey, target.buf))
    streamed, failed, after = 0, None, 0
    while time.monotonic() < t0 + 60 and (failed is None or after < 20):
        c.qp.post_send(rdma_wr(100 + streamed, e.IBV_WR_RDMA_WRITE, src, 4096, dst.rkey, dst.buf))
        wc = wait_wc(c.scq, 100 + streamed, f'{what}: the other QP')
        expect_status(wc, e.IBV_WC_SUCCESS, 'other_qp_ok', f'{what}: the other QP')
        streamed += 1
        if failed is not None:
            after += 1
            continue
        n, wcs = a.scq.poll(1)
        if n:
            failed = wcs[0]
            print(f'{what}: {status_name(failed.status)} after {time.monotonic() - t0:.2f} s '
                  f'and {streamed} WRITEs of the other QP')
    check(failed is not None, f'{what}: no completion in 60 s, while the other QP '
                              f'completed {streamed} WRITEs')
    check(failed.wr_id == 1, f'{what}: wr_id {failed.wr_id}')
    expect_status(failed, e.IBV_WC_RETRY_EXC_ERR, 'retry_exc', what)
    expect_state(a, e.IBV_QPS_ERR, 'req_err_state', f'{what}: requester')
    expect_state(c, e.IBV_QPS_RTS, 'other_qp_ok', f'{what}: the other QP')
    close(a, b, c, d)


def case_peer_unreachable():
    # The path drops everything (the peer's host is gone); the link stays up.
    retry_exceeded('WRITE over a path that drops everything',
                   lambda a, b: run('tc', 'qdisc', 'add', 'dev', 'vethA', 'root', 'netem',
                                    'loss', '100%'),
                   lambda: run('tc', 'qdisc', 'del', 'dev', 'vethA', 'root'))


def case_peer_link_down():
    # The peer's namespace loses its link (vethB down: vethA loses carrier too).
    check(ARGS.ns_b, 'peer_link_down needs --ns-b')
    retry_exceeded('WRITE after the peer link went down',
                   lambda a, b: run('ip', '-n', ARGS.ns_b, 'link', 'set', 'vethB', 'down'),
                   lambda: run('ip', '-n', ARGS.ns_b, 'link', 'set', 'vethB', 'up'))


def local_error(what, make_wr, want, tag, recv=False, local_access=ACCESS_ALL):
    a, b = pair()
    local = a.mr(SIZE, local_access)
    target = b.mr(SIZE)
    if local_access & LW:
        fill(local, 0x11)
    fill(target, 0x22)
    if recv:
        b.qp.post_recv(RecvWR(wr_id=9, num_sge=1, sg=[SGE(target.buf, SIZE, target.lkey)]))
    a.qp.post_send(make_wr(local, target))
    wc = wait_wc(a.scq, 1, what)
    expect_status(wc, want, tag, what)
    expect_state(a, e.IBV_QPS_ERR, 'req_err_state', f'{what}: requester')
    if recv:
        no_completion(b.rcq, 0.5, f'{what}: receiver')
    untouched(target, 0x22, f'{what}: peer MR')
    print(f'{what}: {status_name(wc.status)}, requester in {state_name(a.state())}')
    close(a, b)


def case_local_protection():
    LPE = e.IBV_WC_LOC_PROT_ERR
    local_error('SEND with a bad lkey', lambda l, t: send_wr(1, l, 4096, lkey=l.lkey ^ 0x5a),
                LPE, 'loc_prot_req', recv=True)
    local_error('WRITE with a bad lkey',
                lambda l, t: rdma_wr(1, e.IBV_WR_RDMA_WRITE, l, 4096, t.rkey, t.buf,
                                     lkey=l.lkey ^ 0x5a), LPE, 'loc_prot_req')
    local_error('SEND with an SGE past the end of its MR',
                lambda l, t: send_wr(1, l, 4096, addr=l.buf + SIZE - 100), LPE,
                'loc_prot_req', recv=True)
    local_error('READ into an MR without LOCAL_WRITE',
                lambda l, t: rdma_wr(1, e.IBV_WR_RDMA_READ, l, 4096, t.rkey, t.buf), LPE,
                'loc_prot_read', local_access=RR)


def case_local_length():
    what = 'SEND of 100 B into a 64 B receive'
    a, b = pair()
    src, dst = a.mr(4096), b.mr(4096)
    b.qp.post_recv(RecvWR(wr_id=9, num_sge=1, sg=[SGE(dst.buf, 64, dst.lkey)]))
    a.qp.post_send(send_wr(1, src, 100))
    rwc = wait_wc(b.rcq, 9, f'{what}: receiver')
    expect_status(rwc, e.IBV_WC_LOC_LEN_ERR, 'loc_len', f'{what}: receiver')
    wc = wait_wc(a.scq, 1, f'{what}: requester')
    expect_status(wc, e.IBV_WC_REM_INV_REQ_ERR, 'rem_inv_req', f'{what}: requester')
    expect_state(a, e.IBV_QPS_ERR, 'req_err_state', f'{what}: requester')
    expect_state(b, e.IBV_QPS_ERR, 'resp_len_err_state', f'{what}: responder')
    print(f'{what}: receiver {status_name(rwc.status)}, requester {status_name(wc.status)}')
    close(a, b)


def refused(err, fn, tag, what):
    try:
        fn()
    except PyverbsRDMAError as ex:
        expect(ex.error_code == err, tag, f'{what}: errno {ex.error_code}, want {err}')
        return
    expect(False, tag, f'{what}: accepted, want errno {err}')


def case_post_state():
    a, b = Side(ARGS.dev_a), Side(ARGS.dev_b)
    mr = a.mr(4096)
    swr = lambda: send_wr(1, mr, 16)
    rwr = lambda: RecvWR(wr_id=2, num_sge=1, sg=[SGE(mr.buf, 16, mr.lkey)])
    refused(errno.EINVAL, lambda: a.qp.post_send(swr()), 'post_send_state', 'post_send in RESET')
    # A receive posted in RESET is an error (the rxe provider checks the QP state it
    # keeps in user space; receives go into the shared ring without a system call).
    refused(errno.EINVAL, lambda: a.qp.post_recv(rwr()), 'post_recv_reset', 'post_recv in RESET')
    to_init(a)
    refused(errno.EINVAL, lambda: a.qp.post_send(swr()), 'post_send_state', 'post_send in INIT')
    a.qp.post_recv(rwr())          # allowed in INIT
    to_rtr(a, b, 0)
    refused(errno.EINVAL, lambda: a.qp.post_send(swr()), 'post_send_state', 'post_send in RTR')
    a.qp.post_recv(rwr())          # allowed in RTR
    print('post_send refused in RESET, INIT and RTR; post_recv accepted in INIT and RTR')
    close(a, b)


CASES = {n[5:]: f for n, f in globals().items() if n.startswith('case_')}

if __name__ == '__main__':
    ap = argparse.ArgumentParser()
    ap.add_argument('case', choices=sorted(CASES))
    ap.add_argument('dev_a')
    ap.add_argument('dev_b')
    ap.add_argument('--type', default='metaroce')
    ap.add_argument('--ns-b')
    ARGS = ap.parse_args()
    try:
        CASES[ARGS.case]()
    except (Fail, PyverbsRDMAError) as ex:
        print(f'FAIL: {type(ex).__name__}: {ex}')
        sys.exit(1)
    if DEVIATIONS:
        print(f'{len(DEVIATIONS)} known rxe deviation(s)')
        sys.exit(2)
