# SPDX-License-Identifier: GPL-2.0
#
# A routed fabric in network namespaces, shared by selftests/fabric.sh and
# tools/bench-fabric-guest.sh (sourced after lib.sh; runs inside the test VM):
#
#   s1 ─┐                                   ┌─ d1
#   s2 ─┼─ r1 ══ K parallel links (l1..lK) ══ r2 ─┘
#   ..  │   ECMP, IPv4 and IPv6, hashing on the UDP 5-tuple
#   sN ─┘   (net.ipv{4,6}.fib_multipath_hash_policy=1)
#
# N sender hosts (s1..sN, up to 8) hang off router r1, one receiver host d1 off r2;
# the routers are joined by K veth links (1..8), each end shaped to $FABRIC_RATE by
# tbf with an ECN-marking child ($FABRIC_AQM, fq_codel ecn by default); the host links
# are not shaped. Every host has two netdevs to its router, one per plane, so that
# metaroce and rdma_rxe (which share a driver id and so must not share a netdev) run
# over the same K links:
#
#   plane     netdev  sender si              receiver d1           RDMA device
#   metaroce  mr0     10.1.i.1 fd00:1:i::1   10.2.1.1 fd00:2:1::1  mrsI / mrd1
#   rxe       rx0     10.11.i.1 fd00:11:i::1 10.12.1.1 fd00:12:1::1 rxsI / rxd1
#
# Link i: r1's end 10.0.i.1 / fd00:0:i::1, r2's end 10.0.i.2 / fd00:0:i::2, both named
# lI. r1 sees sender i's traffic as rx on its netdev hI, r2 the receiver's on d1.
#
#   fabric_up K N                   build it (FABRIC_TYPES: "metaroce", "rxe" or both)
#   fabric_link_impair I ARGS...    netem ARGS on both ends of link I, above the shaper
#                                   ("loss 100%" is a blackhole: routes unchanged)
#   fabric_link_clear I             back to the shaper alone
#   fabric_topology                 print the topology
#   fabric_counters                 per-link counters (bytes, packets, drops, ECN marks)
#   fabric_link_tx I                bytes r1 sent on link I (the data direction)
#   fabric_down                     remove devices and namespaces
#
# Settings (environment): FABRIC_RATE (per link and direction, default 20mbit: see
# Documentation/metaroce/testing.rst for how it was chosen), FABRIC_AQM (the child
# qdisc, default "fq_codel ecn"), FABRIC_HASH_POLICY (default 1; 0 hashes on addresses
# only and puts every flow between two hosts on one link), FABRIC_MTU (default 1500),
# FABRIC_TYPES (default "metaroce"), FABRIC_BURST_MS (the shaper's bucket in
# milliseconds of the rate, default 2, at least 3 MTUs).

: "${FABRIC_RATE:=20mbit}"
: "${FABRIC_AQM:=fq_codel ecn}"
: "${FABRIC_HASH_POLICY:=1}"
: "${FABRIC_MTU:=1500}"
: "${FABRIC_TYPES:=metaroce}"
: "${FABRIC_BURST_MS:=2}"
FABRIC_K=0
FABRIC_N=0
# The namespaces (setup_ns names them; fab_ns looks one up by node name).
FABNS_r1='' FABNS_r2='' FABNS_d1=''
FABRIC_DEVS=()

# fab_ns NAME: the namespace of fabric node NAME (r1, r2, s1..s8, d1).
fab_ns() { local v="FABNS_$1"; echo "${!v}"; }

# fab_addr PLANE SIDE I FAMILY: a host's address. PLANE mr or rx, SIDE s or d.
fab_addr() {
	local net
	case $1$2 in mrs) net=1;; mrd) net=2;; rxs) net=11;; rxd) net=12;; esac
	if [ "$4" = 6 ]; then echo "fd00:$net:$3::1"; else echo "10.$net.$3.1"; fi
}

