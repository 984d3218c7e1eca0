#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Forged MetaRoCE datagrams for a live connection (selftests/hostile_packets.sh).

Written from Documentation/metaroce/spec.rst alone ("Common header", "ACK packets",
"CONTROL packets"), not from the protocol core's codec, so that a misreading shared
by the code and its tests shows. The attacker knows both connection ids and sends
from the peer's own address: the strongest off-path attacker the spec allows for.

    hostile_packets.py HOST DST_CONN SRC_CONN CASE COUNT
    hostile_packets.py HOST 0 0 capture IFACE PEER POOL
    hostile_packets.py HOST 0 0 spoofed_opens COUNT SOURCES
    hostile_packets.py HOST DST_CONN SRC_CONN data PLAN
    hostile_packets.py HOST QPN QKEY ud COUNT

`capture` records the connection's real datagrams (both directions, on IFACE, between
HOST and PEER) into POOL, from which selftests/mutate.c sends random mutations.

`data` forges one request per attack class of PLAN (written by forged_data.py), each
at its own victim QP, in sequence numbers the receiver accepts: the PSNs and stream
numbers ("PSN assignment", "QP streams and binding") follow from the connection ids
and the QP's rq_psn, so the packets pass every check but the one each class breaks.

`ud` sends COUNT rounds of forged UD datagrams ("Unreliable datagrams") at HOST: to the
UD QP QPN with other Q_Keys than its QKEY, to QP numbers with no QP, and malformed (cut
short, connection ids set, QP numbers above 24 bits); it prints how many of each.
"""
import json
import random
import socket
import struct
import sys
import time

VERSION = 0xD0
ACK, NAK, CONTROL, SEND = 0x10, 0x11, 0x12, 0x01
OPEN_FLAG = 0x04
CTRL_OPEN, CTRL_CLOSE, CTRL_PATH_FLOOR = 1, 2, 3
PORT = 4793


def header(ty, dst, src, flags=0, path=0, psn=0):
    return struct.pack(">BBBBIII", VERSION, ty, flags, path, dst, src, psn)


def ack(dst, src, blocks, rate_hint=0):
    """blocks: (path, dup_count, ce_count, cum_psn, sack bytes)."""
    out = header(ACK, dst, src) + struct.pack(">IHBB", rate_hint, 0, len(blocks), 0)
    for path, dup, ce, cum, sack in blocks:
        out += struct.pack(">BBHI", path, dup, ce, cum) + sack
    return out


def control(dst, src, code, path=0, value=0, flags=0):
    return header(CONTROL, dst, src, flags) + struct.pack(">BBHI", code, path, 0, value)


def cases(dst, src, rnd):
    """Each case yields datagrams; every one must be dropped or harmless."""
    def far_acks():
        # 16 blocks, each cum_psn half the sequence space away from anything sent,
        # with every SACK bit set: [MR-SACK-22].
        for _ in range(4):
            base = rnd.getrandbits(32)
            yield ack(dst, src, [(p, 0, 0, (base + p * 0x1000 + 0x7FFFFFFF) & 0xFFFFFFFF,
                                  b"\xff" * 32) for p in range(16)])
        # Random cum_psn and bitmap, random rate hints (a forged ACK may still
        # lower or raise the pacing rate only within what the spec allows).
        for _ in range(4):
            yield ack(dst, src, [(p, rnd.getrandbits(8), rnd.getrandbits(16), rnd.getrandbits(32),
                                  bytes(rnd.getrandbits(8) for _ in range(32))) for p in range(16)])

    def far_floors():
        # PATH_FLOOR anywhere in the sequence space, on every path: [MR-SACK-23].
        for p in range(16):
            yield control(dst, src, CTRL_PATH_FLOOR, p, rnd.getrandbits(32))

    def late_open():
        # dst_conn 0 with OPEN after the connection is up, including a CLOSE: [MR-CONN-13].
        yield control(0, src, CTRL_OPEN, flags=OPEN_FLAG)
        yield control(0, src, CTRL_CLOSE, value=7, flags=OPEN_FLAG)
        yield header(ACK, 0, src, OPEN_FLAG) + struct.pack(">IHBB", 0, 0, 0, 0)

    def malformed():
        # Truncated at every length, bad version and type, src_conn 0, absurd counts.
        good = ack(dst, src, [(0, 0, 0, 0, bytes(32))])
        for n in range(len(good)):
            yield good[:n]
        yield bytes([0x00]) + good[1:]
        yield bytes([VERSION, 0x7F]) + good[2:]
        yield header(ACK, dst, 0) + good[16:]
        yield header(ACK, dst, src) + struct.pack(">IHBB", 0, 0, 255, 0) + bytes(40)
        yield control(dst, src, 99)

    def wrong_src():
        # Our id in dst_conn but another src_conn than the peer's, and dst_conn 0
        # without OPEN: refused before they are queued ([MR-CONN-5], [MR-SEC-8]).
        for _ in range(8):
            other = (src + 1 + rnd.getrandbits(31)) & 0xFFFFFFFF or 1
            yield control(dst, other, CTRL_CLOSE, value=7)
            yield ack(dst, other, [(0, 0, 0, 0, bytes(32))])
        yield control(0, src, CTRL_CLOSE, value=7)

    def open_flood():
        # One OPEN with dst_conn 0 per round, to a connection still opening
        # (device_lifecycle.sh): the device takes them within its budget ([MR-SEC-8]).
        yield control(0, src, CTRL_OPEN, flags=OPEN_FLAG)

    return {"far_acks": far_acks, "far_floors": far_floors, "late_open": late_open,
            "malformed": malformed, "wrong_src": wrong_src, "open_flood": open_flood}


UD, UD_IMM = 0x20, 0x21
GSI_QPN, GSI_QKEY = 1, 0x80010000
QPN_MASK = 0xFFFFFF


def ud(ty, dst_qpn, src_qpn, qkey, payload=b"", dst_conn=0, src_conn=0):
    out = header(ty, dst_conn, src_conn) + struct.pack(">III", dst_qpn, src_qpn, qkey)
    return out + (struct.pack(">I", 0x5EC0DE) if ty == UD_IMM else b"") + payload


def forged_ud(qpn, qkey, rnd):
    """(class, datagram): each class counted by its own reason ([MR-UD-2], [MR-UD-4])."""
    def other(key):
        return key ^ (1 + rnd.getrandbits(31))

    src = rnd.getrandbits(24)
    for ty in (UD, UD_IMM):
        for size in (0, 1, 64, 1000, 1024, 4000):
            yield "bad_qkey", ud(ty, qpn, src, other(qkey), bytes(size))
        yield "bad_qkey", ud(ty, qpn, src, GSI_QKEY)
        yield "bad_qkey", ud(ty, GSI_QPN, src, other(GSI_QKEY), bytes(256))
        # QP 0 does not exist on RoCE; the top of the QPN space is never allocated here.
        for dst in (0, QPN_MASK, QPN_MASK - 1, QPN_MASK - rnd.getrandbits(8) - 2):
            yield "no_qp", ud(ty, dst, src, qkey, bytes(64))
        good = ud(ty, qpn, src, qkey)
        for n in range(2, len(good)):
            yield "malformed", good[:n]
        yield "malformed", ud(ty, qpn, src, qkey, dst_conn=1 + rnd.getrandbits(31))
        yield "malformed", ud(ty, qpn, src, qkey, src_conn=1 + rnd.getrandbits(31))
        yield "malformed", ud(ty, qpn | 1 << 24, src, qkey)
        yield "malformed", ud(ty, qpn, src | 0x80 << 24, qkey)


def forged_uds(host, qpn, qkey, count):
    rnd = random.Random(f"{qpn}:{qkey}:ud")
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    sent = {"bad_qkey": 0, "no_qp": 0, "malformed": 0}
    for _ in range(count):
        for kind, d in forged_ud(qpn, qkey, rnd):
            s.sendto(d, (host, PORT))
            sent[kind] += 1
    print("ud: " + " ".join(f"{k}={v}" for k, v in sent.items()))
    return 0


WRITE, READ_REQ, CMP_SWAP, FETCH_ADD = 0x03, 0x05, 0x07, 0x08
FIRST, LAST, ACK_REQ = 0x01, 0x02, 0x08
M64 = (1 << 64) - 1


def initial_psn(conn, k):
    """initial_psn of "PSN assignment"; also stream_start ("QP streams and binding")."""
    x = (((conn << 8) | k) + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return (x ^ (x >> 31)) & 0xFFFFFFFF


def forged_request(c, dst, src, index):
    """The one request of attack class c["name"] at c["qpn"], as the peer (src) would
    send it: a PSN on path 1..3 near the end of the path's first window, past what the
    peer's own packets will use before the test ends (a request the receiver executes,
    READ or atomic, takes its PSN for good), the QP's first MSN and SSN, one segment."""
    path = 1 + index % 3
    psn = (initial_psn(src, path) + 200 + index) & 0xFFFFFFFF
    msn, ssn = initial_psn(c["rq_psn"], 0), initial_psn(c["rq_psn"], 1)
    name, rkey, va, size = c["name"], c["rkey"], c["va"], c["len"]
    offset, flags, payload = 0, FIRST | LAST | ACK_REQ, b""

    def write(rkey, va, total, data, off=0):
        return WRITE, struct.pack(">IQI", rkey, va & M64, total), data, off

    if name == "write_bad_rkey":
        ty, ext, payload, offset = write(rkey ^ 0x5A5A00, va, 64, b"\xee" * 64)
    elif name == "write_stale_rkey":
        ty, ext, payload, offset = write(c["stale_rkey"], va, 64, b"\xee" * 64)
    elif name == "write_no_access":
        ty, ext, payload, offset = write(c["local_rkey"], c["local_va"], 64, b"\xee" * 64)
    elif name == "write_past_end":
        ty, ext, payload, offset = write(rkey, va + size - 16, 64, b"\xee" * 64)
    elif name == "write_va_wrap":
        ty, ext, payload, offset = write(rkey, M64 - 15, 64, b"\xee" * 64)
    elif name == "write_beyond_total":
        ty, ext, payload, offset = write(rkey, va, 64, b"\xee" * 64, off=32)
    elif name == "write_huge_total":
        ty, ext, payload, offset = write(rkey, va, 0xFFFFFFFF, b"\xee" * 64)
        flags = FIRST | ACK_REQ
    elif name == "read_huge":
        ty, ext = READ_REQ, struct.pack(">IQI", rkey, va, 0xFFFFFFFF)
    elif name == "read_past_end":
        ty, ext = READ_REQ, struct.pack(">IQI", rkey, va, size + 1)
    elif name == "read_with_payload":
        ty, ext, payload = READ_REQ, struct.pack(">IQI", rkey, va, 64), b"\xee" * 8
    elif name == "atomic_unaligned":
        ty, ext = FETCH_ADD, struct.pack(">IQQQ", rkey, va + 4, 1, 0)
    elif name == "atomic_past_end":
        ty, ext = CMP_SWAP, struct.pack(">IQQQ", rkey, va + size, 0x2222222222222222, 7)
    elif name == "send_too_long":
        ty, ext, payload = SEND, struct.pack(">II", 0, 512), b"\xee" * 512
    elif name == "send_unposted":
        ty, ext, payload = SEND, struct.pack(">II", 0, 64), b"\xee" * 64
    elif name == "msn_far":
        ty, ext, payload, offset = write(rkey ^ 0x5A5A00, va, 64, b"\xee" * 64)
        msn = (msn + 1000) & 0xFFFFFFFF
    elif name == "ssn_far":
        ty, ext, payload, offset = write(rkey ^ 0x5A5A00, va, 64, b"\xee" * 64)
        ssn = (ssn + 5000) & 0xFFFFFFFF
    else:
        raise ValueError(f"unknown attack class {name}")
    stream = struct.pack(">IIII", c["qpn"], msn, ssn, offset)
    return header(ty, dst, src, flags, path, psn) + stream + ext + payload


