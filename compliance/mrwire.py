# SPDX-License-Identifier: GPL-2.0
"""MetaRoCE draft v0 wire format, written from the tables of
Documentation/metaroce/spec.rst only (not from rust/proto's codec).

Every function names the spec table or section it follows. Big-endian
throughout ([MR-GEN-2]); the SACK bitmap is bit i mod 8 of byte i div 8,
LSB first ([MR-WIRE-14]).
"""

import struct

UDP_PORT = 4793
VERSION = 0xD0
MASK32 = 0xFFFFFFFF

# Packet types ("Packet types" table).
SEND, SEND_IMM, WRITE, WRITE_IMM, READ_REQ, READ_RESP = 0x01, 0x02, 0x03, 0x04, 0x05, 0x06
CMP_SWAP, FETCH_ADD, ATOMIC_RESP = 0x07, 0x08, 0x09
ACK, NAK, CONTROL, UD, UD_IMM = 0x10, 0x11, 0x12, 0x20, 0x21
TYPE_NAMES = {
    SEND: "SEND", SEND_IMM: "SEND_IMM", WRITE: "WRITE", WRITE_IMM: "WRITE_IMM",
    READ_REQ: "READ_REQ", READ_RESP: "READ_RESP", CMP_SWAP: "CMP_SWAP",
    FETCH_ADD: "FETCH_ADD", ATOMIC_RESP: "ATOMIC_RESP", ACK: "ACK", NAK: "NAK",
    CONTROL: "CONTROL", UD: "UD", UD_IMM: "UD_IMM",
}
# Header length per data type ([MR-WIRE-11]).
DATA_HEADER_LEN = {SEND: 40, SEND_IMM: 44, WRITE: 48, WRITE_IMM: 56, READ_REQ: 48,
                   READ_RESP: 40, CMP_SWAP: 60, FETCH_ADD: 60, ATOMIC_RESP: 44}

# Flags table.
FIRST, LAST, OPEN, ACK_REQ, SOLICITED = 0x01, 0x02, 0x04, 0x08, 0x10

# NAK codes and status codes.
RNR, ACCESS_ERROR, INVALID_REQUEST, REMOTE_OP_ERROR = 1, 2, 3, 4
STATUS_OK = 0

# CONTROL codes.
CTL_OPEN, CTL_CLOSE, CTL_PATH_FLOOR = 1, 2, 3

SACK_BITS = 256
PSN_ACCEPT_WINDOW = 512
PSN_BEHIND_WINDOW = 256


def initial_psn(c, p):
    """[MR-PSN-1], also stream_start(psn, k) of [MR-QP-5]."""
    m = (1 << 64) - 1
    x = (((c << 8) | p) + 0x9E3779B97F4A7C15) & m
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & m
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & m
    return (x ^ (x >> 31)) & MASK32


def seq_diff(a, b):
    """a - b as a signed 32-bit number ([MR-GEN-4])."""
    d = (a - b) & MASK32
    return d - (1 << 32) if d >= 1 << 31 else d


def add(a, n):
    return (a + n) & MASK32


# --- encoders -------------------------------------------------------------

def common(ptype, flags, path, dst_conn, src_conn, psn):
    """Common header (16 bytes)."""
    return struct.pack(">BBBBIII", VERSION, ptype, flags, path, dst_conn, src_conn, psn)


def data(ptype, flags, path, dst_conn, src_conn, psn, qpn, msn, ssn, offset, ext, payload=b""):
    """Data packet: common header, stream header, type extension, payload."""
    return (common(ptype, flags, path, dst_conn, src_conn, psn)
            + struct.pack(">IIII", qpn, msn, ssn, offset) + ext + payload)


def ext_send(rsn, total_len, imm=None):
    return struct.pack(">II", rsn, total_len) + (b"" if imm is None else struct.pack(">I", imm))


def ext_write(rkey, va, total_len, rsn=None, imm=None):
    e = struct.pack(">IQI", rkey, va, total_len)
    if rsn is not None:
        e += struct.pack(">II", rsn, imm)
    return e


def ext_read(rkey, va, length):
    return struct.pack(">IQI", rkey, va, length)


def ext_atomic(rkey, va, compare_add, swap=0):
    return struct.pack(">IQQQ", rkey, va, compare_add, swap)