# fab_dev PLANE SIDE I: the RDMA device of a host (mrs1, mrd1, rxs1, ...).
fab_dev() { echo "$1$2$3"; }

# Under TCG every program started costs about 0.1 s, and a fabric is some 150 ip and
# tc commands: they are queued per namespace (fab_queue) and each namespace's run in one
# `ip -batch` (fab_flush). A namespace of "-" is the VM's own.
declare -gA FAB_IPQ=()
fab_queue() { local ns=$1; shift; FAB_IPQ[$ns]+="$*"$'\n'; }
fab_flush() {
	local ns
	if [ -n "${FAB_IPQ[-]:-}" ]; then
		ip -batch - <<< "${FAB_IPQ[-]}" || return 1
		unset 'FAB_IPQ[-]'
	fi
	for ns in "${!FAB_IPQ[@]}"; do
		ip -n "$ns" -batch - <<< "${FAB_IPQ[$ns]}" || return 1
	done
	FAB_IPQ=()
}

# fab_hostlink NS ROUTER RNAME PLANE SIDE I: queues the host's netdev PLANE"0" in NS to
# RNAME on ROUTER, both ends addressed, a default route per plane.
fab_hostlink() {
	local ns=$1 r=$2 rname=$3 plane=$4 side=$5 i=$6 net far
	case $plane$side in mrs) net=1;; mrd) net=2;; rxs) net=11;; rxd) net=12;; esac
	# The far side's planes, through this host's router.
	case $plane$side in mrs) far=2;; mrd) far=1;; rxs) far=12;; rxd) far=11;; esac
	fab_queue - link add "${plane}0" netns "$ns" type veth peer name "$rname" netns "$r"
	fab_queue "$ns" addr add "10.$net.$i.1/24" dev "${plane}0"
	fab_queue "$ns" addr add "fd00:$net:$i::1/64" dev "${plane}0" nodad
	fab_queue "$ns" link set "${plane}0" mtu "$FABRIC_MTU" up
	fab_queue "$ns" route add "10.$far.0.0/16" via "10.$net.$i.254" dev "${plane}0"
	fab_queue "$ns" route add "fd00:$far::/32" via "fd00:$net:$i::fe" dev "${plane}0"
	fab_queue "$r" addr add "10.$net.$i.254/24" dev "$rname"
	fab_queue "$r" addr add "fd00:$net:$i::fe/64" dev "$rname" nodad
	fab_queue "$r" link set "$rname" mtu "$FABRIC_MTU" up
}

# fab_shape_cmds DEV BURST [PARENT HANDLE]: the tc commands of the link's qdisc: tbf at
# $FABRIC_RATE with a bucket of BURST bytes (fab_burst), $FABRIC_AQM under it.
fab_shape_cmds() {
	local dev=$1 burst=$2 parent=${3:-root} handle=${4:-1:}
	echo "qdisc add dev $dev $parent handle $handle tbf rate $FABRIC_RATE burst $burst latency 200ms"
	echo "qdisc add dev $dev parent ${handle%:}:1 handle ${handle%:}0: $FABRIC_AQM"
}

# fab_shape NS DEV [PARENT HANDLE]: puts that qdisc on DEV in NS.
fab_shape() { local ns=$1 dev=$2; shift 2; tc -n "$ns" -batch - <<< "$(fab_shape_cmds "$dev" "$(fab_burst)" "$@")"; }

# fab_burst: the shaper's bucket in bytes, $FABRIC_BURST_MS of the rate (3 MTUs at least,
# so about 2 ms at the default rate).
fab_burst() {
	fab_rate_bps | awk -v m="$FABRIC_MTU" -v ms="$FABRIC_BURST_MS" \
		'{ b = $1 / 8 * ms / 1000; if (b < 3 * m) b = 3 * m; printf "%d", b }'
}

