# SPDX-License-Identifier: GPL-2.0
"""A MetaRoCE peer for the compliance suite: one connection, one QP, over plain
UDP sockets, built on mrwire (the spec's tables) only.

The peer opens the connection as the spec says ("Opening without a round
trip"): its first packets carry OPEN and dst_conn = 0 and it learns the
implementation's id from the first packet that comes back. The QP numbers and
the verbs PSNs (sq_psn / rq_psn, [MR-QP-5]) are agreed out of band, as an
application agrees them; they fix every stream number.
"""

import random
import select
import socket
import struct
import time

import mrwire as w


class Peer:
    """One connection from the suite to the implementation under test (IUT)."""

    def __init__(self, bind_ip, iut, qpn=0x11, iut_qpn=0x11, sq_psn=0, rq_psn=0,
                 paths=4, mtu=1024, recv_port=w.UDP_PORT, conn_id=None, log=None):
        self.iut = iut                      # (ip, port) of the IUT's MetaRoCE socket
        self.bind_ip = bind_ip
        self.conn = conn_id or (random.getrandbits(32) | 1)
        self.iut_conn = 0                   # learned ([MR-CONN-5])
        self.iut_knows_us = False
        self.qpn, self.iut_qpn = qpn, iut_qpn
        self.paths, self.mtu = paths, mtu
        self.log = log or (lambda *_: None)
        self.rx = _bind(bind_ip, recv_port)
        self.socks = [self._path_socket() for _ in range(paths)]
        self.next_psn = [w.initial_psn(self.conn, p) for p in range(paths)]
        # Request stream we send ([MR-QP-5], from our sq_psn).
        self.next_msn = w.initial_psn(sq_psn, 0)
        self.next_ssn = w.initial_psn(sq_psn, 1)
        self.next_rsn = 0
        # Streams the IUT sends to us: its requests (from our rq_psn) and its
        # responses to our requests (from our sq_psn).
        self.iut_req_msn0 = w.initial_psn(rq_psn, 0)
        self.iut_req_ssn0 = w.initial_psn(rq_psn, 1)
        self.iut_resp_ssn0 = w.initial_psn(sq_psn, 2)
        self.rxstate = {}                   # IUT path -> [cum, set of PSNs]
        self.auto_ack = True
        self.hold_paths = set()             # IUT paths left out of automatic ACKs
        self.ce_counts = {}                 # ce_count we report per IUT path
        self.rate_hint = 0
        self.seen = []                      # every packet of this connection
        self.stray = 0
        self.closed = False

    def _path_socket(self):
        for _ in range(64):
            port = 0xC000 | random.getrandbits(14)   # [MR-PATH-2]
            try:
                return _bind(self.bind_ip, port)
            except OSError:
                continue
        return _bind(self.bind_ip, 0)

    def close_sockets(self):
        self.closed = True
        for s in self.socks + [self.rx]:
            s.close()

    # --- sending ------------------------------------------------------------

    def dst(self):
        return self.iut_conn if self.iut_conn else 0

    def hdr_flags(self, flags):
        return flags | (0 if self.iut_conn else w.OPEN)     # [MR-CONN-7]

    def send_raw(self, raw, path=0, sock=None):
        (sock or self.socks[path % self.paths]).sendto(raw, self.iut)

    def take_psn(self, path):
        q = self.next_psn[path]
        self.next_psn[path] = w.add(q, 1)
        return q

    def data(self, ptype, flags, path, msn, ssn, offset, ext, payload=b"", psn=None,
             dst=None, src=None, send=True):
        if psn is None:
            psn = self.take_psn(path)
        raw = w.data(ptype, self.hdr_flags(flags), path, self.dst() if dst is None else dst,
                     self.conn if src is None else src, psn, self.iut_qpn, msn, ssn, offset,
                     ext, payload)
        if send:
            self.send_raw(raw, path)
        return psn, raw

    def alloc(self, nsegs=1):
        """MSN and first SSN of a new message of nsegs segments ([MR-OP-9])."""
        msn, ssn = self.next_msn, self.next_ssn
        self.next_msn = w.add(msn, 1)
        self.next_ssn = w.add(ssn, nsegs)
        return msn, ssn

    def segments(self, length, mtu=None):
        mtu = mtu or self.mtu
        n = max(1, -(-length // mtu))
        return [(k, k * mtu, min(length, (k + 1) * mtu)) for k in range(n)]

    def write(self, rkey, va, payload, path=0, order=None, mtu=None, ack_req=True,
              total_len=None):
        """A WRITE, segmented as [MR-OP-1]; returns [(psn, path)]."""
        segs = self.segments(len(payload), mtu)
        msn, ssn0 = self.alloc(len(segs))
        tl = len(payload) if total_len is None else total_len
        out = []
        for i in (order or range(len(segs))):
            k, a, b = segs[i]
            f = (w.FIRST if k == 0 else 0) | (w.LAST if k == len(segs) - 1 else 0)
            p = (path + i) % self.paths if order else path
            psn, _ = self.data(w.WRITE, f | (w.ACK_REQ if ack_req else 0), p, msn,
                               w.add(ssn0, k), a, w.ext_write(rkey, va, tl), payload[a:b])
            out.append((psn, p))
        return out

    def send_msg(self, payload, path=0, order=None, mtu=None, rsn=None):
        segs = self.segments(len(payload), mtu)
        msn, ssn0 = self.alloc(len(segs))
        if rsn is None:
            rsn, self.next_rsn = self.next_rsn, self.next_rsn + 1
        out = []
        for i in (order or range(len(segs))):
            k, a, b = segs[i]
            f = (w.FIRST if k == 0 else 0) | (w.LAST if k == len(segs) - 1 else 0) | w.ACK_REQ
            p = (path + i) % self.paths if order else path
            psn, _ = self.data(w.SEND, f, p, msn, w.add(ssn0, k), a,
                               w.ext_send(rsn, len(payload)), payload[a:b])
            out.append((psn, p))
        return out

    def read_request(self, rkey, va, length, path=0):
        """Sends a READ_REQ; returns its MSN."""
        msn, ssn = self.alloc(1)
        self.data(w.READ_REQ, w.FIRST | w.LAST | w.ACK_REQ, path, msn, ssn, 0,
                  w.ext_read(rkey, va, length))
        return msn

    def read(self, rkey, va, length, path=0, timeout=1.0):
        """READ; returns (bytes or None, [READ_RESP packets], msn)."""
        msn = self.read_request(rkey, va, length, path)
        resp = self.collect(lambda p: p.type == w.READ_RESP and p.msn == msn,
                            until=lambda got: _complete(got, length), timeout=timeout)
        if not _complete(resp, length):
            return None, resp, msn
        buf = bytearray(length)
        for p in resp:
            buf[p.offset:p.offset + len(p.payload)] = p.payload
        return bytes(buf), resp, msn

    def atomic(self, ptype, rkey, va, compare_add, swap=0, path=0, timeout=1.0, flags=None,
               msn_ssn=None):
        msn, ssn = msn_ssn or self.alloc(1)
        f = w.FIRST | w.LAST | w.ACK_REQ if flags is None else flags
        self.data(ptype, f, path, msn, ssn, 0, w.ext_atomic(rkey, va, compare_add, swap))
        got = self.collect(lambda p: p.type == w.ATOMIC_RESP and p.msn == msn,
                           until=lambda g: len(g) >= 1, timeout=timeout)
        return (got[0] if got else None), (msn, ssn)

    def ack_packet(self, blocks=None, rate_hint=None, **kw):
        """An ACK of what we received from the IUT (or of the given blocks)."""
        if blocks is None:
            blocks = [self.block(p) for p in sorted(self.rxstate) if p not in self.hold_paths]
        raw = w.ack(self.dst(), self.conn, blocks,
                    self.rate_hint if rate_hint is None else rate_hint, **kw)
        return raw

    def send_ack(self, blocks=None, path=0, **kw):
        self.send_raw(self.ack_packet(blocks, **kw), path)

    def block(self, p):
        cum, got = self.rxstate[p]
        return {"path": p, "cum_psn": cum, "sack": set(got), "ce_count": self.ce_counts.get(p, 0)}

    def control(self, code, path=0, value=0, length=24):
        raw = w.control(self.dst(), self.conn, code, path, value, self.hdr_flags(0))
        self.send_raw(raw[:length], 0)

    def close(self):
        self.control(w.CTL_CLOSE)

    # --- receiving ----------------------------------------------------------

    def recv(self, timeout):
        """The next packet of this connection, or None after timeout seconds."""
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([self.rx], [], [], left)
            if not r:
                return None
            raw, anc, _, src = self.rx.recvmsg(65536, socket.CMSG_SPACE(16))
            p = w.Packet(raw, src[1])
            p.src_ip, p.t = src[0], time.monotonic()
            p.kt = _kernel_time(anc, p.t)
            if p.error or p.dst_conn != self.conn or src[0] != self.iut[0]:
                self.stray += 1
                continue
            if not self.iut_conn:
                self.iut_conn = p.src_conn                    # [MR-CONN-5]
            if p.src_conn != self.iut_conn:
                self.stray += 1
                continue
            self.seen.append(p)
            self.log(f"  rx {p}")
            if p.type in w.DATA_HEADER_LEN:
                self._note(p)
            elif p.type == w.CONTROL and p.code == w.CTL_PATH_FLOOR:
                self._floor(p)
            return p

    def _note(self, p):
        st = self.rxstate.setdefault(p.path, [w.initial_psn(self.iut_conn, p.path), set()])
        d = w.seq_diff(p.psn, st[0])
        if 0 <= d < w.SACK_BITS:
            st[1].add(p.psn)
            while st[0] in st[1]:
                st[1].discard(st[0])
                st[0] = w.add(st[0], 1)
        if self.auto_ack:
            self.send_ack()

    def _floor(self, p):
        """Our side of [MR-SACK-19]: advance to the floor, acknowledge."""
        st = self.rxstate.setdefault(p.ctl_path, [w.initial_psn(self.iut_conn, p.ctl_path), set()])
        if 0 < w.seq_diff(p.value, st[0]) < w.PSN_ACCEPT_WINDOW:
            st[0] = p.value
            st[1] = {q for q in st[1] if w.seq_diff(q, st[0]) >= 0}
            while st[0] in st[1]:
                st[1].discard(st[0])
                st[0] = w.add(st[0], 1)
        if self.auto_ack:
            self.send_ack()

    def collect(self, match, until=lambda got: False, timeout=0.5):
        """Packets that match, until `until(got)` holds or timeout passes."""
        got, end = [], time.monotonic() + timeout
        while not until(got):
            p = self.recv(end - time.monotonic())
            if p is None:
                break
            if match(p):
                got.append(p)
        return got

    def quiet(self, timeout=0.05):
        """Every packet within timeout (to check that nothing answers)."""
        return self.collect(lambda p: True, timeout=timeout)

    def ack_for(self, path, timeout=0.5):
        """The next ACK with a block for path."""
        got = self.collect(lambda p: p.type == w.ACK and path in p.blocks,
                           until=lambda g: len(g) >= 1, timeout=timeout)
        return got[0] if got else None

    def open(self, rkey, va, timeout=1.0):
        """Opens the connection with a one-byte WRITE; returns its ACK or None."""
        self.write(rkey, va, b"\x5a", path=0)
        return self.ack_for(0, timeout)


def _complete(resp, length):
    distinct = {p.ssn: p for p in resp}.values()
    return sum(len(p.payload) for p in distinct) >= length and any(p.flags & w.LAST for p in resp) \
        or any(p.status != 0 for p in resp)


# Linux's SO_TIMESTAMPNS (= SCM_TIMESTAMPNS), which Python does not name.
SO_TIMESTAMPNS = 35


def _kernel_time(anc, default):
    """When the kernel received a datagram (CLOCK_REALTIME, from recvmsg's
    ancillary data): unlike the time it was read, not moved by how late this
    process was scheduled to read it."""
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            sec, nsec = struct.unpack("qq", data[:16])
            return sec + nsec * 1e-9
    return default


def _bind(ip, port):
    fam = socket.AF_INET6 if ":" in ip else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.bind((ip, port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    return s


def random_bytes(n, seed):
    r = random.Random(seed)
    return bytes(r.getrandbits(8) for _ in range(n))

