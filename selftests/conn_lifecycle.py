#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
#
# The life of a MetaRoCE connection as a peer, or someone else, can end it: one case
# per invocation, run by conn_lifecycle.sh in namespace A (mroce0 on vethA, 198.18.0.1;
# mroce1 on vethB in namespace B, 198.18.0.2):
#   conn_lifecycle.py CASE DEV_A DEV_B --ns-a NS --ns-b NS
# Cases (spec [MR-CONN-14], [MR-CONN-16], [MR-SEC-7]; driver.rst, "The transport"):
#   wrong_peer     a CLOSE with the right connection ids from another address is
#                  dropped (rx_wrong_peer): the QPs go on
#   peer_close     a CLOSE from the peer closes the connection: its QPs are in ERR, a
#                  new QP pair to that peer works, the old QPs destroy cleanly
#   peer_restart   the peer's device is deleted and created again while our QPs to it
#                  stay: a new QP pair works (the old connection found gone by probes)
#   restart_hint   the same, the restarted peer sending first: its new connection id
#                  makes ours probe it, find it gone and close before our QP binds
#   forged_open    an OPEN with a new connection id from the peer's address, the peer
#                  alive: the connection probes it, and stays
#   modify_race    two processes modify one QP at once (INIT->RTR against
#                  RTR->RESET->INIT->RTR to another address): once destroyed, no
#                  connection is left (no binding was leaked)
#   linger         the peer destroys its QP as soon as a SEND arrived whose ACKs were
#                  all lost: its connection lingers and acknowledges the
#                  retransmission, and the SEND completes successfully (spec
#                  [MR-QP-8], [MR-CONN-16])
# Exits 0 on success, 1 (printing why) on failure.

import argparse
import os
import re
import socket
import struct
import subprocess
import sys
import time
import types

import pyverbs.enums as e
from pyverbs.addr import GID
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

sys.path.insert(0, sys.path[0])
from rc_common import (QP_STATE, Fail, check, poll, roce_v2_ipv4_gid, status_name,  # noqa: E402
                       to_init, to_rtr, to_rts)

MSG = 64
UDP_PORT = 4793
VERSION = 0xD0
CONTROL = 0x12
FLAG_OPEN = 0x04
OPEN, CLOSE = 1, 2
ADDR = {'a': '198.18.0.1', 'b': '198.18.0.2'}
ARGS = None


class End:
    """One RC QP on a device with its context, PD, CQ and a buffer: send half, receive half."""

    def __init__(self, dev):
        self.dev = dev
        self.ctx = Context(name=dev)
        self.pd = PD(self.ctx)
        self.cq = CQ(self.ctx, 256, None, None, 0)
        cap = QPCap(max_send_wr=16, max_recv_wr=16, max_send_sge=1, max_recv_sge=1, max_inline_data=0)
        self.qp = QP(self.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.cq, rcq=self.cq, cap=cap, sq_sig_all=1))
        self.mr = MR(self.pd, 2 * MSG, e.IBV_ACCESS_LOCAL_WRITE)
        self.gid_index, self.gid = roce_v2_ipv4_gid(self.ctx)

    def state(self):
        return self.qp.query(e.IBV_QP_STATE)[0].qp_state

    def close(self):
        for o in (self.qp, self.mr, self.cq, self.pd, self.ctx):
            o.close()


def state_name(s):
    return QP_STATE.get(s, str(s))


def connect(a, b, psn_a=0x10000, psn_b=0x20000):
    to_init(a)
    to_init(b)
    to_rtr(a, b, psn_b)
    to_rtr(b, a, psn_a)
    to_rts(a, psn_a)
    to_rts(b, psn_b)


def post_recv(x, wr_id):
    x.qp.post_recv(RecvWR(wr_id=wr_id, num_sge=1, sg=[SGE(x.mr.buf + MSG, MSG, x.mr.lkey)]))


def post_send(x, wr_id, data):
    x.mr.write(data, MSG, 0)
    x.qp.post_send(SendWR(wr_id=wr_id, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(x.mr.buf, MSG, x.mr.lkey)]))