# fabric_set_burst MS: every link's shaper bucket (both ends) to MS milliseconds of the
# rate (FABRIC_BURST_MS for links shaped later); links under netem are left alone.
fabric_set_burst() {
	local i r
	FABRIC_BURST_MS=$1
	for i in $(seq "$FABRIC_K"); do
		for r in "$FABNS_r1" "$FABNS_r2"; do
			tc -n "$r" qdisc show dev "l$i" | grep -q '^qdisc tbf 1: root' || continue
			tc -n "$r" qdisc change dev "l$i" root handle 1: tbf rate "$FABRIC_RATE" \
				burst "$(fab_burst)" latency 200ms || return 1
		done
	done
}

# fab_rate_bps: $FABRIC_RATE in bit/s (tc units: kbit, mbit, gbit).
fab_rate_bps() {
	echo "$FABRIC_RATE" | awk '{ v = $1 + 0; u = tolower($1); sub(/^[0-9.]+/, "", u)
		m = u == "kbit" ? 1e3 : u == "mbit" ? 1e6 : u == "gbit" ? 1e9 : 1
		printf "%d\n", v * m }'
}

# fab_sysctls NS: forwarding, multipath hashing, no reverse-path filter.
fab_sysctls() {
	ip netns exec "$1" sh -c "
		sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
		sysctl -qw net.ipv4.fib_multipath_hash_policy=$FABRIC_HASH_POLICY
		sysctl -qw net.ipv6.fib_multipath_hash_policy=$FABRIC_HASH_POLICY
		sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0"
}

# fabric_up K N: K links between the routers, N sender hosts, one receiver, and the
# RDMA devices of $FABRIC_TYPES on every host, their GIDs ready.
fabric_up() {
	local k=${1:-4} n=${2:-1} i t plane side h
	{ [ "$k" -ge 1 ] && [ "$k" -le 8 ] && [ "$n" -ge 1 ] && [ "$n" -le 8 ]; } ||
		{ echo "fabric_up: K (links) and N (senders) must be 1..8" >&2; return 1; }
	modprobe -a sch_tbf sch_netem sch_fq_codel sch_red 2>/dev/null
	for t in $FABRIC_TYPES; do load_rdma_type "$t" || return 1; done
	FABRIC_K=$k FABRIC_N=$n FABRIC_DEVS=()
	setup_ns FABNS_r1 FABNS_r2 FABNS_d1 || return 1
	for i in $(seq "$n"); do setup_ns "FABNS_s$i" || return 1; done
	fab_sysctls "$FABNS_r1" && fab_sysctls "$FABNS_r2" || return 1
	local r1tc="" r2tc="" burst
	burst=$(fab_burst)
	for i in $(seq "$k"); do
		fab_queue - link add "l$i" netns "$FABNS_r1" type veth peer name "l$i" netns "$FABNS_r2"
		fab_queue "$FABNS_r1" addr add "10.0.$i.1/24" dev "l$i"
		fab_queue "$FABNS_r2" addr add "10.0.$i.2/24" dev "l$i"
		fab_queue "$FABNS_r1" addr add "fd00:0:$i::1/64" dev "l$i" nodad
		fab_queue "$FABNS_r2" addr add "fd00:0:$i::2/64" dev "l$i" nodad
		fab_queue "$FABNS_r1" link set "l$i" mtu "$FABRIC_MTU" up
		fab_queue "$FABNS_r2" link set "l$i" mtu "$FABRIC_MTU" up
		r1tc+=$(fab_shape_cmds "l$i" "$burst")$'\n' r2tc+=$(fab_shape_cmds "l$i" "$burst")$'\n'
	done
	for plane in mr rx; do
		for i in $(seq "$n"); do
			fab_hostlink "$(fab_ns "s$i")" "$FABNS_r1" "h$i$plane" "$plane" s "$i"
		done
		fab_hostlink "$FABNS_d1" "$FABNS_r2" "d1$plane" "$plane" d 1
	done
	fab_flush || { echo "fabric_up: ip failed" >&2; return 1; }
	tc -n "$FABNS_r1" -batch - <<< "$r1tc" && tc -n "$FABNS_r2" -batch - <<< "$r2tc" ||
		{ echo "fabric_up: shaping the links failed" >&2; return 1; }
	# ECMP routes to the far hosts' planes, every link a next hop, both families.
	fabric_use_links "$k" || return 1
	# The RDMA devices.
	for t in $FABRIC_TYPES; do
		case $t in metaroce) plane=mr;; rxe) plane=rx;; esac
		for h in $(seq "$n" | sed 's/^/s/') d1; do
			side=${h%%[0-9]*} i=${h#?}
			ip netns exec "$(fab_ns "$h")" rdma link add "$(fab_dev $plane "$side" "$i")" \
				type "$t" netdev "${plane}0" || return 1
			FABRIC_DEVS+=("$(fab_dev $plane "$side" "$i")")
		done
	done
	for h in $(seq "$n" | sed 's/^/s/') d1; do
		side=${h%%[0-9]*} i=${h#?}
		for t in $FABRIC_TYPES; do
			case $t in metaroce) plane=mr;; rxe) plane=rx;; esac
			busywait 10000 fab_has_gids "$(fab_dev $plane "$side" "$i")" \
				"$(fab_addr $plane "$side" "$i" 4)" "$(fab_addr $plane "$side" "$i" 6)" ||
				{ echo "fabric_up: no GIDs on $(fab_dev $plane "$side" "$i")" >&2; return 1; }
		done
	done
	# Neighbours and routes warm: one ping per host and family through the fabric.
	for i in $(seq "$n"); do
		for plane in $([[ $FABRIC_TYPES == *metaroce* ]] && echo mr) $([[ $FABRIC_TYPES == *rxe* ]] && echo rx); do
			ip netns exec "$(fab_ns "s$i")" ping -q -c 1 -W 5 "$(fab_addr $plane d 1 4)" >/dev/null &&
			ip netns exec "$(fab_ns "s$i")" ping -q -c 1 -W 5 "$(fab_addr $plane d 1 6)" >/dev/null ||
				{ echo "fabric_up: s$i cannot reach d1 over $plane" >&2; return 1; }
		done
	done
}

