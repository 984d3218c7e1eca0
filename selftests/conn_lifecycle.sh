#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Concurrent modify_qp calls on one QP (conn_lifecycle.py): two processes, one
# moving it INIT->RTR, the other RTR->RESET->INIT->RTR to another address; once the
# QP is destroyed no connection is left (no binding was leaked).

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