def exchange(a, b, tag, timeout=20.0):
    """A SEND each way; every completion successful, the data where it belongs."""
    data = {a: bytes([tag]) * MSG, b: bytes([tag ^ 0xff]) * MSG}
    for x in (a, b):
        post_recv(x, 1)
    for x in (a, b):
        post_send(x, 2, data[x])
    for x, peer in ((a, b), (b, a)):
        for wc in poll(x.cq, 2, timeout, f'{x.dev}: exchange {tag:#x}'):
            check(wc.status == e.IBV_WC_SUCCESS,
                  f'{x.dev}: exchange {tag:#x}: wr {wc.wr_id} completed with {status_name(wc.status)}')
        check(x.mr.read(MSG, MSG) == data[peer], f'{x.dev}: exchange {tag:#x}: wrong data received')


def counters(dev):
    out = subprocess.run(['rdma', 'statistic', 'show', 'link', f'{dev}/1'], capture_output=True,
                         text=True, check=True).stdout.split()
    return {out[i]: int(out[i + 1]) for i in range(len(out) - 1) if out[i + 1].isdigit()}


def delta(before, after, name):
    return after.get(name, 0) - before.get(name, 0)


def conns(dev):
    """The connections of dev's debugfs file: dicts of local id, peer address, peer id, closed,
    lingering."""
    found = []
    with open(f'/sys/kernel/debug/metaroce/{dev}/conns') as f:
        for line in f:
            m = re.match(r'conn (0x[0-9a-f]+) to (\S+) \(peer (0x[0-9a-f]+)\)', line)
            if m:
                found.append({'id': int(m[1], 16), 'peer': m[2], 'peer_id': int(m[3], 16),
                              'closed': 'closed=true' in line, 'lingering': 'lingering=true' in line})
    return found


def the_conn(dev, peer):
    open_ = [c for c in conns(dev) if c['peer'] == peer and not c['closed'] and not c['lingering']]
    check(len(open_) == 1, f'{dev}: {len(open_)} open connections to {peer}: {conns(dev)}')
    check(open_[0]['peer_id'] != 0, f'{dev}: the connection to {peer} does not know its peer id')
    return open_[0]


def control(code, dst, src, flags=0, value=0):
    return struct.pack('>BBBBIII', VERSION, CONTROL, flags, 0, dst, src, 0) + struct.pack('>BBBBI', code, 0, 0, 0, value)


def send_from(ns, src, dst, payload):
    """Sends payload from src (an address in namespace ns, any port) to dst port 4793."""
    script = ('import socket, sys\n'
              's = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n'
              's.bind((sys.argv[1], 0))\n'
              f's.sendto(bytes.fromhex(sys.argv[3]), (sys.argv[2], {UDP_PORT}))\n')
    subprocess.run(['ip', 'netns', 'exec', ns, sys.executable, '-c', script, src, dst, payload.hex()],
                   check=True)


def wait_state(x, want, timeout=5.0):
    deadline = time.monotonic() + timeout
    while x.state() != want and time.monotonic() < deadline:
        time.sleep(0.05)
    check(x.state() == want, f'{x.dev}: QP in {state_name(x.state())}, want {state_name(want)}')


def wait_counter(dev, name, at_least, timeout=5.0):
    deadline = time.monotonic() + timeout
    while counters(dev).get(name, 0) < at_least and time.monotonic() < deadline:
        time.sleep(0.05)
    check(counters(dev).get(name, 0) >= at_least, f'{dev}: {name} {counters(dev).get(name, 0)}, want >= {at_least}')


def check_open(dev, want):
    n = counters(dev).get('conns_open')
    check(n == want, f'{dev}: conns_open {n}, want {want} ({conns(dev)})')