def data(host, dst, src, plan):
    with open(plan) as f:
        classes = json.load(f)["classes"]
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
    for i, c in enumerate(classes):
        s.sendto(forged_request(c, dst, src, i), (host, PORT))
        print(f"forged {c['name']} at QP {c['qpn']:#x}")
        time.sleep(0.05)
    return 0


ETH_P_ALL = 0x0003


def capture(iface, host, peer, want=256, seconds=20):
    """UDP payloads to PORT between host and peer (IPv4), as seen on iface."""
    raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    raw.bind((iface, 0))
    raw.settimeout(1)
    ends = {socket.inet_aton(host), socket.inet_aton(peer)}
    out, deadline = [], time.monotonic() + seconds
    while len(out) < want and time.monotonic() < deadline:
        try:
            frame = raw.recv(65535)
        except socket.timeout:
            continue
        if len(frame) < 42 or frame[12:14] != b"\x08\x00" or frame[23] != 17:
            continue
        ihl = (frame[14] & 0xF) * 4
        ip = frame[14:14 + ihl]
        if {ip[12:16], ip[16:20]} != ends:
            continue
        udp = frame[14 + ihl:]
        if struct.unpack(">H", udp[2:4])[0] == PORT and len(udp) > 8 + 16:
            out.append(udp[8:])
    return out


