#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The extended verbs of rdma-core's rxe provider and the device attributes, through
# pyverbs (xverbs.py, one case per run), on two devices in two namespaces over veth:
# the ibv_qp_ex work request builders (SEND, SEND_WITH_IMM, inline, WRITE,
# WRITE_WITH_IMM, READ, both atomics, UD with ibv_wr_set_ud_addr) with every byte and
# atomic result checked, completions read through ibv_cq_ex (ibv_start_poll,
# ibv_next_poll, the read_* accessors), ibv_rereg_mr of access rights and PD with
# traffic after it and the accesses it must then refuse, and the attributes
# (vendor_id 0xffffff like rxe, capability flags only for what works).
# MROCE_TYPE=rxe runs the same cases on rdma_rxe.

. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
XV="$(dirname "$(readlink -f "$0")")/xverbs.py"
TYPE=${MROCE_TYPE:-metaroce}

trap cleanup_devices_and_ns EXIT

# xv CASE ARGS...: runs one case of xverbs.py in namespace A, bounded. Exit 2 is a
# documented rdma_rxe deviation (xverbs.py only exits 2 on rxe): XFAIL.
xv() {
	MROCE_TYPE=$TYPE py_run 120 "$XV" "$@"
	[ $PY_RC -eq 2 ] && [ "$TYPE" = rxe ] && return $KSFT_XFAIL
	[ $PY_RC -eq 0 ] || { fail "xverbs.py $*: exit $PY_RC"; return; }
	return $KSFT_PASS
}

test_attrs() {
	xv attrs mroce0 || return
	# What ibv_devinfo prints (the provider formats fw_ver from the kernel's value).
	local out
	out=$(ip netns exec "$NSA" timeout 30 ibv_devinfo -v -d mroce0) || { fail "ibv_devinfo failed"; return; }
	echo "$out" | grep -E '^\s+(fw_ver|vendor_id|vendor_part_id|hw_ver|sys_image_guid|max_mw|atomic_cap):' |
		sed 's/^[[:space:]]*/# /'
	echo "$out" | grep -qE '^\s+vendor_id:\s+0xffffff$' || { fail "ibv_devinfo: vendor_id is not 0xffffff"; return; }
	echo "$out" | grep -qE '^\s+atomic_cap:\s+ATOMIC_HCA' || { fail "ibv_devinfo: atomic_cap is not ATOMIC_HCA"; return; }
	return $KSFT_PASS
}
test_qp_ex() { xv qp_ex mroce0 mroce1; }
test_ud_ex() { xv ud_ex mroce0 mroce1; }
test_rereg() { xv rereg mroce0 mroce1; }

ktap_print_header
ktap_set_plan 4
if ! [ -x $PY ] || ! $PY -c 'import pyverbs' 2>/dev/null; then
	ktap_print_msg "python3-pyverbs is not installed"
	exit $KSFT_SKIP
fi
if ! setup_pair "$TYPE"; then
	ktap_print_msg "setup failed"
	exit $KSFT_FAIL
fi
ktap_test "attributes: vendor_id 0xffffff, GUIDs, atomics, limits, only working capability flags" test_attrs
ktap_test "ibv_qp_ex builders on RC (SEND, imm, inline, WRITE, WRITE imm, READ, CMP_SWP, FETCH_ADD, batches) read through ibv_cq_ex" test_qp_ex
ktap_test "ibv_qp_ex on UD: ibv_wr_set_ud_addr, SEND and SEND imm, GRH, src_qp, Q_Key" test_ud_ex
ktap_test "ibv_rereg_mr of access and PD: traffic after it, keys kept, the refused accesses refused" test_rereg
ktap_finished
