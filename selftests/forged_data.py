#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""The victim of forged data packets (selftests/hostile_packets.sh, issue 35).

    forged_data.py DEV_A ADDR_A DEV_B ADDR_B PLAN GO

Opens one RC QP pair per attack class between DEV_A (the victim) and DEV_B, all on the
one connection of the two devices' IPv4 addresses ADDR_A and ADDR_B, with memory on DEV_A's side filled with known bytes:
a region open to remote access, one open to local access only, the rkey of one already
deregistered, and receive buffers. One SEND each way on a control pair makes both ends
learn the connection ids. Then it writes PLAN (JSON: per class, the victim's QPN, the
rq_psn its stream numbers start from, [MR-QP-5], and its memory's keys and addresses)
for hostile_packets.py, which forges one request per class from DEV_B's address
(the application on DEV_B posts nothing on those QPs), and waits for the file GO.

It then checks what an application can see, per class: the victim QP's state and
asynchronous event ([MR-CMP-8], [MR-CMP-10]) or, for packets the spec drops or answers
with RNR, no change at all; the receive completion of a SEND longer than its buffer;
not one byte changed in any region ([MR-PLC-1]); the peer QP untouched by NAKs and
responses for requests it never made ([MR-PLC-6]). Last, a new QP pair moves 256 KiB
each way with WRITE, READ and SEND on the same connection, checked byte for byte.
Exits 0, or 1 saying what failed.
"""

import json
import os
import random
import subprocess
import sys
import time

import pyverbs.enums as e
from pyverbs.wr import SGE, RecvWR, SendWR

from rc_common import (ACCESS_ALL, Fail, Side, check, connect, poll, poll_one, status_name)

ACCESS = e.IBV_EVENT_QP_ACCESS_ERR
INVALID = e.IBV_EVENT_QP_REQ_ERR
REGION = 65536
RECV_LEN, RECV_SLOT, RECVS = 256, 1024, 4

# name: (what the victim QP must show, why). Classes that move it to ERR name their
# asynchronous event (None: none, a completion tells); "RTS" classes must leave the QP
# as it was.
CLASSES = {
    'write_bad_rkey': (ACCESS, 'WRITE with an rkey no region has'),
    'write_stale_rkey': (ACCESS, 'WRITE with the rkey of a deregistered region'),
    'write_no_access': (ACCESS, 'WRITE to a region without remote write access'),
    'write_past_end': (ACCESS, 'WRITE whose last 48 bytes lie past the region'),
    'write_va_wrap': (ACCESS, 'WRITE whose va + len wraps past 2^64'),
    'write_beyond_total': (INVALID, 'WRITE segment ending beyond its total_len'),
    'write_huge_total': (INVALID, 'WRITE with total_len 2^32 - 1'),
    'read_huge': (INVALID, 'READ of 2^32 - 1 bytes'),
    'read_past_end': (ACCESS, 'READ one byte past the region'),
    'read_with_payload': (INVALID, 'READ_REQ carrying a payload'),
    'atomic_unaligned': (INVALID, 'FETCH_ADD at an address 4 bytes off alignment'),
    'atomic_past_end': (ACCESS, 'CMP_SWAP at the first address past the region'),
    # Its receive completes with the error instead of an event ([MR-CMP-8]).
    'send_too_long': (None, 'SEND of 512 bytes into a 256-byte receive'),
    'send_unposted': ('RTS', 'SEND to a receive never posted: RNR, nothing else'),
    'msn_far': ('RTS', 'WRITE with a bad rkey, its MSN 1000 ahead: dropped'),
    'ssn_far': ('RTS', 'WRITE with a bad rkey, its SSN 5000 ahead: dropped'),
}


def fill(mr, byte):
    mr.write(bytes([byte]) * mr.length, mr.length, 0)


def changed(mr, byte):
    data = mr.read(mr.length, 0)
    return [i for i, c in enumerate(data) if c != byte]


def events(side, wait):
    """Every asynchronous event of side's context within wait s (after the first)."""
    out = []
    ev = side.async_event(wait)
    while ev is not None:
        out.append(ev)
        ev = side.async_event(0.05)
    return out


class Victim:
    def __init__(self, name, ends, rq_psn):
        self.name = name
        self.a, self.b = sides(ends)
        connect(self.a, self.b, psn_a=rq_psn ^ 0x5A5A5A, psn_b=rq_psn)
        self.rq_psn = rq_psn
        self.open = self.a.mr(REGION)
        self.local = self.a.mr(REGION, e.IBV_ACCESS_LOCAL_WRITE)
        self.recv = self.a.mr(RECVS * RECV_SLOT, e.IBV_ACCESS_LOCAL_WRITE)
        stale = self.a.mr(4096)
        self.stale_rkey = stale.rkey
        stale.close()
        for mr, byte in ((self.open, 0x22), (self.local, 0x33), (self.recv, 0x44)):
            fill(mr, byte)
        if name == 'send_too_long':
            for i in range(RECVS):
                self.a.qp.post_recv(RecvWR(wr_id=100 + i, num_sge=1, sg=[
                    SGE(self.recv.buf + i * RECV_SLOT, RECV_LEN, self.recv.lkey)]))

    def plan(self):
        return {'name': self.name, 'qpn': self.a.qp.qp_num, 'rq_psn': self.rq_psn,
                'rkey': self.open.rkey, 'va': self.open.buf, 'len': REGION,
                'local_rkey': self.local.rkey, 'local_va': self.local.buf,
                'stale_rkey': self.stale_rkey}

    def check(self):
        want, what = CLASSES[self.name]
        tag = f'{self.name} ({what})'
        deadline = time.monotonic() + (20 if want != 'RTS' else 0)
        while self.a.state() != e.IBV_QPS_ERR and time.monotonic() < deadline:
            time.sleep(0.05)
        state = self.a.state()
        evs = events(self.a, 2 if want != 'RTS' else 0.2)
        if want == 'RTS':
            check(state == e.IBV_QPS_RTS and not evs,
                  f'{tag}: victim QP in state {state} with events {evs}, want RTS, none')
        else:
            check(state == e.IBV_QPS_ERR, f'{tag}: victim QP in state {state}, want ERR')
            check(evs == ([want] if want else []), f'{tag}: victim events {evs}, want '
                                                    f'{[want] if want else []}')
        if self.name == 'send_too_long':
            wcs = poll(self.a.rcq, RECVS, 10, f'{tag}: receive completions')
            got = [(wc.wr_id, status_name(wc.status)) for wc in wcs]
            check(got[0] == (100, 'IBV_WC_LOC_LEN_ERR') and
                  all(s == 'IBV_WC_WR_FLUSH_ERR' for _, s in got[1:]),
                  f'{tag}: receive completions {got}')
        else:
            n, _ = self.a.rcq.poll(1)
            check(n == 0, f'{tag}: a receive completion on the victim')
        for mr, byte, region in ((self.open, 0x22, 'remote-access region'),
                                 (self.local, 0x33, 'local-only region'),
                                 (self.recv, 0x44, 'receive buffers')):
            bad = changed(mr, byte)
            check(not bad, f'{tag}: {len(bad)} bytes of the {region} changed, first at '
                           f'{bad[0] if bad else 0}')
        # The peer made no request: NAKs and responses for it change nothing there.
        check(self.b.state() == e.IBV_QPS_RTS, f'{tag}: peer QP in state {self.b.state()}')
        for cq in (self.b.scq, self.b.rcq):
            n, _ = cq.poll(1)
            check(n == 0, f'{tag}: a completion at the peer')
        check(not events(self.b, 0.05), f'{tag}: an event at the peer')
        print(f'ok {tag}: victim {"RTS" if state == e.IBV_QPS_RTS else "ERR"}, events {evs}, '
              'every region unchanged, peer untouched')

    def close(self):
        for side in (self.a, self.b):
            side.ctx.close()


def wr(wr_id, opcode, mr, length, rkey=None, raddr=None):
    w = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1, sg=[SGE(mr.buf, length, mr.lkey)],
               send_flags=e.IBV_SEND_SIGNALED)
    if rkey is not None:
        w.set_wr_rdma(rkey, raddr)
    return w


