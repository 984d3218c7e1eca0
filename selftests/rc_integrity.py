#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
#
# RC data integrity through stock rdma-core and pyverbs: one RC QP on each of two
# devices, random batches of RDMA WRITE, WRITE_WITH_IMM, READ, SEND and SEND_WITH_IMM
# in both directions at once, at random unaligned offsets and lengths (1 B .. 256 KiB,
# and some of 1 .. 3.5 MiB), gathered from and scattered to up to 4 SGEs. Every byte of
# both MRs is checked against a shadow copy: the target range holds the data, nothing
# outside it changed. Then the atomics: chains of FETCH_AND_ADD and CMP_AND_SWAP (hits
# and misses) in flight together, each result checked against in-order, exactly-once
# execution. Run by rc_integrity.sh, clean and under netem loss and reordering:
#   rc_integrity.py DEV_A DEV_B [--seed N] [--batches N] [--atomics N] [--one-way]
# Prints the seed; exits 0 on success, prints why and exits 1 on failure.
#
# What an application relies on, and this checks:
# - a WRITE's data is in place when a later SEND or WRITE_WITH_IMM on the same QP
#   completes at the receiver (checked at that receive completion, before the
#   requester's completions are polled);
# - a receive completion reports the message length and the immediate; the part of a
#   receive buffer past the message is not written; WRITE_WITH_IMM leaves the
#   receive's buffer untouched;
# - send completions arrive in posting order, receive completions in posting order;
# - atomics execute once each, in order (retransmission must not repeat an add).

import argparse
import random
import struct
import sys
import time

import pyverbs.enums as e
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.wr import SGE, RecvWR, SendWR

from rc_common import Fail, Side, check, connect, poll, status_name

MR_SIZE = 8 << 20          # per side; every op's regions are placed inside it
GUARD = 64                 # bytes around every region that must stay untouched
SMALL_MAX = 256 << 10
BIG_MIN, BIG_MAX = 1 << 20, (7 << 19)
MAX_SGE = 4
BATCH_TIMEOUT = 240.0      # seconds for one batch's completions (loss under TCG)

OPS = ('WRITE', 'WRITE_IMM', 'READ', 'SEND', 'SEND_IMM')
SEND_OPCODE = {'WRITE': e.IBV_WR_RDMA_WRITE, 'WRITE_IMM': e.IBV_WR_RDMA_WRITE_WITH_IMM,
               'READ': e.IBV_WR_RDMA_READ, 'SEND': e.IBV_WR_SEND,
               'SEND_IMM': e.IBV_WR_SEND_WITH_IMM}
SEND_WC = {'WRITE': e.IBV_WC_RDMA_WRITE, 'WRITE_IMM': e.IBV_WC_RDMA_WRITE,
           'READ': e.IBV_WC_RDMA_READ, 'SEND': e.IBV_WC_SEND, 'SEND_IMM': e.IBV_WC_SEND,
           'CAS': e.IBV_WC_COMP_SWAP, 'FAA': e.IBV_WC_FETCH_ADD}