def recreate_peer():
    """Deletes the peer's device and creates it again (a restarted peer: new connection ids)."""
    ns = ['ip', 'netns', 'exec', ARGS.ns_b]
    subprocess.run(ns + ['rdma', 'link', 'del', ARGS.dev_b], check=True)
    subprocess.run(ns + ['rdma', 'link', 'add', ARGS.dev_b, 'type', 'metaroce', 'netdev', 'vethB'], check=True)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        out = subprocess.run(ns + ['ibv_devinfo', '-v', '-d', ARGS.dev_b], capture_output=True, text=True).stdout
        if '::ffff:' + ADDR['b'] in out:
            return
        time.sleep(0.1)
    raise Fail(f'{ARGS.dev_b}: no IPv4 GID after it was created again')


def case_wrong_peer():
    a, b = End(ARGS.dev_a), End(ARGS.dev_b)
    connect(a, b)
    exchange(a, b, 0x11)
    cb = the_conn(ARGS.dev_b, ADDR['a'])
    c0 = counters(ARGS.dev_b)
    # A third address on A's side: the datagram comes from there.
    subprocess.run(['ip', 'addr', 'add', '198.18.0.3/24', 'dev', 'vethA'], check=True)
    try:
        send_from(ARGS.ns_a, '198.18.0.3', ADDR['b'], control(CLOSE, cb['id'], cb['peer_id']))
        time.sleep(0.5)
    finally:
        subprocess.run(['ip', 'addr', 'del', '198.18.0.3/24', 'dev', 'vethA'], check=True)
    c1 = counters(ARGS.dev_b)
    check(b.state() == e.IBV_QPS_RTS, f'{b.dev}: QP in {state_name(b.state())} after a CLOSE from 198.18.0.3')
    check(delta(c0, c1, 'rx_wrong_peer') == 1, f'{b.dev}: rx_wrong_peer grew by {delta(c0, c1, "rx_wrong_peer")}, want 1')
    exchange(a, b, 0x12)
    print(f'a CLOSE with the connection ids from 198.18.0.3: dropped (rx_wrong_peer +1), QPs in RTS')
    for x in (a, b):
        x.close()
    check_open(ARGS.dev_a, 0)
    check_open(ARGS.dev_b, 0)


def case_peer_close():
    a, b = End(ARGS.dev_a), End(ARGS.dev_b)
    connect(a, b)
    exchange(a, b, 0x21)
    cb = the_conn(ARGS.dev_b, ADDR['a'])
    ca0, cb0 = counters(ARGS.dev_a), counters(ARGS.dev_b)
    # One CLOSE, from the peer's address with the connection ids, to B only.
    send_from(ARGS.ns_a, ADDR['a'], ADDR['b'], control(CLOSE, cb['id'], cb['peer_id']))
    wait_state(b, e.IBV_QPS_ERR)
    # A's connection still knows B's old id: its next QP, after a quiet second,
    # probes it and finds it gone.
    time.sleep(1.2)
    a2, b2 = End(ARGS.dev_a), End(ARGS.dev_b)
    connect(a2, b2, 0x30000, 0x40000)
    exchange(a2, b2, 0x22)
    ca1, cb1 = counters(ARGS.dev_a), counters(ARGS.dev_b)
    check(delta(cb0, cb1, 'conns_peer_closed') == 1, f'{b.dev}: conns_peer_closed grew by {delta(cb0, cb1, "conns_peer_closed")}')
    print(f'after a CLOSE to {b.dev}: its QP in ERR, a new pair works; {a.dev}: '
          f'conn_probes +{delta(ca0, ca1, "conn_probes")}, conns_peer_gone +{delta(ca0, ca1, "conns_peer_gone")}, '
          f'old QP {state_name(a.state())}')
    check(delta(ca0, ca1, 'conns_peer_gone') == 1, f'{a.dev}: conns_peer_gone grew by {delta(ca0, ca1, "conns_peer_gone")}')
    check(a.state() == e.IBV_QPS_ERR, f'{a.dev}: old QP in {state_name(a.state())}, want ERR')
    for x in (a, b):
        x.close()
    check_open(ARGS.dev_a, 1)
    check_open(ARGS.dev_b, 1)
    exchange(a2, b2, 0x23)
    for x in (a2, b2):
        x.close()
    check_open(ARGS.dev_a, 0)
    check_open(ARGS.dev_b, 0)