def expect_ok(cq, n, what):
    for wc in poll(cq, n, 60, what):
        check(wc.status == e.IBV_WC_SUCCESS, f'{what}: {status_name(wc.status)}')


def exchange(a, b, size, what):
    """WRITE, READ and SEND of size random bytes from a to b and back, byte-exact."""
    rng = random.Random(what)
    src, dst = a.mr(size), b.mr(size)
    data = bytes(rng.getrandbits(8) for _ in range(size))
    src.write(data, size, 0)
    a.qp.post_send(wr(1, e.IBV_WR_RDMA_WRITE, src, size, dst.rkey, dst.buf))
    expect_ok(a.scq, 1, f'{what}: WRITE')
    check(dst.read(size, 0) == data, f'{what}: WRITE data differs')
    back = a.mr(size)
    a.qp.post_send(wr(2, e.IBV_WR_RDMA_READ, back, size, dst.rkey, dst.buf))
    expect_ok(a.scq, 1, f'{what}: READ')
    check(back.read(size, 0) == data, f'{what}: READ data differs')
    inbox = b.mr(size)
    b.qp.post_recv(RecvWR(wr_id=3, num_sge=1, sg=[SGE(inbox.buf, size, inbox.lkey)]))
    a.qp.post_send(wr(3, e.IBV_WR_SEND, src, size))
    expect_ok(a.scq, 1, f'{what}: SEND')
    expect_ok(b.rcq, 1, f'{what}: receive')
    check(inbox.read(size, 0) == data, f'{what}: SEND data differs')


