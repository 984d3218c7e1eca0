# SPDX-License-Identifier: GPL-2.0
#
# Shared helpers for the metaroce selftests (sourced; runs inside the test VM).
# KTAP output after tools/testing/selftests/kselftest/ktap_helpers.sh, namespace
# setup after tools/testing/selftests/net/lib.sh.

KSFT_PASS=0
KSFT_FAIL=1
KSFT_XFAIL=2
KSFT_SKIP=4

: "${REPO_ROOT:=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
: "${METAROCE_KO:=$REPO_ROOT/metaroce.ko}"

KTAP_TESTNO=0
KTAP_PASS=0
KTAP_FAIL=0
KTAP_SKIP=0
KTAP_XFAIL=0

ktap_print_header() { echo "TAP version 13"; }
ktap_set_plan() { echo "1..$1"; }
ktap_print_msg() { echo "# $*"; }

# ktap_result RESULT DESCRIPTION: RESULT is $KSFT_PASS, $KSFT_FAIL, $KSFT_XFAIL (a
# known, documented failure) or $KSFT_SKIP.
ktap_result() {
	local rc=$1; shift
	KTAP_TESTNO=$((KTAP_TESTNO + 1))
	case $rc in
	"$KSFT_PASS") echo "ok $KTAP_TESTNO $*"; KTAP_PASS=$((KTAP_PASS + 1));;
	"$KSFT_SKIP") echo "ok $KTAP_TESTNO $* # SKIP"; KTAP_SKIP=$((KTAP_SKIP + 1));;
	"$KSFT_XFAIL") echo "ok $KTAP_TESTNO $* # XFAIL"; KTAP_XFAIL=$((KTAP_XFAIL + 1));;
	*) echo "not ok $KTAP_TESTNO $*"; KTAP_FAIL=$((KTAP_FAIL + 1));;
	esac
}

# ktap_test DESCRIPTION FUNCTION [ARGS...]: runs FUNCTION, fails it on a kernel splat.
# KTAP_ONLY=ERE (selftests/run.sh passes it into the VM) runs only the tests whose
# description matches; the others are reported as skipped.
ktap_test() {
	local desc=$1; shift
	local mark rc start
	if [ -n "${KTAP_ONLY:-}" ] && ! grep -Eq -- "$KTAP_ONLY" <<< "$desc"; then
		ktap_result "$KSFT_SKIP" "$desc (not in KTAP_ONLY)"
		return
	fi
	mark=$(dmesg | wc -l)
	start=$SECONDS
	"$@"
	rc=$?
	ktap_print_msg "'$desc' took $((SECONDS - start)) s"
	if [ $rc -ne "$KSFT_SKIP" ] && dmesg | tail -n +"$((mark + 1))" | kernel_splat; then
		ktap_print_msg "kernel log during '$desc':"
		dmesg | tail -n +"$((mark + 1))" | sed 's/^/#   /' | head -40
		rc=$KSFT_FAIL
	fi
	ktap_result "$rc" "$desc"
}

ktap_finished() {
	echo "# Totals: pass:$KTAP_PASS fail:$KTAP_FAIL xfail:$KTAP_XFAIL xpass:0 skip:$KTAP_SKIP error:0"
	[ "$KTAP_FAIL" -eq 0 ]
}

# Reads a kernel log on stdin; true if it shows an oops, warning or lock problem.
kernel_splat() {
	grep -Eq 'Oops|BUG:|WARNING:|KASAN|UBSAN|general protection|possible circular locking|possible recursive locking|inconsistent lock state|suspicious RCU usage|blocked for more than|soft lockup|refcount_t:|list_(add|del) corruption|non-static key|work func [^ ]*metaroce[^ ]* enqueued on deprecated'
}

# fail MESSAGE: prints why a test fails and returns KSFT_FAIL.
fail() { ktap_print_msg "FAIL: $*"; return $KSFT_FAIL; }

# counter DEV NAME: a port counter, read from sysfs (udp_tunnel.sh checks that it agrees
# with rdma_counter): under TCG every program started costs about 0.1 s, and the four
# of rdma_counter added up to minutes over the suite.
counter() {
	local v=''
	read -r v 2>/dev/null < "/sys/class/infiniband/$1/ports/1/hw_counters/$2"
	echo "$v"
}

# rdma_counter DEV NAME: the same counter as `rdma statistic show link` prints it.
rdma_counter() { rdma statistic show link "$1/1" | tr -s ' ' '\n' | grep -A1 -x "$2" | tail -1; }

# slab_kib: the kernel's slab memory (reclaimable and not) in KiB.
slab_kib() { sed -n 's/^Slab: *\([0-9]*\) kB/\1/p' /proc/meminfo; }

# listening NS PORT: a TCP socket listens on PORT in namespace NS.
listening() { [ -n "$(ss -N "$1" -Htln "sport = :$2")" ]; }

