#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The verbs side of a compliance run against an RDMA device (the metaroce
kernel driver): what `metaroce-user server` is on the host, as an unmodified
verbs program (pyverbs).

  iut_verbs.py --dev mroce0 --peer 198.18.0.2 [--listen 0.0.0.0:18516]
               [--region BYTES] [--depth N]

It serves one RC QP at a time, to the suite's address (--peer) and QPN: a region
open to remote WRITE, READ and atomics, --depth receives of --region bytes
posted, every SEND echoed. The suite (comply.py --iut-control HOST:PORT) asks
for a fresh QP before each connection over TCP:

  suite: "new SUITE_QPN [TIMEOUT]\\n"    agent: "QPN RKEY VA SIZE\\n"

TIMEOUT is the QP's verbs local ACK timeout (default 14, perftest's).

The agent destroys the previous QP (a closed connection's QP stays in error,
[MR-CONN-14]), zeroes the region, creates the next one and brings it to RTS with
PSN 0 both ways. Status: written without a device to run on; its first run is
the first kernel compliance run (compliance/README.md).
"""

import argparse
import os
import select
import socket
import sys
from types import SimpleNamespace

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "selftests"))
import pyverbs.enums as e  # noqa: E402
from pyverbs.addr import GID  # noqa: E402
from pyverbs.cq import CQ  # noqa: E402
from pyverbs.device import Context  # noqa: E402
from pyverbs.mr import MR  # noqa: E402
from pyverbs.pd import PD  # noqa: E402
from pyverbs.qp import QP, QPCap, QPInitAttr  # noqa: E402
from pyverbs.wr import SGE, RecvWR, SendWR  # noqa: E402
from rc_common import roce_v2_ipv4_gid, to_init, to_rtr, to_rts  # noqa: E402

REMOTE = e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ | e.IBV_ACCESS_REMOTE_ATOMIC


class Agent:
    def __init__(self, a):
        self.a = a
        self.ctx = Context(name=a.dev)
        self.pd = PD(self.ctx)
        self.scq = CQ(self.ctx, 4 * a.depth, None, None, 0)
        self.rcq = CQ(self.ctx, 4 * a.depth, None, None, 0)
        self.gid_index, _ = roce_v2_ipv4_gid(self.ctx)
        self.region = MR(self.pd, a.region, e.IBV_ACCESS_LOCAL_WRITE | REMOTE)
        self.recv = MR(self.pd, a.region * a.depth, e.IBV_ACCESS_LOCAL_WRITE)
        self.send = MR(self.pd, a.region * a.depth, e.IBV_ACCESS_LOCAL_WRITE)
        self.peer_gid = GID("0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x"
                            % tuple(int(x) for x in a.peer.split(".")))
        self.qp = None

    def new_qp(self, suite_qpn, timeout=14):
        if self.qp is not None:
            self.qp.close()
        self.region.write(bytes(self.a.region), self.a.region)
        cap = QPCap(max_send_wr=4 * self.a.depth, max_recv_wr=self.a.depth, max_send_sge=1,
                    max_recv_sge=1)
        self.qp = QP(self.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.scq, rcq=self.rcq,
                                         cap=cap, sq_sig_all=1))
        # rc_common's steps (the selftests' own), with the suite as the peer.
        me = SimpleNamespace(qp=self.qp, gid_index=self.gid_index)
        suite = SimpleNamespace(qp=SimpleNamespace(qp_num=suite_qpn), gid=self.peer_gid)
        to_init(me, REMOTE)
        to_rtr(me, suite, 0)
        to_rts(me, 0, timeout=timeout)
        for i in range(self.a.depth):
            self.post_recv(i)
        return f"{self.qp.qp_num} {self.region.rkey} {self.region.buf} {self.a.region}\n"

    def post_recv(self, slot):
        size = self.a.region
        self.qp.post_recv(RecvWR(wr_id=slot, num_sge=1,
                                 sg=[SGE(self.recv.buf + slot * size, size, self.recv.lkey)]))

    def poll(self):
        """Echoes every completed receive; reposts it."""
        n, wcs = self.rcq.poll(16)
        for wc in wcs[:n]:
            if wc.status != e.IBV_WC_SUCCESS or self.qp is None:
                continue
            size, slot = self.a.region, wc.wr_id
            data = self.recv.read(wc.byte_len, slot * size)
            self.send.write(data, wc.byte_len, slot * size)
            self.qp.post_send(SendWR(wr_id=slot, opcode=e.IBV_WR_SEND, num_sge=1,
                                     sg=[SGE(self.send.buf + slot * size, wc.byte_len, self.send.lkey)]))
            self.post_recv(slot)
        self.scq.poll(16)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dev", required=True)
    ap.add_argument("--peer", required=True, help="the suite's IPv4 address")
    ap.add_argument("--listen", default="0.0.0.0:18516")
    ap.add_argument("--region", type=int, default=1 << 20)
    ap.add_argument("--depth", type=int, default=16)
    a = ap.parse_args()
    agent = Agent(a)
    host, port = a.listen.rsplit(":", 1)
    lsock = socket.create_server((host, int(port)))
    conns, bufs = [], {}
    print(f"iut_verbs: {a.dev} serving {a.peer}, control on {a.listen}", flush=True)
    while True:
        r, _, _ = select.select([lsock] + conns, [], [], 0.001)
        for s in r:
            if s is lsock:
                c, _ = lsock.accept()
                conns.append(c)
                bufs[c] = b""
                continue
            data = s.recv(4096)
            if not data:
                conns.remove(s)
                s.close()
                continue
            bufs[s] += data
            while b"\n" in bufs[s]:
                line, bufs[s] = bufs[s].split(b"\n", 1)
                words = line.decode().split()
                if words[:1] == ["new"]:
                    timeout = int(words[2]) if len(words) > 2 else 14
                    s.sendall(agent.new_qp(int(words[1], 0), timeout).encode())
        agent.poll()


if __name__ == "__main__":
    main()