def case_peer_restart():
    a, b = End(ARGS.dev_a), End(ARGS.dev_b)
    connect(a, b)
    exchange(a, b, 0x31)
    ca0 = counters(ARGS.dev_a)
    b.close()
    recreate_peer()
    time.sleep(1.2)
    a2, b2 = End(ARGS.dev_a), End(ARGS.dev_b)
    connect(a2, b2, 0x50000, 0x60000)
    exchange(a2, b2, 0x32)
    ca1 = counters(ARGS.dev_a)
    print(f'{ARGS.dev_b} created again: a new pair works; {a.dev}: conn_probes +{delta(ca0, ca1, "conn_probes")}, '
          f'conns_peer_gone +{delta(ca0, ca1, "conns_peer_gone")}, old QP {state_name(a.state())}')
    check(delta(ca0, ca1, 'conns_peer_gone') == 1, f'{a.dev}: conns_peer_gone grew by {delta(ca0, ca1, "conns_peer_gone")}')
    check(a.state() == e.IBV_QPS_ERR, f'{a.dev}: old QP in {state_name(a.state())}, want ERR')
    a.close()
    check_open(ARGS.dev_a, 1)
    exchange(a2, b2, 0x33)
    for x in (a2, b2):
        x.close()
    check_open(ARGS.dev_a, 0)
    check_open(ARGS.dev_b, 0)


def case_restart_hint():
    a, b = End(ARGS.dev_a), End(ARGS.dev_b)
    connect(a, b)
    exchange(a, b, 0x41)
    ca0 = counters(ARGS.dev_a)
    b.close()
    recreate_peer()
    # The restarted side sends first, to a QP of ours that is not bound yet.
    a2, b2 = End(ARGS.dev_a), End(ARGS.dev_b)
    to_init(a2)
    to_init(b2)
    post_recv(a2, 1)
    post_recv(b2, 1)
    to_rtr(b2, a2, 0x70000)
    to_rts(b2, 0x80000)
    post_send(b2, 2, b'\x42' * MSG)
    # Our old connection finds the peer gone and closes: the old QP goes to ERR.
    wait_state(a, e.IBV_QPS_ERR)
    wait_counter(ARGS.dev_a, 'conns_peer_gone', ca0.get('conns_peer_gone', 0) + 1)
    to_rtr(a2, b2, 0x80000)
    to_rts(a2, 0x70000)
    post_send(a2, 2, b'\x43' * MSG)
    for x, want in ((a2, b'\x42'), (b2, b'\x43')):
        for wc in poll(x.cq, 2, 20.0, f'{x.dev}: first exchange'):
            check(wc.status == e.IBV_WC_SUCCESS, f'{x.dev}: wr {wc.wr_id} completed with {status_name(wc.status)}')
        check(x.mr.read(MSG, MSG) == want * MSG, f'{x.dev}: wrong data received')
    ca1 = counters(ARGS.dev_a)
    print(f'the restarted {ARGS.dev_b} sent first: {a.dev} probed (+{delta(ca0, ca1, "conn_probes")}), '
          f'found it gone, the new pair works')
    a.close()
    exchange(a2, b2, 0x44)
    for x in (a2, b2):
        x.close()
    check_open(ARGS.dev_a, 0)
    check_open(ARGS.dev_b, 0)