# fab_has_gids DEV ADDR4 ADDR6: DEV's GID table holds both addresses.
fab_has_gids() { gid_index_of "$1" "$2" >/dev/null && gid_index_of "$1" "$3" >/dev/null; }

# fabric_link_impair I ARGS...: netem ARGS (loss, delay, rate...) on both ends of link
# I, the shaper and its marking queue under it; r1's end (the data direction) first.
# Routes are unchanged. The netem root (handle 5:) replaces the shaper in one step,
# so the link is never unshaped in between; a second call changes the netem only.
fabric_link_impair() {
	local i=$1 r; shift
	for r in "$FABNS_r1" "$FABNS_r2"; do
		if tc -n "$r" qdisc show dev "l$i" | grep -q '^qdisc netem 5: root'; then
			tc -n "$r" qdisc change dev "l$i" root handle 5: netem "$@" limit 100000 || return 1
			continue
		fi
		tc -n "$r" qdisc replace dev "l$i" root handle 5: netem "$@" limit 100000 || return 1
		fab_shape "$r" "l$i" "parent 5:1" 2: || return 1
	done
}

# fabric_link_renetem I ARGS...: changes the netem fabric_link_impair put on link I,
# both ends, r1's first: one tc run per router, for timing paths (fabric_r1_park).
fabric_link_renetem() {
	local i=$1 r; shift
	for r in "$FABNS_r1" "$FABNS_r2"; do
		tc -n "$r" qdisc change dev "l$i" root handle 5: netem "$@" limit 100000 || return 1
	done
}

# fabric_link_clear I: link I back to the shaper alone.
fabric_link_clear() {
	local r
	for r in "$FABNS_r1" "$FABNS_r2"; do
		tc -n "$r" qdisc show dev "l$1" | grep -q '^qdisc tbf 1: root' && continue
		tc -n "$r" qdisc del dev "l$1" root 2>/dev/null
		fab_shape "$r" "l$1" || return 1
	done
}

