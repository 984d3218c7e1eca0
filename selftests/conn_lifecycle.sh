#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# How a MetaRoCE connection is reached and left (conn_lifecycle.py): datagrams with
# the right connection ids from the wrong address are dropped (spec [MR-SEC-7]), and
# concurrent modify_qp calls on one QP leave no binding behind once it is destroyed.

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
	"modify_race:concurrent modify_qp on one QP leaves no binding behind"
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
