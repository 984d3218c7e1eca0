#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# 1,000 RC QP pairs between the two namespaces (many_qps.py): created, connected,
# one SEND each with its content checked, destroyed. All of them share one MetaRoCE
# connection per side (conns_opened, qps_bound); the kernel memory per QP and per
# binding is printed.

. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
MQ="$(dirname "$(readlink -f "$0")")/many_qps.py"
N=${MANY_QPS:-1000}

trap cleanup_devices_and_ns EXIT

setup() { setup_pair; }

# test_many [COUNT]: COUNT QP pairs (N unless given).
test_many() {
	py_run 900 "$MQ" mroce0 mroce1 "${1:-$N}"
	[ $PY_RC -eq 0 ] || { fail "many_qps.py: exit $PY_RC"; return; }
	return $KSFT_PASS
}

ktap_print_header
ktap_set_plan 2
if ! [ -x $PY ] || ! $PY -c 'import pyverbs' 2>/dev/null; then
	ktap_print_msg "python3-pyverbs is not installed"
	exit $KSFT_SKIP
fi
if ! setup; then
	ktap_print_msg "setup failed"
	exit $KSFT_FAIL
fi
ktap_test "$N RC QP pairs on one connection per side: create, connect, SEND, destroy" test_many
# A tenth as many again: what the first left behind is in the way of any of them.
ktap_test "$((N / 10)) more (slots and connections reused or rebuilt, nothing left over)" test_many $((N / 10))
ktap_finished
