#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Verbs objects through stock rdma-core (rxe provider) and pyverbs, on two metaroce
# devices in two namespaces over veth: MRs with every access combination, CQs of many
# sizes with resize, RC QPs with their capacities, the state machine with realistic
# attributes, modifying a QP that moved data (RTS to RTS, SQD drain), COMM_EST, the
# error-state flush seen through the CQ ring, CQ overflow, AHs, SRQs (limits, the limit
# event, receives shared by a QP), and device removal with every kind of object open
# and mapped.

. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
VO="$(dirname "$(readlink -f "$0")")/verbs_objects.py"

trap cleanup_devices_and_ns EXIT

setup() { setup_pair; }

# vo CASE ARGS...: runs one case of verbs_objects.py in namespace A.
vo() {
	py_run 120 "$VO" "$@"
	[ $PY_RC -eq 0 ] || { fail "verbs_objects.py $*: exit $PY_RC"; return; }
	return $KSFT_PASS
}

test_mr() { vo mr mroce0; }
test_cq() { vo cq mroce0; }
test_qp_create() { vo qp_create mroce0; }
test_qp_connect() { vo qp_connect mroce0 mroce1; }
test_flush() { vo flush mroce0 mroce1; }
test_cq_overflow() { vo cq_overflow mroce0; }
test_ah() { vo ah mroce0 mroce1; }
test_srq() { vo srq mroce0 mroce1; }
test_solicited() { vo solicited mroce0 mroce1; }
test_qp_modify_live() { vo qp_modify_live mroce0 mroce1; }
test_comm_est() { vo comm_est mroce0 mroce1; }
# max_cq CQs take one to three minutes under TCG with kmemleak.
test_limits() {
	py_run 400 "$VO" limits mroce0
	[ $PY_RC -eq 0 ] || { fail "verbs_objects.py limits mroce0: exit $PY_RC"; return; }
	return $KSFT_PASS
}

# Deleting the device while a process has a PD, MR, CQ and QP open with the rings
# mapped: the core destroys the objects; the process's mappings stay valid memory.
test_delete_with_objects() {
	ip netns exec "$NSA" $PY - <<'PY' &
import time
import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPCap, QPInitAttr
ctx = Context(name='mroce0'); pd = PD(ctx); cq = CQ(ctx, 64, None, None, 0)
mr = MR(pd, 1 << 20, e.IBV_ACCESS_LOCAL_WRITE)
qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=QPCap(max_recv_wr=16)))
open('/tmp/metaroce-holder-ready', 'w').close()
time.sleep(20)
try:
    cq.poll(1)       # reads the (still mapped) ring
except Exception:
    pass
PY
	local holder=$!
	busywait 20000 test -e /tmp/metaroce-holder-ready || { kill $holder; fail "holder did not start"; return; }
	rm -f /tmp/metaroce-holder-ready
	timeout 60 rdma link del mroce0 || { kill $holder; fail "rdma link del with objects open failed"; return; }
	rdma_dev_exists mroce0 && { kill $holder; fail "mroce0 still registered"; return; }
	kill $holder 2>/dev/null
	wait $holder 2>/dev/null
	ip netns exec "$NSA" rdma link add mroce0 type metaroce netdev vethA || { fail "re-create failed"; return; }
	return $KSFT_PASS
}

ktap_print_header
ktap_set_plan 13
if ! [ -x $PY ] || ! $PY -c 'import pyverbs' 2>/dev/null; then
	ktap_print_msg "python3-pyverbs is not installed"
	exit $KSFT_SKIP
fi
if ! setup; then
	ktap_print_msg "setup failed"
	exit $KSFT_FAIL
fi
ktap_test "MRs: every access combination, invalid ones refused, unique keys" test_mr
ktap_test "CQs: sizes up to max_cqe, above refused, resize up" test_cq
ktap_test "RC QPs: capacities reported, limits and UC refused" test_qp_create
ktap_test "RC QP state machine with realistic attributes; query_qp; invalid transitions" test_qp_connect
ktap_test "RTS -> RTS and RTS -> SQD -> SQD -> RTS on a QP that moved data: SQ_DRAINED, nothing new started, new limits" test_qp_modify_live
ktap_test "the first request to a QP in RTR raises IBV_EVENT_COMM_EST, once" test_comm_est
ktap_test "ERR flushes posted receives and sends as IBV_WC_WR_FLUSH_ERR; resize below unpolled refused" test_flush
ktap_test "CQ overflow raises IBV_EVENT_CQ_ERR" test_cq_overflow
ktap_test "AHs to the peer's GID; bad source GID index refused" test_ah
ktap_test "SRQs: limits, SENDs into shared receives, limit event, resize keeping the waiting WQEs, last-WQE event" test_srq
ktap_test "CQ armed for solicited completions: no event for a plain SEND, one for SEND_SOLICITED" test_solicited
ktap_test "max_cq CQs, then ENOMEM" test_limits
ktap_test "rdma link del with MR, CQ and QP open and mapped" test_delete_with_objects
ktap_finished