def case_forged_open():
    a, b = End(ARGS.dev_a), End(ARGS.dev_b)
    connect(a, b)
    exchange(a, b, 0x51)
    cb = the_conn(ARGS.dev_b, ADDR['a'])
    time.sleep(0.3)
    cb0 = counters(ARGS.dev_b)
    fake = (cb['peer_id'] ^ 0x5a5a5a5a) or 1
    send_from(ARGS.ns_a, ADDR['a'], ADDR['b'], control(OPEN, 0, fake, flags=FLAG_OPEN))
    time.sleep(1.0)
    cb1 = counters(ARGS.dev_b)
    print(f'an OPEN with a new connection id from {ADDR["a"]}: conn_probes +{delta(cb0, cb1, "conn_probes")}, '
          f'conns_peer_gone +{delta(cb0, cb1, "conns_peer_gone")}, QP {state_name(b.state())}')
    check(delta(cb0, cb1, 'conn_probes') == 1, f'{b.dev}: conn_probes grew by {delta(cb0, cb1, "conn_probes")}, want 1')
    check(delta(cb0, cb1, 'conns_peer_gone') == 0, f'{b.dev}: the connection was closed')
    check(b.state() == e.IBV_QPS_RTS, f'{b.dev}: QP in {state_name(b.state())}')
    check(the_conn(ARGS.dev_b, ADDR['a'])['id'] == cb['id'], f'{b.dev}: not the same connection')
    exchange(a, b, 0x52)
    for x in (a, b):
        x.close()
    check_open(ARGS.dev_a, 0)
    check_open(ARGS.dev_b, 0)


def case_linger():
    netem = ['ip', 'netns', 'exec', ARGS.ns_b, 'tc', 'qdisc']
    for warm in (True, False):
        what = 'after an exchange' if warm else 'as the first packet of the connection'
        a, b = End(ARGS.dev_a), End(ARGS.dev_b)
        connect(a, b)
        if warm:
            exchange(a, b, 0x61)
        cb0 = counters(ARGS.dev_b)
        post_recv(b, 1)
        # Everything B sends is lost, its ACKs of the SEND too.
        subprocess.run(netem + ['add', 'dev', 'vethB', 'root', 'netem', 'loss', '100%'], check=True)
        try:
            post_send(a, 2, b'\x62' * MSG)
            wc = poll(b.cq, 1, 20.0, f'{b.dev}: the SEND {what}')[0]
            check(wc.status == e.IBV_WC_SUCCESS, f'{b.dev}: receive completed with {status_name(wc.status)}')
            check(b.mr.read(MSG, MSG) == b'\x62' * MSG, f'{b.dev}: wrong data received')
            # At once, as ibv_rc_pingpong after its last receive.
            b.close()
            lingering = [c for c in conns(ARGS.dev_b) if c['peer'] == ADDR['a'] and c['lingering']]
            if lingering and warm:
                # It takes no new work: a probe of its peer (a CONTROL OPEN with both
                # ids) goes unanswered, as if the connection had gone. Sent from here
                # (namespace A), at once.
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
                    sock.bind((ADDR['a'], 0))
                    sock.sendto(control(OPEN, lingering[0]['id'], lingering[0]['peer_id']),
                                (ADDR['b'], UDP_PORT))
        finally:
            subprocess.run(netem + ['del', 'dev', 'vethB', 'root'], check=True)
        wc = poll(a.cq, 1, 20.0, f'{a.dev}: the SEND\'s completion {what}')[0]
        cb1 = counters(ARGS.dev_b)
        print(f'{what}: {a.dev}\'s SEND completed with {status_name(wc.status)}; {ARGS.dev_b}: '
              f'conns_lingered +{delta(cb0, cb1, "conns_lingered")}, '
              f'rx_closed_qp_acked +{delta(cb0, cb1, "rx_closed_qp_acked")}, '
              f'rx_linger_probes +{delta(cb0, cb1, "rx_linger_probes")}')
        check(wc.status == e.IBV_WC_SUCCESS, f'{a.dev}: SEND {what} completed with {status_name(wc.status)}')
        check(len(lingering) == 1, f'{ARGS.dev_b}: no lingering connection after its QP went: {conns(ARGS.dev_b)}')
        probes = delta(cb0, cb1, 'rx_linger_probes')
        check(probes == int(warm), f'{ARGS.dev_b}: rx_linger_probes grew by {probes}, want {int(warm)}')
        check(delta(cb0, cb1, 'conns_lingered') == 1, f'{ARGS.dev_b}: conns_lingered grew by '
              f'{delta(cb0, cb1, "conns_lingered")}, want 1')
        check(delta(cb0, cb1, 'rx_closed_qp_acked') >= 1, f'{ARGS.dev_b}: no retransmission acknowledged')
        a.close()
        check_open(ARGS.dev_a, 0)
        check_open(ARGS.dev_b, 0)
        # Both lingering connections go once the peers are quiet (500 ms).
        deadline = time.monotonic() + 5
        while any(conns(d) for d in (ARGS.dev_a, ARGS.dev_b)) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [conns(d) for d in (ARGS.dev_a, ARGS.dev_b)]
        check(left == [[], []], f'connections left 5 s after the QPs went: {left}')