# cm_listeners: how many rdma_cm IDs listen on any device.
cm_listeners() { rdma resource show cm_id 2>/dev/null | grep -c "state LISTEN"; }
more_cm_listeners() { [ "$(cm_listeners)" -gt "$1" ]; }
cm_listening() { rdma resource show cm_id 2>/dev/null | grep -Eq "state LISTEN .*src-addr [^ ]+:$1( |$)"; }

# await_cm_listen PORT: waits (30 s at most) until an rdma_cm ID listens on PORT,
# and says so if none does: a client started before its server listens is
# refused, and under TCG a server may take seconds.
await_cm_listen() { busywait 30000 cm_listening "$1" || ktap_print_msg "no rdma_cm listener on port $1 after 30 s"; }

# await_cm_listeners_above N: the same for a server whose port the caller does not
# know: until more than N rdma_cm IDs listen.
await_cm_listeners_above() { busywait 30000 more_cm_listeners "$1" || ktap_print_msg "no new rdma_cm listener after 30 s"; }

# no_rc_qps: no RC QP is left on any device.
no_rc_qps() { [ "$(rdma resource show qp 2>/dev/null | grep -c 'type RC')" -eq 0 ]; }

# no_conn DEV: DEV holds no connection.
no_conn() { [ "$(counter "$1" conns_open)" -eq 0 ]; }

# nap SECONDS: sleeps without starting a program: a read that times out on a pipe
# nobody writes to.
exec {NAP_FD}<> <(:)
nap() { read -rt "$1" -u "$NAP_FD"; :; }

