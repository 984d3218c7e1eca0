#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make demo`: boot the test VM, create one MetaRoCE device in each of two network
# namespaces joined by veth, and print what stock rdma-core sees.
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
echo "=== rdma link"; rdma link show
echo "=== ibv_devices"; ibv_devices
echo "=== ibv_devinfo -v -d mroce0 (namespace $NSA)"; ip netns exec "$NSA" ibv_devinfo -v -d mroce0
echo "=== ibv_devinfo -v -d mroce1 (namespace $NSB)"; ip netns exec "$NSB" ibv_devinfo -v -d mroce1
rdma link del mroce0; rdma link del mroce1
cleanup_all_ns
rmmod metaroce
echo "=== demo done"
'