def to_reset(x):
    x.qp.modify(QPAttr(qp_state=e.IBV_QPS_RESET), e.IBV_QP_STATE)


def rtr_to(x, addr, qpn):
    """INIT -> RTR towards addr (an IPv4-mapped GID like x's own), remote QP qpn."""
    prefix = str(x.gid).rsplit(':', 2)[0]
    o = [int(p) for p in addr.split('.')]
    peer = types.SimpleNamespace(qp=types.SimpleNamespace(qp_num=qpn),
                                 gid=GID(f'{prefix}:{o[0] << 8 | o[1]:04x}:{o[2] << 8 | o[3]:04x}'))
    to_rtr(x, peer, 0)


def case_modify_race():
    subprocess.run(['ip', 'neigh', 'replace', '198.18.0.9', 'lladdr', '02:00:00:00:00:09', 'dev', 'vethA',
                    'nud', 'permanent'], check=True)
    a = End(ARGS.dev_a)
    c0 = counters(ARGS.dev_a)
    to_init(a)
    rounds = 1500
    child = os.fork()
    if child == 0:
        # RTR -> RESET -> INIT -> RTR towards 198.18.0.9, through the shared uverbs file.
        ok = 0
        for _ in range(rounds):
            for step in (lambda: to_reset(a), lambda: to_init(a), lambda: rtr_to(a, '198.18.0.9', 0x99)):
                try:
                    step()
                    ok += 1
                except PyverbsError:
                    pass
        print(f'child: {ok} transitions')
        sys.stdout.flush()
        os._exit(0)
    ok = 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            rtr_to(a, ADDR['b'], 0x98)
            ok += 1
        except PyverbsError:
            pass
        pid, _ = os.waitpid(child, os.WNOHANG)
        if pid:
            break
    else:
        os.kill(child, 9)
        os.waitpid(child, 0)
    c1 = counters(ARGS.dev_a)
    print(f'parent: {ok} INIT->RTR; bindings made {delta(c0, c1, "qps_bound")}, '
          f'connections opened {delta(c0, c1, "conns_opened")}')
    to_reset(a)
    a.close()
    check_open(ARGS.dev_a, 0)
    left = conns(ARGS.dev_a)
    check(not left, f'{ARGS.dev_a}: connections left after the QP was destroyed: {left}')


CASES = {'wrong_peer': case_wrong_peer, 'peer_close': case_peer_close, 'peer_restart': case_peer_restart,
         'restart_hint': case_restart_hint, 'forged_open': case_forged_open, 'modify_race': case_modify_race,
         'linger': case_linger}


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument('case', choices=sorted(CASES))
    p.add_argument('dev_a')
    p.add_argument('dev_b')
    p.add_argument('--ns-a', required=True)
    p.add_argument('--ns-b', required=True)
    ARGS = p.parse_args()
    # `ip netns exec` mounts a sysfs of its own over /sys: debugfs is not in it.
    if not os.path.isdir('/sys/kernel/debug/metaroce'):
        subprocess.run(['mount', '-t', 'debugfs', 'none', '/sys/kernel/debug'], check=True)
    try:
        CASES[ARGS.case]()
    except (Fail, PyverbsError, subprocess.CalledProcessError) as ex:
        print(f'FAIL: {ex}')
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