def capture_pool(host, iface, peer, path):
    """Writes the captured datagrams to path for selftests/mutate.c: a 2-byte length each."""
    pool = capture(iface, host, peer)
    if not pool:
        print("captured no datagram of the connection")
        return 1
    types = sorted({d[1] for d in pool})
    print(f"captured {len(pool)} datagrams (types {', '.join(f'0x{t:02x}' for t in types)})")
    with open(path, "wb") as f:
        for d in pool:
            f.write(struct.pack(">H", len(d)) + d)
    return 0


def spoofed_opens(host, count, sources):
    """OPEN packets (dst_conn 0) from `sources` random addresses of the host's /24 and
    of other networks, none of them a peer of the host: [MR-SEC-2], [MR-SEC-8]."""
    rnd = random.Random(f"spoof:{host}")
    net = host.rsplit(".", 1)[0]
    addrs = [f"{net}.{rnd.randrange(100, 250)}" if i % 2 else
             f"10.{rnd.randrange(256)}.{rnd.randrange(256)}.{rnd.randrange(1, 255)}"
             for i in range(sources)]
    raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    dst_ip = socket.inet_aton(host)
    sent, start = 0, time.monotonic()
    for i in range(count):
        payload = control(0, rnd.getrandbits(31) | 1, CTRL_OPEN, flags=OPEN_FLAG)
        udp = struct.pack(">HHHH", rnd.randrange(49152, 65536), PORT, 8 + len(payload), 0) + payload
        # The kernel fills in the IPv4 checksum and total length (IP_HDRINCL).
        ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 0, i & 0xFFFF, 0, 64, 17, 0,
                         socket.inet_aton(addrs[i % sources]), dst_ip)
        try:
            raw.sendto(ip + udp, (host, 0))
            sent += 1
        except OSError:
            pass
    took = time.monotonic() - start
    print(f"sent {sent} OPEN datagrams from {sources} spoofed addresses in {took:.1f} s")
    return 0


def main():
    host, dst, src, case = sys.argv[1], int(sys.argv[2], 0), int(sys.argv[3], 0), sys.argv[4]
    if case == "capture":
        sys.exit(capture_pool(host, sys.argv[5], sys.argv[6], sys.argv[7]))
    if case == "data":
        sys.exit(data(host, dst, src, sys.argv[5]))
    count = int(sys.argv[5])
    if case == "ud":
        sys.exit(forged_uds(host, dst, src, count))
    if case == "spoofed_opens":
        sys.exit(spoofed_opens(host, count, int(sys.argv[6])))
    rnd = random.Random(f"{dst}:{src}:{case}")
    gen = cases(dst, src, rnd)
    names = list(gen) if case == "all" else [case]
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    sent = 0
    for _ in range(count):
        for name in names:
            for d in gen[name]():
                s.sendto(d, (host, PORT))
                sent += 1
    print(f"sent {sent} forged datagrams ({', '.join(names)}) x{count}")


if __name__ == "__main__":
    main()