def ack(dst_conn, src_conn, blocks, rate_hint=0, ack_delay=0, count=None):
    """ACK: blocks are dicts path, cum_psn, sack (set of PSNs), ce_count, dup_count."""
    out = common(ACK, 0, 0, dst_conn, src_conn, 0)
    out += struct.pack(">IHBB", rate_hint, ack_delay, len(blocks) if count is None else count, 0)
    for b in blocks:
        bits = bytearray(32)
        for q in b.get("sack", ()):
            i = seq_diff(q, b["cum_psn"])
            if 0 <= i < SACK_BITS:
                bits[i // 8] |= 1 << (i % 8)
        out += struct.pack(">BBHI", b["path"], b.get("dup_count", 0) & 0xFF,
                           b.get("ce_count", 0) & 0xFFFF, b["cum_psn"]) + bytes(bits)
    return out


def nak(dst_conn, src_conn, path, code, psn, qpn, msn, ssn, rnr_timer=0):
    return (common(NAK, 0, 0, dst_conn, src_conn, 0)
            + struct.pack(">BBBBIIII", path, code, rnr_timer, 0, psn, qpn, msn, ssn))


def control(dst_conn, src_conn, code, path=0, value=0, flags=0):
    return common(CONTROL, flags, 0, dst_conn, src_conn, 0) + struct.pack(">BBHI", code, path, 0, value)


# --- decoder --------------------------------------------------------------

class Packet:
    """A decoded datagram; .error says why it is malformed (None if well formed)."""

    def __init__(self, raw, sport=None):
        self.raw, self.sport, self.error = raw, sport, None
        if len(raw) < 16:
            self.error = "short"
            return
        (self.version, self.type, self.flags, self.path, self.dst_conn, self.src_conn,
         self.psn) = struct.unpack(">BBBBIII", raw[:16])
        if self.version != VERSION:
            self.error = "version"
        elif self.type in DATA_HEADER_LEN:
            self._data(raw)
        elif self.type == ACK:
            self._ack(raw)
        elif self.type == NAK:
            if len(raw) < 36:
                self.error = "short NAK"
                return
            (self.nak_path, self.code, self.rnr_timer, _r, self.nak_psn, self.qpn, self.msn,
             self.ssn) = struct.unpack(">BBBBIIII", raw[16:36])
        elif self.type == CONTROL:
            if len(raw) < 24:
                self.error = "short CONTROL"
                return
            self.code, self.ctl_path, _r, self.value = struct.unpack(">BBHI", raw[16:24])
        else:
            self.error = "type"

    @property
    def name(self):
        return TYPE_NAMES.get(getattr(self, "type", None), "?")

    def _data(self, raw):
        hl = DATA_HEADER_LEN[self.type]
        if len(raw) < hl:
            self.error = "short data"
            return
        self.qpn, self.msn, self.ssn, self.offset = struct.unpack(">IIII", raw[16:32])
        t, e = self.type, raw[32:hl]
        if t in (SEND, SEND_IMM):
            self.rsn, self.total_len = struct.unpack(">II", e[:8])
            self.imm = struct.unpack(">I", e[8:12])[0] if t == SEND_IMM else None
        elif t in (WRITE, WRITE_IMM, READ_REQ):
            self.rkey, self.va, self.total_len = struct.unpack(">IQI", e[:16])
            if t == WRITE_IMM:
                self.rsn, self.imm = struct.unpack(">II", e[16:24])
        elif t == READ_RESP:
            self.total_len, self.status = struct.unpack(">IB", e[:5])
        elif t == ATOMIC_RESP:
            self.orig, self.status = struct.unpack(">QB", e[:9])
        elif t in (CMP_SWAP, FETCH_ADD):
            self.rkey, self.va, self.compare_add, self.swap = struct.unpack(">IQQQ", e)
        self.payload = raw[hl:]

    def _ack(self, raw):
        if len(raw) < 24:
            self.error = "short ACK"
            return
        self.rate_hint, self.ack_delay, self.count, _r = struct.unpack(">IHBB", raw[16:24])
        if self.count > 16 or len(raw) < 24 + 40 * self.count:
            self.error = "ACK count"
            return
        self.blocks = {}
        for i in range(self.count):
            o = 24 + 40 * i
            path, dup, ce, cum = struct.unpack(">BBHI", raw[o:o + 8])
            bits = raw[o + 8:o + 40]
            sack = {add(cum, j) for j in range(SACK_BITS) if bits[j // 8] >> (j % 8) & 1}
            self.blocks[path] = {"path": path, "dup_count": dup, "ce_count": ce,
                                 "cum_psn": cum, "sack": sack, "bit0": bits[0] & 1}

    def __repr__(self):
        if self.error:
            return f"<malformed {self.error} {self.raw[:24].hex()}>"
        s = f"<{self.name} flags={self.flags:#x} path={self.path} dst={self.dst_conn:#x} src={self.src_conn:#x} psn={self.psn:#x}"
        if self.type in DATA_HEADER_LEN:
            s += f" qpn={self.qpn:#x} msn={self.msn:#x} ssn={self.ssn:#x} off={self.offset} len={len(self.payload)}"
        elif self.type == ACK:
            s += " " + ", ".join(f"p{b['path']}:cum={b['cum_psn']:#x}+{len(b['sack'])}" for b in self.blocks.values())
        elif self.type == NAK:
            s += f" code={self.code} psn={self.nak_psn:#x}"
        return s + f" sport={self.sport}>"


def selftest():
    """The spec's test vectors and examples."""
    for c, p, want in [(1, 0, 0xe324653f), (1, 1, 0x50602724), (0x12345678, 0, 0x021f9f77),
                       (0x12345678, 15, 0x2a4e79fc), (0xffffffff, 7, 0x0c8b6fea)]:
        assert initial_psn(c, p) == want, (c, p, hex(initial_psn(c, p)))
    wi = data(WRITE_IMM, FIRST | LAST | SOLICITED, 3, 0x11111111, 0x22222222, 0x33333333,
              0x44444444, 0x55555555, 0x66666666, 0x77777777,
              ext_write(0xAAAAAAAA, 0x0102030405060708, 0xBBBBBBBB, 0xCCCCCCCC, 0xDDDDDDDD))
    assert wi.hex() == ("d0041303111111112222222233333333444444445555555566666666"
                        "77777777aaaaaaaa0102030405060708bbbbbbbbccccccccdddddddd"), wi.hex()
    a = ack(0x11111111, 0x22222222, [{"path": 5, "ce_count": 0x0708, "cum_psn": 0x090a0b0c,
            "sack": {0x090a0b0d, 0x090a0b0e, add(0x090a0b0c, 255)}}], 0x01020304, 0x0506)
    assert a.hex() == ("d010000011111111222222220000000001020304050601000500070809"
                       "0a0b0c06" + "00" * 30 + "80"), a.hex()
    p = Packet(a)
    assert p.error is None and p.blocks[5]["sack"] == {0x090a0b0d, 0x090a0b0e, add(0x090a0b0c, 255)}


if __name__ == "__main__":
    selftest()
    print("mrwire: spec test vectors and examples ok")
