#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The compliance suite (compliance/comply.py, written from the spec, not from the
# core) against the driver: mroce0 in $NSA serves it through the verbs agent
# (compliance/iut_verbs.py, pyverbs: a fresh RC QP per connection); the suite speaks
# MetaRoCE from a plain UDP socket in $NSB. Every MUST it can check from the wire
# must pass; a test that fails is this program's failure.
# COMPLY_ARGS: more comply.py options (e.g. "--only ce_window -v"); with them the
# suite's whole output is printed.

. "$(dirname "$0")/lib.sh"

DIR="$(cd "$(dirname "$0")/../compliance" && pwd)"
IPA=198.18.0.1
IPB=198.18.0.2
IPB2=198.18.0.3   # another address of the suite's host ([MR-SEC-7])
LOG=$(mktemp -d /tmp/compliance.XXXXXX)
AGENT=

cleanup() {
	[ -n "$AGENT" ] && kill "$AGENT" 2>/dev/null && wait "$AGENT" 2>/dev/null
	cleanup_devices_and_ns
	rm -rf "$LOG"
}
trap cleanup EXIT

# suite: runs comply.py; one KTAP line per suite test is printed as a message.
suite() {
	local rc
	ip netns exec "$NSA" python3 "$DIR/iut_verbs.py" --dev mroce0 --peer $IPB \
		> "$LOG/agent" 2>&1 &
	AGENT=$!
	ip netns exec "$NSB" timeout 900 python3 "$DIR/comply.py" --iut $IPA --bind $IPB \
		--other-ip $IPB2 --paths-iut 8 --iut-control $IPA:18516 --no-table \
		${COMPLY_ARGS:-} > "$LOG/suite" 2>&1
	rc=$?
	if [ -n "${COMPLY_ARGS:-}" ]; then
		sed "s/^/# /" "$LOG/suite"
	else
		grep -E '^(ok|FAIL|XFAIL) |^  FAIL|^compliance:' "$LOG/suite" | sed 's/^/# /'
	fi
	sed 's/^/# agent: /' "$LOG/agent" | tail -3
	[ $rc -eq 0 ] || { fail "comply.py exit $rc"; return; }
	grep -q '^compliance: [0-9]* pass, 0 fail' "$LOG/suite" || { fail "suite failures"; return; }
	return $KSFT_PASS
}

ktap_print_header
ktap_set_plan 1
load_metaroce
setup_ns NSA NSB && veth_pair "$NSA" "$NSB" &&
	ip -n "$NSB" addr add $IPB2/24 dev vethB &&
	ip netns exec "$NSA" rdma link add mroce0 type metaroce netdev vethA &&
	busywait 10000 gid_index_of mroce0 $IPA >/dev/null ||
	{ ktap_print_msg "setup failed"; exit $KSFT_FAIL; }
ktap_test "compliance suite against mroce0 (IPv4)" suite
ktap_print_msg "mroce0: $(rdma statistic show link mroce0/1 | tr -s ' ' | cut -c1-600)"
ktap_finished