class Peer:
    """A side with its data MR and the shadow of what the MR must hold."""

    def __init__(self, dev, rng):
        self.s = Side(dev, send_wr=128, recv_wr=128, sge=MAX_SGE, cqe=1024)
        self.name = dev
        self.mr = self.s.mr(MR_SIZE)
        self.shadow = bytearray(rng.randbytes(MR_SIZE))
        self.mr.write(bytes(self.shadow), MR_SIZE, 0)
        self.used = []           # regions (start, end) of the current batch, with guards

    def alloc(self, rng, length):
        """A random region of length bytes, clear of the batch's other regions."""
        for _ in range(1000):
            off = rng.randrange(GUARD, MR_SIZE - length - GUARD + 1)
            lo, hi = off - GUARD, off + length + GUARD
            if all(hi <= a or lo >= b for a, b in self.used):
                self.used.append((lo, hi))
                return off
        return None

    def fill(self, rng, off, length):
        """Writes fresh random bytes into the MR at off (a local store, no op in flight)."""
        data = rng.randbytes(length)
        self.mr.write(data, length, off)
        self.shadow[off:off + length] = data

    def verify(self, off, length, what):
        lo, hi = max(0, off - GUARD), min(MR_SIZE, off + length + GUARD)
        got = self.mr.read(hi - lo, lo)
        want = bytes(self.shadow[lo:hi])
        if got != want:
            i = next(i for i in range(hi - lo) if got[i] != want[i])
            where = 'inside' if off <= lo + i < off + length else 'OUTSIDE'
            n = sum(1 for a, b in zip(got, want) if a != b)
            raise Fail(f'{what}: {self.name} byte {lo + i} ({where} the target '
                       f'[{off}, {off + length})) is {got[i]:#04x}, want {want[i]:#04x}; '
                       f'{n} bytes differ in [{lo}, {hi})')

    def verify_all(self, what):
        got = self.mr.read(MR_SIZE, 0)
        if got != bytes(self.shadow):
            i = next(i for i in range(MR_SIZE) if got[i] != self.shadow[i])
            raise Fail(f'{what}: {self.name} MR byte {i} is {got[i]:#04x}, '
                       f'want {self.shadow[i]:#04x}')


def split(rng, length, pieces):
    """length as pieces positive parts."""
    pieces = max(1, min(pieces, length))
    cuts = sorted(rng.sample(range(1, length), pieces - 1)) if pieces > 1 else []
    edges = [0] + cuts + [length]
    return [edges[i + 1] - edges[i] for i in range(pieces)]


def regions(peer, rng, length, pieces):
    """Scatter/gather list: [(offset, length)] of up to pieces regions in peer's MR."""
    out = []
    for part in split(rng, length, pieces):
        off = peer.alloc(rng, part)
        if off is None:
            return None
        out.append((off, part))
    return out


def sges(peer, regs):
    return [SGE(peer.mr.buf + off, n, peer.mr.lkey) for off, n in regs]


class Op:
    def __init__(self, kind, src, dst, length):
        self.kind, self.src, self.dst, self.length = kind, src, dst, length
        self.local = []      # requester's gather (or READ scatter) regions
        self.remote = None   # (offset, length) in the responder's MR for RDMA ops
        self.recv = []       # receive scatter regions at the responder
        self.recv_len = 0
        self.imm = None
        self.before = []     # earlier WRITEs on the same QP in this batch
        self.wr_id = 0

    def __str__(self):
        return (f'{self.kind} {self.length} B {self.src.name}->{self.dst.name} '
                f'local {self.local} remote {self.remote} recv {self.recv}')


def plan_op(rng, kind, src, dst, length, batch_writes):
    """Chooses the regions of one op and stores the expected result in the shadows."""
    op = Op(kind, src, dst, length)
    npieces = rng.randint(1, MAX_SGE)
    op.local = regions(src, rng, length, npieces)
    if op.local is None:
        return None
    if kind in ('WRITE', 'WRITE_IMM', 'READ'):
        off = dst.alloc(rng, length)
        if off is None:
            return None
        op.remote = (off, length)
    if kind in ('SEND', 'SEND_IMM'):
        slack = rng.choice((0, 0, 1, rng.randint(1, 4096)))
        op.recv_len = length + slack
        op.recv = regions(dst, rng, op.recv_len, rng.randint(1, MAX_SGE))
        if op.recv is None:
            return None
    if kind == 'WRITE_IMM':
        # The receive a WRITE_WITH_IMM consumes has a buffer, which must stay untouched.
        op.recv_len = rng.randint(1, 512)
        op.recv = regions(dst, rng, op.recv_len, 1)
        if op.recv is None:
            return None
    if kind in ('WRITE_IMM', 'SEND_IMM'):
        op.imm = rng.getrandbits(32)

    if kind == 'READ':
        dst.fill(rng, op.remote[0], length)
        data = bytes(dst.shadow[op.remote[0]:op.remote[0] + length])
        pos = 0
        for off, n in op.local:
            src.shadow[off:off + n] = data[pos:pos + n]
            pos += n
    else:
        for off, n in op.local:
            src.fill(rng, off, n)
        data = b''.join(bytes(src.shadow[off:off + n]) for off, n in op.local)
        if op.remote:
            dst.shadow[op.remote[0]:op.remote[0] + length] = data
        if kind in ('SEND', 'SEND_IMM'):
            pos = 0
            for off, n in op.recv:
                take = min(n, length - pos)
                if take > 0:
                    dst.shadow[off:off + take] = data[pos:pos + take]
                pos += take
    if kind in ('WRITE', 'WRITE_IMM'):
        batch_writes.append(op)
    if kind in ('SEND', 'SEND_IMM', 'WRITE_IMM'):
        op.before = [w for w in batch_writes if w.src is src and w is not op]
    return op


