#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Forged MetaRoCE datagrams for a live connection (selftests/hostile_packets.sh).

Written from Documentation/metaroce/spec.rst alone ("Common header", "ACK packets",
"CONTROL packets"), not from the protocol core's codec, so that a misreading shared
by the code and its tests shows. The attacker knows both connection ids and sends
from the peer's own address: the strongest off-path attacker the spec allows for.

    hostile_packets.py HOST DST_CONN SRC_CONN CASE COUNT
"""
import random
import socket
import struct
import sys

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


def main():
    host, dst, src, case, count = sys.argv[1], int(sys.argv[2], 0), int(sys.argv[3], 0), sys.argv[4], int(sys.argv[5])
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