# Under TCG every process started while perftest polls costs up to a second, so a
# timing path that runs during a transfer starts none but tc: r1's link counters come
# from /proc/PID/net/dev of a process parked in r1's namespace ($FABRIC_R1PID; procfs
# shows the reader's view of that process's namespace, unlike sysfs), sleeps are
# lib.sh's nap (fabric_nap SECONDS).
FABRIC_R1PID=
fabric_nap() { nap "$1"; }

# fabric_r1_park: parks a process in r1's namespace for fabric_r1_tx (once per fabric;
# fabric_down ends it).
fabric_r1_park() {
	local j line
	[ -n "$FABRIC_R1PID" ] && return 0
	ip netns exec "$FABNS_r1" sleep 100000 &
	FABRIC_R1PID=$!
	for ((j = 0; j < 100; j++)); do
		while IFS= read -r line; do
			[[ $line == *l1:* ]] && return 0
		done < "/proc/$FABRIC_R1PID/net/dev"
		fabric_nap 0.1
	done
	echo "# fabric_r1_park: no l1 in /proc/$FABRIC_R1PID/net/dev"
}

# fabric_r1_tx: r1's tx bytes on l1..lK into FABRIC_TX[1..K] and their sum into
# FABRIC_TXSUM (builtins only; after fabric_r1_park).
FABRIC_TX=() FABRIC_TXSUM=0
fabric_r1_tx() {
	local line f i
	FABRIC_TX=() FABRIC_TXSUM=0
	while IFS= read -r line; do
		line=${line/:/ }
		read -ra f <<< "$line"
		[[ ${f[0]} == l[0-9]* ]] && FABRIC_TX[${f[0]#l}]=${f[9]}
	done < "/proc/$FABRIC_R1PID/net/dev"
	for ((i = 1; i <= FABRIC_K; i++)); do FABRIC_TXSUM=$((FABRIC_TXSUM + ${FABRIC_TX[$i]:-0})); done
}

# fabric_wait_data: waits (120 s at most) until r1 forwards data: 64 KiB in 0.2 s
# (perftest's setup takes seconds under TCG). Builtins only.
fabric_wait_data() {
	local j prev
	fabric_r1_tx; prev=$FABRIC_TXSUM
	for ((j = 0; j < 600; j++)); do
		fabric_nap 0.2
		fabric_r1_tx
		((FABRIC_TXSUM - prev >= 65536)) && return 0
		prev=$FABRIC_TXSUM
	done
	return 1
}

# fabric_busiest_link: the link that carries most of the next second into
# FABRIC_BUSIEST, each link's bytes in it into FABRIC_DELTAS. Builtins only.
fabric_busiest_link() {
	local i d best=-1
	local -a before
	fabric_r1_tx; before=("${FABRIC_TX[@]}")
	fabric_nap 1
	fabric_r1_tx
	FABRIC_BUSIEST=1 FABRIC_DELTAS=
	for ((i = 1; i <= FABRIC_K; i++)); do
		d=$((FABRIC_TX[i] - ${before[i - 1]:-0}))
		FABRIC_DELTAS+="$d "
		((d > best)) && { best=$d; FABRIC_BUSIEST=$i; }
	done
}

# fabric_link_tx I: bytes r1 has sent on link I (the senders' data direction).
fabric_link_tx() { ip netns exec "$FABNS_r1" cat "/sys/class/net/l$1/statistics/tx_bytes"; }

# fabric_links_tx: the bytes r1 has sent on each link, one line, space-separated.
fabric_links_tx() {
	local i out=""
	for i in $(seq "$FABRIC_K"); do out+="$(fabric_link_tx "$i") "; done
	echo "${out% }"
}

# fabric_topology: what fabric_up built.
fabric_topology() {
	local i
	echo "fabric: $FABRIC_N sender(s) -> r1 == $FABRIC_K link(s) == r2 -> d1;" \
		"links $FABRIC_RATE each way, $FABRIC_AQM under tbf, MTU $FABRIC_MTU," \
		"multipath hash policy $FABRIC_HASH_POLICY; devices: ${FABRIC_DEVS[*]:-none}"
	for i in $(seq "$FABRIC_N"); do
		echo "  s$i ($(fab_ns "s$i")): mr0 $(fab_addr mr s "$i" 4) $(fab_addr mr s "$i" 6)," \
			"rx0 $(fab_addr rx s "$i" 4) $(fab_addr rx s "$i" 6) -> r1 h${i}mr/h${i}rx"
	done
	echo "  d1 ($FABNS_d1): mr0 $(fab_addr mr d 1 4) $(fab_addr mr d 1 6)," \
		"rx0 $(fab_addr rx d 1 4) $(fab_addr rx d 1 6) -> r2 d1mr/d1rx"
	ip -n "$FABNS_r1" route show 10.2.0.0/16 | sed 's/^/  r1: /'
	ip -n "$FABNS_r1" -6 route show fd00:2::/32 | sed 's/^/  r1: /'
}

# fabric_counters: per link and direction, the netdev's tx bytes and packets and the
# qdiscs' drops and ECN marks (tc -s).
fabric_counters() {
	local i r name
	printf '  %-5s %-6s %14s %10s %8s %8s %s\n' link dir tx_bytes tx_pkts dropped ecn_mark qdiscs
	for i in $(seq "$FABRIC_K"); do
		for r in r1 r2; do
			name=$(fab_ns "$r")
			ip netns exec "$name" sh -c "cat /sys/class/net/l$i/statistics/tx_bytes \
				/sys/class/net/l$i/statistics/tx_packets; tc -s qdisc show dev l$i" |
			awk -v l="l$i" -v d="$([ $r = r1 ] && echo '->' || echo '<-')" '
				NR == 1 { b = $0; next } NR == 2 { p = $0; next }
				/^qdisc/ { kinds = kinds (kinds ? "/" : "") $2 }
				# The root qdisc counts the drops of its children too: its figure alone.
				/dropped/ && !seen++ { s = $0; sub(/.*dropped /, "", s); sub(/,.*/, "", s); drop = s }
				/ecn_mark|ce_mark/ { for (f = 1; f < NF; f++) if ($f == "ecn_mark" || $f == "ce_mark") ecn += $(f + 1) }
				/marked/ { for (f = 1; f < NF; f++) if ($f == "marked") ecn += $(f + 1) }
				END { printf "  %-5s %-6s %14d %10d %8d %8d %s\n", l, d, b, p, drop, ecn, kinds }'
		done
	done
}

# fabric_down: the RDMA devices first (rdma_rxe's netdev notifier must not meet a
# metaroce device's netdev going away), then the namespaces.
fabric_down() {
	local d
	for d in "${FABRIC_DEVS[@]}"; do rdma link del "$d" 2>/dev/null; done
	FABRIC_DEVS=()
	if [ -n "$FABRIC_R1PID" ]; then
		kill "$FABRIC_R1PID" 2>/dev/null
		wait "$FABRIC_R1PID" 2>/dev/null
		FABRIC_R1PID=
	fi
	cleanup_all_ns
}

# fabric_perf_bg PLANE I FAMILY PORT OUT TOOL ARGS...: a perftest pair over the fabric
# in the background: the server on d1's device of PLANE (mr or rx) on TCP port PORT,
# the client on sender sI's, the RDMA traffic over the GIDs of FAMILY (4 or 6). The
# client's output goes to OUT, the server's to OUT.srv; fabric_perf_wait waits for all.
# fabric_perf_server and fabric_perf_client start one side each (incast: every server
# first, then every client at once).
FABRIC_PIDS=()
fabric_perf_bg() {
	fabric_perf_server "$1" "$3" "$4" "$5.srv" "${@:6}" || return 1
	fabric_perf_listening "$4" || return 1
	fabric_perf_client "$@"
}

# fabric_perf_server PLANE FAMILY PORT OUT TOOL ARGS...
fabric_perf_server() {
	local plane=$1 fam=$2 port=$3 out=$4 tool=$5; shift 5
	local sdev sg
	sdev=$(fab_dev "$plane" d 1)
	sg=$(gid_index_of "$sdev" "$(fab_addr "$plane" d 1 "$fam")") || return 1
	ip netns exec "$FABNS_d1" timeout "${FABRIC_PERF_TIMEOUT:-120}" "$tool" -d "$sdev" -x "$sg" \
		-p "$port" -F "$@" > "$out" 2>&1 &
	FABRIC_PIDS+=($!)
}

# fabric_perf_listening PORT: waits (20 s at most) for a server's TCP port on d1.
fabric_perf_listening() {
	busywait 20000 listening "$FABNS_d1" "$1" ||
		{ echo "fabric_perf: no server listens on port $1" >&2; return 1; }
}

# fabric_perf_client PLANE I FAMILY PORT OUT TOOL ARGS...
fabric_perf_client() {
	local plane=$1 i=$2 fam=$3 port=$4 out=$5 tool=$6; shift 6
	local cdev cg
	cdev=$(fab_dev "$plane" s "$i")
	cg=$(gid_index_of "$cdev" "$(fab_addr "$plane" s "$i" "$fam")") || return 1
	ip netns exec "$(fab_ns "s$i")" timeout "${FABRIC_PERF_TIMEOUT:-120}" "$tool" -d "$cdev" \
		-x "$cg" -p "$port" -F "$@" "$(fab_addr "$plane" d 1 4)" > "$out" 2>&1 &
	FABRIC_PIDS+=($!)
}

# fabric_perf_wait: waits for every fabric_perf_bg process; fails if any failed.
fabric_perf_wait() {
	local p rc=0
	for p in "${FABRIC_PIDS[@]}"; do wait "$p" || rc=1; done
	FABRIC_PIDS=()
	return $rc
}

# fabric_bw OUT: the average bandwidth perftest printed in OUT (BW average, column 4:
# MB/s, or Gb/s with --report_gbits).
fabric_bw() { grep -E '^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+' "$1" | tail -1 | awk '{ print $4 }'; }

# fabric_use_links M: the ECMP routes of both routers over links 1..M only (the other
# links stay up and shaped, and carry nothing): K=1 and K=4 in one fabric.
fabric_use_links() {
	local m=$1 i t nh4r1="" nh4r2="" nh6r1="" nh6r2=""
	for i in $(seq "$m"); do
		nh4r1+=" nexthop via 10.0.$i.2 dev l$i"
		nh4r2+=" nexthop via 10.0.$i.1 dev l$i"
		nh6r1+=" nexthop via fd00:0:$i::2 dev l$i"
		nh6r2+=" nexthop via fd00:0:$i::1 dev l$i"
	done
	for t in 2 12; do
		fab_queue "$FABNS_r1" route replace "10.$t.0.0/16" $nh4r1
		fab_queue "$FABNS_r1" route replace "fd00:$t::/32" $nh6r1
	done
	for t in 1 11; do
		fab_queue "$FABNS_r2" route replace "10.$t.0.0/16" $nh4r2
		fab_queue "$FABNS_r2" route replace "fd00:$t::/32" $nh6r2
	done
	fab_flush
}

# fabric_udp_link SPORT DPORT I [PLANE]: the link r1 routes a UDP flow from sender sI's
# PLANE (mr) address and port SPORT to d1's port DPORT over (ip route get).
fabric_udp_link() {
	local plane=${4:-mr}
	ip -n "$FABNS_r1" route get "$(fab_addr "$plane" d 1 4)" from "$(fab_addr "$plane" s "$3" 4)" \
		iif "h$3$plane" ipproto udp sport "$1" dport "$2" | sed -n 's/.* dev \(l[0-9]*\).*/\1/p' | head -1
}