def post(op):
    src, dst = op.src, op.dst
    wr = SendWR(wr_id=op.wr_id, opcode=SEND_OPCODE[op.kind], num_sge=len(op.local),
                sg=sges(src, op.local), send_flags=e.IBV_SEND_SIGNALED)
    if op.remote:
        wr.set_wr_rdma(dst.mr.rkey, dst.mr.buf + op.remote[0])
    if op.imm is not None:
        wr.imm_data = op.imm
    src.s.qp.post_send(wr)


def post_recv(op):
    op.dst.s.qp.post_recv(RecvWR(wr_id=op.wr_id, num_sge=len(op.recv), sg=sges(op.dst, op.recv)))


def verify_op(op, what):
    if op.kind == 'READ':
        for off, n in op.local:
            op.src.verify(off, n, what)
        op.dst.verify(op.remote[0], op.length, what)
    else:
        for off, n in op.local:
            op.src.verify(off, n, what)
        if op.remote:
            op.dst.verify(op.remote[0], op.length, what)
        for off, n in op.recv:
            op.dst.verify(off, n, what)


def run_batch(rng, peers, bno, big, stats, one_way=False):
    for p in peers:
        p.used = []
    ops, writes = [], {id(p): [] for p in peers}
    nops = rng.randint(1, 2) if big else rng.randint(1, 12)
    for _ in range(nops):
        src = peers[0] if one_way else rng.choice(peers)
        dst = peers[1] if src is peers[0] else peers[0]
        if big:
            kind = rng.choice(('WRITE', 'READ', 'SEND', 'WRITE_IMM'))
            length = rng.randint(BIG_MIN, BIG_MAX)
        else:
            kind = rng.choice(OPS)
            length = min(SMALL_MAX, max(1, int(2 ** rng.uniform(0, 18.01))))
        op = plan_op(rng, kind, src, dst, length, writes[id(src)])
        if op is None:
            break      # the MR is full for this batch
        op.wr_id = (bno << 8) | len(ops)
        ops.append(op)
        stats[kind] = stats.get(kind, 0) + length

    # Receives first (in op order per receiver), then the sends in op order.
    for op in ops:
        if op.recv:
            post_recv(op)
    for op in ops:
        post(op)

    # Receive completions: in posting order, each checked when it arrives, together
    # with every WRITE posted before it on the same QP.
    for p in peers:
        rops = [op for op in ops if op.dst is p and op.recv]
        if not rops:
            continue
        wcs = poll(p.s.rcq, len(rops), BATCH_TIMEOUT, f'batch {bno}: receives at {p.name}')
        for op, wc in zip(rops, wcs):
            what = f'batch {bno}: {op}'
            check(wc.status == e.IBV_WC_SUCCESS,
                  f'{what}: receive status {status_name(wc.status)}')
            check(wc.wr_id == op.wr_id, f'{what}: receive wr_id {wc.wr_id:#x}, want {op.wr_id:#x} '
                  '(receive completions out of order)')
            check(wc.byte_len == op.length, f'{what}: byte_len {wc.byte_len}, want {op.length}')
            if op.kind == 'WRITE_IMM':
                check(wc.opcode == e.IBV_WC_RECV_RDMA_WITH_IMM, f'{what}: receive opcode {wc.opcode}')
            else:
                check(wc.opcode == e.IBV_WC_RECV, f'{what}: receive opcode {wc.opcode}')
            if op.imm is not None:
                check(wc.wc_flags & e.IBV_WC_WITH_IMM, f'{what}: no IBV_WC_WITH_IMM')
                check(wc.imm_data == op.imm, f'{what}: imm {wc.imm_data:#x}, want {op.imm:#x}')
            else:
                check(not wc.wc_flags & e.IBV_WC_WITH_IMM, f'{what}: IBV_WC_WITH_IMM set')
            verify_op(op, what)
            for w in op.before:
                verify_op(w, f'{what}: earlier {w} not in place at this receive completion')

    # Send completions: in posting order per QP.
    for p in peers:
        sops = [op for op in ops if op.src is p]
        if not sops:
            continue
        wcs = poll(p.s.scq, len(sops), BATCH_TIMEOUT, f'batch {bno}: sends at {p.name}')
        for op, wc in zip(sops, wcs):
            what = f'batch {bno}: {op}'
            check(wc.status == e.IBV_WC_SUCCESS, f'{what}: status {status_name(wc.status)}')
            check(wc.wr_id == op.wr_id, f'{what}: wr_id {wc.wr_id:#x}, want {op.wr_id:#x} '
                  '(send completions out of order)')
            check(wc.opcode == SEND_WC[op.kind], f'{what}: opcode {wc.opcode}')
    for op in ops:
        verify_op(op, f'batch {bno}: {op}')
    return len(ops)


