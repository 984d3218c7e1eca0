#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# RC error paths (rc_errors.py), each checking the completion status, QP state and
# memory an application relies on: remote access errors (bad rkey, out of bounds,
# missing REMOTE_WRITE/READ/ATOMIC), RNR retries exhausted and recovered, retries
# exhausted when the peer QP is gone (also while another QP of the connection
# streams), the path drops everything or the peer's link goes down, local
# protection and length errors, posting in RESET/INIT/RTR.
#
#   MROCE_TYPE=metaroce (default) or rxe. On rxe, the documented deviations of rdma_rxe
#   from the expected behaviour (RXE_DEVIATIONS in rc_errors.py) are reported as XFAIL;
#   on metaroce they fail.

. "$(dirname "$0")/lib.sh"

: "${MROCE_TYPE:=metaroce}"
PY=/usr/bin/python3
RE="$(dirname "$(readlink -f "$0")")/rc_errors.py"

cleanup() {
	tc -n "$NSA" qdisc del dev vethA root 2>/dev/null
	cleanup_devices_and_ns
}
trap cleanup EXIT

setup() { setup_pair "$MROCE_TYPE"; }

port_active() { [ "$(port_state "$1")" = ACTIVE ]; }

# re CASE: runs one case of rc_errors.py in namespace A; exit 2 is a known rxe deviation.
re() {
	local rc start=$SECONDS
	py_run 180 "$RE" "$1" mroce0 mroce1 --type "$MROCE_TYPE" --ns-b "$NSB"
	rc=$PY_RC
	ktap_print_msg "$((SECONDS - start)) s"
	# Whatever the case did to the link, both ports are up again for the next one.
	busywait 10000 port_active mroce0 && busywait 10000 port_active mroce1 \
		|| { fail "ports not ACTIVE after $1"; return; }
	[ $rc -eq 2 ] && [ "$MROCE_TYPE" = rxe ] && return $KSFT_XFAIL
	[ $rc -eq 0 ] || { fail "rc_errors.py $1: exit $rc"; return; }
	return $KSFT_PASS
}

CASES=(
	"bad_rkey:WRITE and READ with a bad rkey: IBV_WC_REM_ACCESS_ERR, QP in ERR, target untouched"
	"out_of_bounds:WRITE and READ outside the MR: IBV_WC_REM_ACCESS_ERR"
	"no_remote_write:WRITE to an MR without REMOTE_WRITE: IBV_WC_REM_ACCESS_ERR"
	"no_remote_read:READ from an MR without REMOTE_READ: IBV_WC_REM_ACCESS_ERR"
	"no_remote_atomic:FETCH_AND_ADD on an MR without REMOTE_ATOMIC: IBV_WC_REM_ACCESS_ERR"
	"dereg_in_flight:WRITE and READ at an MR deregistered under them: an error, nothing written after"
	"rnr_exceeded:SEND without a receive, rnr_retry 0/1/3: IBV_WC_RNR_RETRY_EXC_ERR"
	"rnr_recovers:SEND with rnr_retry 7 and a late receive: delivered"
	"peer_qp_destroyed:WRITE to a destroyed peer QP: IBV_WC_RETRY_EXC_ERR"
	"peer_qp_destroyed_others_stream:the same while another QP of the connection streams: it goes on"
	"peer_unreachable:WRITE over a path dropping everything: IBV_WC_RETRY_EXC_ERR"
	"peer_link_down:WRITE after the peer's link went down: IBV_WC_RETRY_EXC_ERR"
	"local_protection:bad lkey, SGE outside its MR, READ into a read-only MR: IBV_WC_LOC_PROT_ERR"
	"local_length:SEND larger than the receive: IBV_WC_LOC_LEN_ERR / IBV_WC_REM_INV_REQ_ERR"
	"post_state:post_send in RESET, INIT, RTR: EINVAL; post_recv in RESET: EINVAL"
)

ktap_print_header
ktap_set_plan ${#CASES[@]}
if ! [ -x $PY ] || ! $PY -c 'import pyverbs' 2>/dev/null; then
	ktap_print_msg "python3-pyverbs is not installed"
	exit $KSFT_SKIP
fi
if ! setup; then
	ktap_print_msg "setup failed"
	exit $KSFT_FAIL
fi
ktap_print_msg "device type $MROCE_TYPE"
for c in "${CASES[@]}"; do
	ktap_test "${c#*:}" re "${c%%:*}"
done
ktap_finished
