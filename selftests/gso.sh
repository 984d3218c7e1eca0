#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Transmit and receive batching (issue 34): with gso=1 a path's datagrams of one run
# leave as one UDP GSO buffer, and with gro=1 the tunnel sockets take GRO buffers whole
# and walk their datagrams in place. Both are off by default; this turns them on (with
# path_burst=8 and pacing_burst_us=1000, which make bursts) and checks that
#  1. a 64 KiB ib_write_bw makes bursts of more than two datagrams on average (every
#     burst held exactly two until the segment-size check read a payload's length
#     after the append had moved its pages away);
#  2. every byte of a random RC workload (rc_integrity.py) arrives right, clean and at
#     1% loss, over GSO buffers.
# The parameters are put back to their defaults on exit.

. "$(dirname "$0")/lib.sh"

P=/sys/module/metaroce/parameters
RI="$(dirname "$(readlink -f "$0")")/rc_integrity.py"
PORT=19600
LOG=$(mktemp -d /tmp/gso.XXXXXX)
DEFAULTS="gso=N gro=N path_burst=1 pacing_burst_us=20"

# params K=V...: sets module parameters.
params() {
	local kv
	for kv in "$@"; do echo "${kv#*=}" > "$P/${kv%%=*}" || return 1; done
}

cleanup() {
	[ -d $P ] && params $DEFAULTS
	cleanup_devices_and_ns
	rm -rf "$LOG"
}
trap cleanup EXIT

test_bursts() {
	local ga gb b0 s0 b1 s1 rc
	ga=$(gid_index "$NSA" mroce0 198.18.0.1)
	gb=$(gid_index "$NSB" mroce1 198.18.0.2)
	b0=$(counter mroce0 tx_gso_bursts)
	s0=$(counter mroce0 tx_gso_segments)
	ip netns exec "$NSB" timeout 120 ib_write_bw -d mroce1 -x "$gb" -s 65536 -D 4 \
		--report_gbits -p $PORT > "$LOG/srv" 2>&1 &
	busywait 30000 listening "$NSB" $PORT || { fail "no ib_write_bw server"; return; }
	ip netns exec "$NSA" timeout 120 ib_write_bw -d mroce0 -x "$ga" -s 65536 -D 4 \
		--report_gbits -p $PORT 198.18.0.2 > "$LOG/cli" 2>&1
	rc=$?
	wait
	grep -E '^ *65536 ' "$LOG/cli" | sed 's/^/# Gb\/s: /'
	[ $rc -eq 0 ] || { fail "ib_write_bw exit $rc"; return; }
	b1=$(counter mroce0 tx_gso_bursts)
	s1=$(counter mroce0 tx_gso_segments)
	ktap_print_msg "$((b1 - b0)) GSO bursts, $((s1 - s0)) datagrams in them," \
		"mroce1 GRO buffers $(counter mroce1 ns_rx_gro_buffers)" \
		"with $(counter mroce1 ns_rx_gro_segments) datagrams"
	[ $((b1 - b0)) -gt 0 ] || { fail "no GSO burst"; return; }
	[ $((s1 - s0)) -ge $((3 * (b1 - b0))) ] ||
		{ fail "fewer than 3 datagrams per burst on average"; return; }
	return $KSFT_PASS
}

# integrity SEED [NETEM...]: rc_integrity.py with netem on both veth ends.
integrity() {
	local seed=$1; shift
	if [ $# -gt 0 ]; then
		tc -n "$NSA" qdisc add dev vethA root netem "$@" &&
			tc -n "$NSB" qdisc add dev vethB root netem "$@" || { fail "netem $*"; return; }
	fi
	py_run 600 "$RI" mroce0 mroce1 --seed "$seed"
	tc -n "$NSA" qdisc del dev vethA root 2>/dev/null
	tc -n "$NSB" qdisc del dev vethB root 2>/dev/null
	[ "$PY_RC" -eq 0 ] || { fail "rc_integrity.py --seed $seed: exit $PY_RC"; return; }
	return $KSFT_PASS
}

ktap_print_header
ktap_set_plan 3
load_metaroce && params gso=Y gro=Y path_burst=8 pacing_burst_us=1000 && setup_pair metaroce ||
	{ ktap_print_msg "setup failed"; exit $KSFT_FAIL; }
ktap_test "ib_write_bw 64 KiB leaves in UDP GSO bursts of 3 or more datagrams" test_bursts
ktap_test "every byte right over GSO and GRO buffers (rc_integrity.py)" integrity 0x67736f
ktap_test "the same at 1% loss" integrity 0x67736f1 loss 1%
ktap_finished
