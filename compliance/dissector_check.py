#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Compares what tshark with compliance/metaroce.lua decodes in a capture with
what mrwire.py decodes in the same capture, field by field, packet by packet.

  dissector_check.py CAPTURE.pcap    (classic pcap, Ethernet or Linux loopback)

Exits 1 on the first disagreement; prints a few decoded lines (the tshark
excerpt) and the number of packets per type.
"""

import os
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mrwire as w  # noqa: E402

FIELDS = ["frame.number", "metaroce.type", "metaroce.flags", "metaroce.path", "metaroce.dst_conn",
          "metaroce.src_conn", "metaroce.psn", "metaroce.qpn", "metaroce.msn", "metaroce.ssn",
          "metaroce.offset", "metaroce.payload_len", "metaroce.ack.count", "metaroce.ack.cum_psn",
          "metaroce.ack.sacked", "metaroce.nak.code", "metaroce.control.code", "metaroce.status"]


def udp_payloads(path):
    """(frame number, UDP payload) of every UDP datagram to or from port 4793."""
    data = open(path, "rb").read()
    magic, = struct.unpack("<I", data[:4])
    if magic != 0xA1B2C3D4:
        raise SystemExit("dissector_check: not a little-endian classic pcap")
    link, = struct.unpack("<I", data[20:24])
    off, n = 24, 0
    while off + 16 <= len(data):
        _, _, incl, _ = struct.unpack("<IIII", data[off:off + 16])
        frame = data[off + 16:off + 16 + incl]
        off += 16 + incl
        n += 1
        if link == 1:
            eth = struct.unpack(">H", frame[12:14])[0]
            ip = frame[14:]
        else:
            raise SystemExit(f"dissector_check: link type {link} not handled")
        if eth == 0x0800:
            hl, proto = (ip[0] & 0xF) * 4, ip[9]
        elif eth == 0x86DD:
            hl, proto = 40, ip[6]
        else:
            continue
        if proto != 17:
            continue
        sport, dport, ulen = struct.unpack(">HHH", ip[hl:hl + 6])
        if w.UDP_PORT in (sport, dport):
            yield n, ip[hl + 8:hl + ulen]


def expected(p):
    """The FIELDS (after frame.number) as mrwire decodes them."""
    d = {"metaroce.type": p.type, "metaroce.flags": p.flags, "metaroce.path": p.path,
         "metaroce.dst_conn": p.dst_conn, "metaroce.src_conn": p.src_conn, "metaroce.psn": p.psn}
    if p.type in w.DATA_HEADER_LEN:
        d.update({"metaroce.qpn": p.qpn, "metaroce.msn": p.msn, "metaroce.ssn": p.ssn,
                  "metaroce.offset": p.offset, "metaroce.payload_len": len(p.payload)})
        if p.type in (w.READ_RESP, w.ATOMIC_RESP):
            d["metaroce.status"] = p.status
    elif p.type == w.ACK:
        d["metaroce.ack.count"] = p.count
        blocks = list(p.blocks.values())
        d["metaroce.ack.cum_psn"] = ",".join(str(b["cum_psn"]) for b in blocks)
        d["metaroce.ack.sacked"] = ",".join(
            " ".join(str(w.seq_diff(q, b["cum_psn"])) for q in sorted(b["sack"], key=lambda q: w.seq_diff(q, b["cum_psn"])))
            or "-" for b in blocks) or None
    elif p.type == w.NAK:
        d.update({"metaroce.nak.code": p.code, "metaroce.qpn": p.qpn, "metaroce.msn": p.msn,
                  "metaroce.ssn": p.ssn})
    elif p.type == w.CONTROL:
        d["metaroce.control.code"] = p.code
    return d


def norm(field, v):
    if v == "":
        return None
    if field == "metaroce.ack.sacked":
        return v
    if field == "metaroce.ack.cum_psn":
        return ",".join(str(int(x, 0)) for x in v.split(","))
    return int(v.split(",")[0], 0)


def main():
    cap = sys.argv[1]
    lua = os.path.join(os.path.dirname(os.path.abspath(__file__)), "metaroce.lua")
    cmd = ["tshark", "-n", "-X", f"lua_script:{lua}", "-r", cap, "-Y", "metaroce", "-T", "fields",
           "-E", "separator=|", "-E", "occurrence=a", "-E", "aggregator=,"]
    for fld in FIELDS:
        cmd += ["-e", fld]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    # Per-block values (cum_psn, SACKed offsets) come aggregated with ','.
    rows = {}
    for line in out.splitlines():
        v = line.split("|")
        rows[int(v[0])] = dict(zip(FIELDS[1:], v[1:]))
    ours = [(n, w.Packet(raw)) for n, raw in udp_payloads(cap)]
    malformed = sum(p.error is not None for _, p in ours)
    ours = [(n, p) for n, p in ours if p.error is None]
    kinds, bad = {}, 0
    for n, p in ours:
        kinds[p.name] = kinds.get(p.name, 0) + 1
        got = rows.get(n)
        if got is None:
            print(f"frame {n}: tshark did not decode {p}")
            bad += 1
            continue
        for fld, want in expected(p).items():
            g = norm(fld, got.get(fld, ""))
            if want == "":
                want = None
            if g != want:
                print(f"frame {n} {p.name}: {fld} tshark {g!r}, mrwire {want!r}")
                bad += 1
    excerpt = subprocess.run(["tshark", "-n", "-X", f"lua_script:{lua}", "-r", cap, "-Y", "metaroce",
                              "-c", "400"], capture_output=True, text=True).stdout.splitlines()
    shown = {}
    print("tshark excerpt:")
    for line in excerpt:
        k = line.split("MetaRoCE")[-1].split()[0] if "MetaRoCE" in line else ""
        if shown.get(k, 0) < 2:
            shown[k] = shown.get(k, 0) + 1
            print("  " + line.strip()[:160])
    print(f"dissector: {len(ours)} packets ({malformed} malformed ones not compared), {bad} disagreements; " +
          ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    return 1 if bad or not ours else 0


if __name__ == "__main__":
    sys.exit(main())
