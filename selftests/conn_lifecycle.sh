#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# How a MetaRoCE connection ends (conn_lifecycle.py): a CLOSE from the peer, a peer
# whose device is created again (new connection ids) with or without sending first,
# an OPEN that only claims a restart, datagrams with the right connection ids from
# the wrong address, and concurrent modify_qp calls on one QP. Each time the QPs
# that must go on go on, new QP pairs to the peer work, old QPs destroy cleanly and
# no connection is left over (spec [MR-CONN-14], [MR-SEC-7]). A peer that destroys its
# QP right after a SEND arrived whose ACKs were lost still acknowledges the
# retransmission (spec [MR-QP-8], [MR-CONN-16]).

. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
CL="$(dirname "$(readlink -f "$0")")/conn_lifecycle.py"

trap cleanup_devices_and_ns EXIT

setup() { setup_pair; }

# cl CASE: runs one case of conn_lifecycle.py in namespace A.
cl() {
	py_run 180 "$CL" "$1" mroce0 mroce1 --ns-a "$NSA" --ns-b "$NSB"
	[ $PY_RC -eq 0 ] || { fail "conn_lifecycle.py $1: exit $PY_RC"; return; }
	return $KSFT_PASS
}

CASES=(
	"wrong_peer:a CLOSE with the right ids from another address is dropped (rx_wrong_peer)"
	"peer_close:after the peer's CLOSE a new QP pair works, old QPs in ERR destroy cleanly"
	"peer_restart:the peer's device created again: a new QP pair works, the old connection found gone"
	"restart_hint:the same, the restarted peer sending first: probed, found gone, then bound"
	"forged_open:an OPEN claiming a restart of a live peer: probed, the connection stays"
	"modify_race:concurrent modify_qp on one QP leaves no binding behind"
	"linger:a QP destroyed right after a SEND whose ACKs were lost: its connection lingers, the SEND completes"
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
for c in "${CASES[@]}"; do
	ktap_test "${c#*:}" cl "${c%%:*}"
done
ktap_finished
