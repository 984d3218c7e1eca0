#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make demo`: boot the test VM, create one MetaRoCE device in each of two network
# namespaces joined by veth, show what stock rdma-core sees, then move data between
# them with unmodified ibv_rc_pingpong and perftest, and print the results and the
# transport counters.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
exec tools/vm-run -t 900 '
. selftests/lib.sh
set -e
load_metaroce
setup_ns NSA NSB
veth_pair "$NSA" "$NSB"
ip netns exec "$NSA" rdma link add mroce0 type metaroce netdev vethA
ip netns exec "$NSB" rdma link add mroce1 type metaroce netdev vethB
busywait 5000 sh -c "ip netns exec $NSA ibv_devinfo -v -d mroce0 | grep -q ::ffff:198.18.0.1"
busywait 5000 sh -c "ip netns exec $NSB ibv_devinfo -v -d mroce1 | grep -q ::ffff:198.18.0.2"
echo "=== rdma link"; rdma link show
echo "=== ibv_devices"; ibv_devices
echo "=== ibv_devinfo -v -d mroce0 (namespace $NSA)"; ip netns exec "$NSA" ibv_devinfo -v -d mroce0
gid=$(gid_index "$NSA" mroce0 198.18.0.1)
# pair SERVER-CMD... -- runs a perftest-style server in NSB and its client in NSA.
pair() {
	local tool=$1; shift
	ip netns exec "$NSB" timeout 120 "$tool" -d mroce1 "$@" > /tmp/demo-srv.out 2>&1 &
	local spid=$!
	busywait 10000 sh -c "ip netns exec $NSB ss -Hltn | grep -q :18515" || true
	sleep 0.2
	ip netns exec "$NSA" timeout 120 "$tool" -d mroce0 "$@" 198.18.0.2
	wait $spid
}
set +e
failed=0
# show TITLE TOOL ARGS...: runs a pair and prints its result lines, or why it failed.
show() {
	local title=$1; shift
	echo "=== $title"
	pair "$@" > /tmp/demo-cli.out 2>&1
	local rc=$?
	grep -E "bytes in|iters in|^ *#bytes|^ *[0-9]+ +[0-9]+ " /tmp/demo-cli.out
	if [ $rc -ne 0 ]; then
		echo "FAILED (exit $rc):"; tail -5 /tmp/demo-cli.out; failed=1
	fi
}
show "ibv_rc_pingpong: 100 exchanges of 64 KiB, content validated (-c)" \
	ibv_rc_pingpong -g "$gid" -s 65536 -n 100 -c
show "ib_write_bw 64 KiB, 3 s" ib_write_bw -x "$gid" -F --report_gbits -s 65536 -D 3
show "ib_read_bw 64 KiB, 3 s" ib_read_bw -x "$gid" -F --report_gbits -s 65536 -D 3
show "ib_send_lat 2 B, 200 iterations" ib_send_lat -x "$gid" -F -s 2 -n 200
echo "=== rdma statistic show link mroce0/1"
rdma statistic show link mroce0/1
rdma link del mroce0; rdma link del mroce1
cleanup_all_ns
rmmod metaroce
echo "=== demo done"
exit $failed
'