# busywait TIMEOUT_MS COMMAND...: retries COMMAND until it succeeds or time runs out.
busywait() {
	local timeout_ms=$1; shift
	local t=${EPOCHREALTIME//[!0-9]/} end
	end=$((10#$t / 1000 + timeout_ms))
	while true; do
		"$@" && return 0
		t=${EPOCHREALTIME//[!0-9]/}
		[ $((10#$t / 1000)) -ge "$end" ] && return 1
		nap 0.1
	done
}

# Loads the RDMA core and metaroce.ko (idempotent).
load_metaroce() {
	modprobe -a ib_core ib_uverbs rdma_ucm udp_tunnel ip6_udp_tunnel veth 2>/dev/null
	metaroce_loaded && return 0
	# METAROCE_PARAMS: module parameters for every load (e.g. "gro=1 gso=1").
	# shellcheck disable=SC2086
	insmod "$METAROCE_KO" ${METAROCE_PARAMS:-}
}

unload_metaroce() {
	metaroce_loaded || return 0
	rmmod metaroce
}

# metaroce_loaded: the module is loaded (as lsmod would say, without starting it).
metaroce_loaded() { [ -d /sys/module/metaroce ]; }

# setup_ns VAR...: creates a namespace per VAR with a random suffix, stores its name in
# VAR and records it for cleanup_all_ns.
NS_LIST=()
setup_ns() {
	local var ns
	for var in "$@"; do
		ns="$var-$(mktemp -u XXXXXX)"
		ip netns add "$ns" || return 1
		ip -n "$ns" link set lo up
		NS_LIST+=("$ns")
		eval "$var=$ns"
	done
}

cleanup_all_ns() {
	local ns
	for ns in "${NS_LIST[@]}"; do
		ip netns del "$ns" 2>/dev/null
	done
	NS_LIST=()
}

# veth_pair NS_A NS_B [MTU]: vethA in NS_A (198.18.0.1/24), vethB in NS_B
# (198.18.0.2/24), both up.
veth_pair() {
	local a=$1 b=$2 mtu=${3:-1500}
	ip link add vethA netns "$a" type veth peer name vethB netns "$b" || return 1
	ip -n "$a" addr add 198.18.0.1/24 dev vethA
	ip -n "$b" addr add 198.18.0.2/24 dev vethB
	ip -n "$a" link set vethA mtu "$mtu" up
	ip -n "$b" link set vethB mtu "$mtu" up
}

# rdma_dev_exists NAME: the RDMA device is registered (visible in any namespace, as
# the RDMA subsystem is in shared netns mode).
rdma_dev_exists() { rdma dev show "$1" >/dev/null 2>&1; }
rdma_dev_gone() { ! rdma_dev_exists "$1"; }

# port_state NAME: ACTIVE or DOWN, as `rdma link show` reports it.
port_state() { rdma link show "$1/1" 2>/dev/null | sed -n 's/.* state \([A-Z_]*\).*/\1/p'; }

# The device pair most tests use: mroce0 on vethA in $NSA, mroce1 on vethB in $NSB.
# create_pair [TYPE]: TYPE is metaroce (the default) or rxe, the comparison peer.
create_pair() {
	local type=${1:-metaroce}
	ip netns exec "$NSA" rdma link add mroce0 type "$type" netdev vethA || return 1
	ip netns exec "$NSB" rdma link add mroce1 type "$type" netdev vethB || return 1
}

# load_rdma_type TYPE: loads what create_pair TYPE needs (metaroce.ko or rdma_rxe).
load_rdma_type() {
	case $1 in
	metaroce) load_metaroce;;
	rxe) modprobe -a ib_core ib_uverbs rdma_ucm veth rdma_rxe;;
	*) echo "unknown device type '$1' (metaroce or rxe)" >&2; return 1;;
	esac
}

# setup_pair [TYPE]: namespaces $NSA and $NSB joined by veth, with a device of TYPE
# (metaroce unless given) on each end, their GIDs ready.
setup_pair() {
	local type=${1:-metaroce}
	load_rdma_type "$type" || return 1
	setup_ns NSA NSB || return 1
	veth_pair "$NSA" "$NSB" || return 1
	create_pair "$type" && wait_pair_gids
}

# py_run TIMEOUT PROGRAM ARGS...: runs a Python test program in $NSA, bounded by
# TIMEOUT seconds, its output shown as KTAP comments; its exit code is left in PY_RC.
py_run() {
	local to=$1 out; shift
	out=$(ip netns exec "$NSA" timeout "$to" /usr/bin/python3 "$@" 2>&1)
	PY_RC=$?
	[ -n "$out" ] && echo "$out" | sed 's/^/# /'
	return 0
}

# gid_text ADDR: the GID of ADDR (IPv4-mapped for an IPv4 address) as sysfs prints it.
gid_text() {
	local a b c d head=$1 tail='' h=() t=() g x out=() n
	if [[ $1 != *:* ]]; then
		IFS=. read -r a b c d <<< "$1"
		printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x\n' "$a" "$b" "$c" "$d"
		return
	fi
	[[ $1 == *::* ]] && { head=${1%%::*}; tail=${1#*::}; }
	[ -n "$head" ] && IFS=: read -ra h <<< "$head"
	[ -n "$tail" ] && IFS=: read -ra t <<< "$tail"
	for g in "${h[@]}"; do printf -v x %04x "0x$g"; out+=("$x"); done
	for ((n = ${#h[@]} + ${#t[@]}; n < 8; n++)); do out+=(0000); done
	for g in "${t[@]}"; do printf -v x %04x "0x$g"; out+=("$x"); done
	local IFS=:
	echo "${out[*]}"
}

# gid_index_of DEV ADDR: DEV's first GID index for ADDR (IPv4 or IPv6), from sysfs with
# builtins only (ibv_devinfo -v prints the whole table: seconds under TCG, and an
# incast starts 8 clients while the first ones already run). A device with a few
# addresses has them at its first indices: those first.
gid_index_of() {
	local want f g
	want=$(gid_text "$2")
	for f in /sys/class/infiniband/"$1"/ports/1/gids/{0..31} /sys/class/infiniband/"$1"/ports/1/gids/*; do
		read -r g 2>/dev/null < "$f" && [ "$g" = "$want" ] && { echo "${f##*/}"; return 0; }
	done
	return 1
}

# gid_index NS DEV ADDR: index of DEV's IPv4-mapped GID for IPv4 ADDR (the GID table
# is the device's, whichever namespace NS it is in).
gid_index() { gid_index_of "$2" "$3"; }

delete_pair() {
	rdma link del mroce0 && rdma link del mroce1
}

# Waits until both GID tables hold their IPv4-mapped GID (the RDMA core adds it).
wait_pair_gids() {
	busywait 10000 gid_index_of mroce0 198.18.0.1 >/dev/null &&
		busywait 10000 gid_index_of mroce1 198.18.0.2 >/dev/null
}

# Removes every device the tests create and their namespaces (an EXIT trap).
#
# It first waits (30 s at most) until no metaroce device is left in sysfs: a device whose
# netdev went away unregisters in the RDMA core's workqueue, and a namespace deleted
# meanwhile races the core's removal of the device's per-namespace copy (ib_core's
# remove_one_compat_dev() calls device_del() after dropping compat_devs_mutex, so
# rdma_dev_exit_net() can let the namespace be freed first: KASAN reports a
# use-after-free in kobject_uevent_net_broadcast() on the sanitizer kernel). rdma_rxe has
# the same exposure; it is the kernel's race, not a test of the driver.
cleanup_devices_and_ns() {
	local d
	for d in mroce0 mroce1 mroce2 mroce3 mroce9; do
		[ -e "/sys/class/infiniband/$d" ] && rdma link del "$d" 2>/dev/null
	done
	busywait 30000 no_metaroce_sysfs
	cleanup_all_ns
}

# no_metaroce_sysfs: no mroce* device is left in /sys/class/infiniband.
no_metaroce_sysfs() { ! compgen -G '/sys/class/infiniband/mroce*' >/dev/null; }