def atomics(rng, a, b, n, one_way=False):
    """FETCH_AND_ADD and CMP_AND_SWAP chains from both sides at once, up to 16 in flight."""
    peers = (a, b)
    amr = {p.name: p.s.mr(4096) for p in peers}     # targets: slot 0 FAA, slot 8 CAS
    rmr = {p.name: p.s.mr(8 * 64) for p in peers}   # results
    val = {}
    for p in peers:
        faa0, cas0 = rng.getrandbits(64), rng.getrandbits(64)
        amr[p.name].write(struct.pack('<QQ', faa0, cas0) + bytes(4096 - 16), 4096, 0)
        val[p.name] = [faa0, cas0]
    done = {p.name: 0 for p in peers}
    total = {'FAA': 0, 'CAS hit': 0, 'CAS miss': 0}
    rnd = 0
    senders = peers[:1] if one_way else peers
    while min(done[p.name] for p in senders) < n:
        rnd += 1
        expect = {}
        for src in senders:
            dst = b if src is a else a
            dname = dst.name
            k = min(16, n - done[src.name])
            exp = []
            for i in range(k):
                kind = rng.choice(('FAA', 'CAS'))
                wr = SendWR(wr_id=(rnd << 8) | i,
                            opcode=e.IBV_WR_ATOMIC_FETCH_AND_ADD if kind == 'FAA'
                            else e.IBV_WR_ATOMIC_CMP_AND_SWP, num_sge=1,
                            sg=[SGE(rmr[src.name].buf + 8 * i, 8, rmr[src.name].lkey)],
                            send_flags=e.IBV_SEND_SIGNALED)
                if kind == 'FAA':
                    add = rng.getrandbits(64) if rng.random() < 0.5 else rng.randint(1, 1000)
                    wr.set_wr_atomic(amr[dname].rkey, amr[dname].buf, add, 0)
                    exp.append(('FAA', val[dname][0]))
                    val[dname][0] = (val[dname][0] + add) & (2 ** 64 - 1)
                    total['FAA'] += 1
                else:
                    cur = val[dname][1]
                    hit = rng.random() < 0.7
                    cmp = cur if hit else (cur ^ (1 << rng.randrange(64)))
                    swap = rng.getrandbits(64)
                    wr.set_wr_atomic(amr[dname].rkey, amr[dname].buf + 8, cmp, swap)
                    exp.append(('CAS hit' if hit else 'CAS miss', cur))
                    if hit:
                        val[dname][1] = swap
                    total['CAS hit' if hit else 'CAS miss'] += 1
                src.s.qp.post_send(wr)
            expect[src.name] = exp
            done[src.name] += k
        for src in senders:
            exp = expect[src.name]
            wcs = poll(src.s.scq, len(exp), BATCH_TIMEOUT, f'atomics round {rnd} at {src.name}')
            for i, (wc, (kind, old)) in enumerate(zip(wcs, exp)):
                what = f'atomics round {rnd} {src.name} #{i} {kind}'
                check(wc.status == e.IBV_WC_SUCCESS, f'{what}: status {status_name(wc.status)}')
                check(wc.wr_id == (rnd << 8) | i, f'{what}: wr_id {wc.wr_id:#x} out of order')
                want_op = e.IBV_WC_FETCH_ADD if kind == 'FAA' else e.IBV_WC_COMP_SWAP
                check(wc.opcode == want_op, f'{what}: opcode {wc.opcode}')
                got = struct.unpack('<Q', rmr[src.name].read(8, 8 * i))[0]
                check(got == old, f'{what}: returned {got:#x}, want {old:#x} '
                      '(not executed once, in order)')
    for p in peers:
        faa, cas = struct.unpack('<QQ', amr[p.name].read(16, 0))
        check(faa == val[p.name][0], f'{p.name} FAA sum {faa:#x}, want {val[p.name][0]:#x}')
        check(cas == val[p.name][1], f'{p.name} CAS value {cas:#x}, want {val[p.name][1]:#x}')
        check(amr[p.name].read(4096 - 16, 16) == bytes(4096 - 16), f'{p.name}: atomics wrote past their target')
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('dev_a')
    ap.add_argument('dev_b')
    ap.add_argument('--seed', type=lambda x: int(x, 0), default=0x6d726f6365)
    ap.add_argument('--batches', type=int, default=48)
    ap.add_argument('--big-every', type=int, default=12, help='every Nth batch moves 1 .. 3.5 MiB')
    ap.add_argument('--atomics', type=int, default=200, help='atomics from each side')
    ap.add_argument('--one-way', action='store_true',
                    help='only DEV_A sends requests (DEV_B only responds)')
    args = ap.parse_args()
    print(f'seed {args.seed:#x} (rerun with --seed {args.seed:#x}), {args.batches} batches, '
          f'{args.atomics} atomics per side' + (', requests from DEV_A only' if args.one_way else ''))
    sys.stdout.flush()
    rng = random.Random(args.seed)
    a, b = Peer(args.dev_a, rng), Peer(args.dev_b, rng)
    connect(a.s, b.s, psn_a=rng.getrandbits(24), psn_b=rng.getrandbits(24))
    stats = {}
    t0 = time.monotonic()
    nops = 0
    for bno in range(1, args.batches + 1):
        big = args.big_every and bno % args.big_every == 0
        nops += run_batch(rng, (a, b), bno, big, stats, args.one_way)
        if bno % 8 == 0 or bno == args.batches:
            a.verify_all(f'after batch {bno}')
            b.verify_all(f'after batch {bno}')
    t1 = time.monotonic()
    print(f'{nops} ops in {t1 - t0:.1f} s: ' +
          ', '.join(f'{k} {v / 1048576:.1f} MiB' for k, v in sorted(stats.items())))
    total = atomics(rng, a, b, args.atomics, args.one_way)
    print(f'atomics in {time.monotonic() - t1:.1f} s: ' +
          ', '.join(f'{k} {v}' for k, v in total.items()))
    for p in (a, b):
        st = p.s.state()
        check(st == e.IBV_QPS_RTS, f'{p.name} QP in state {st} at the end, want RTS')


if __name__ == '__main__':
    try:
        main()
    except (Fail, PyverbsRDMAError) as ex:
        print(f'FAIL: {type(ex).__name__}: {ex}')
        sys.exit(1)