def sides(ends):
    (dev_a, addr_a), (dev_b, addr_b) = ends
    return Side(dev_a, addr=addr_a), Side(dev_b, addr=addr_b)


def main():
    dev_a, addr_a, dev_b, addr_b, plan, go = sys.argv[1:7]
    ends = ((dev_a, addr_a), (dev_b, addr_b))
    # Both connection ends learn each other's id from this pair's packets.
    ctl_a, ctl_b = sides(ends)
    connect(ctl_a, ctl_b, psn_a=0x123456, psn_b=0x654321)
    exchange(ctl_a, ctl_b, 64, 'control pair')
    exchange(ctl_b, ctl_a, 64, 'control pair, reversed')
    victims = [Victim(name, ends, 0x100000 + i * 0x10101)
               for i, name in enumerate(CLASSES)]
    with open(plan + '.tmp', 'w') as f:
        json.dump({'classes': [v.plan() for v in victims]}, f)
    os.rename(plan + '.tmp', plan)
    deadline = time.monotonic() + 600
    while not os.path.exists(go):
        check(time.monotonic() < deadline, 'no attack came')
        time.sleep(0.1)
    for v in victims:
        v.check()
    a, b = sides(ends)
    connect(a, b, psn_a=0x0BAD00, psn_b=0x00F00D)
    exchange(a, b, 262144, 'new pair after the attack')
    exchange(b, a, 262144, 'new pair after the attack, reversed')
    print('ok a new QP pair on the attacked connection: 256 KiB WRITE, READ, SEND each way, '
          'byte-exact')
    for v in victims:
        v.close()


def dump_connections():
    """Both devices' connections, paths and counters, for a failure's report: read in
    the initial mount namespace (this process's netns has a /sys of its own, without
    debugfs and without the other namespace's device)."""
    cmd = ('cd /sys/class/infiniband; for d in mroce0 mroce1; do echo "$d:" $(for c in '
           'conns_opened conn_probes conns_peer_gone conns_peer_closed rx_out_of_window '
           'rx_dropped rto_expired tx_floors; do echo $c $(cat $d/ports/1/hw_counters/$c); '
           'done); head -c 4000 /sys/kernel/debug/metaroce/$d/conns; '
           'head -c 4000 /sys/kernel/debug/metaroce/$d/paths; done')
    try:
        out = subprocess.run(['nsenter', '--mount=/proc/1/ns/mnt', 'sh', '-c', cmd],
                             capture_output=True, text=True, timeout=60, check=False)
        text = out.stdout + out.stderr
    except (OSError, subprocess.SubprocessError) as err:
        text = f'no dump: {err}'
    for line in text.splitlines():
        print(f'  {line}')


if __name__ == '__main__':
    try:
        main()
    except Fail as err:
        print(f'FAIL {err}')
        dump_connections()
        sys.exit(1)
