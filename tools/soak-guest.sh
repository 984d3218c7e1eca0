#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Runs INSIDE the test VM (see tools/soak): mixed traffic between mroce0 (in $NSA) and
# mroce1 (in $NSB) over a veth pair with netem loss and reordering on both ends, for
# SOAK_SECONDS (default 1800), every checked byte checked:
#   - RC, byte-exact: rc_integrity.py (WRITE, WRITE_WITH_IMM, READ, SEND, SEND_WITH_IMM
#     in both directions, random offsets and lengths, every byte of both MRs compared
#     with a shadow copy; then chains of atomics checked for exactly-once execution),
#     one run after another with a new seed each;
#   - rdma_cm: rping with -V (each ping's data validated), 500 pings of 1 KiB a run;
#   - UD and RC load: ib_send_bw -c UD and ib_write_bw -q 2 (perftest; counted, not
#     checked: UD may lose datagrams by definition).
# Prints one line per loop (runs, failures, what was checked) and the kernel's slab
# memory before the devices were created and after they were removed; exits 1 if any
# run failed. SOAK_NETEM overrides the impairment (default "delay 1ms reorder 10% 50%
# loss 1%").

. "$(dirname "$0")/../selftests/lib.sh"

D=${SOAK_SECONDS:-1800}
NETEM=${SOAK_NETEM:-delay 1ms reorder 10% 50% loss 1%}
HERE=$(cd "$(dirname "$0")/.." && pwd)
LOG=$(mktemp -d /tmp/soak.XXXXXX)
IPA=198.18.0.1
trap 'pkill -x rping; pkill -x ib_send_bw; pkill -x ib_write_bw; cleanup_devices_and_ns; rm -rf "$LOG"' EXIT

# settled_slab_kib: slab_kib once the reclaimable caches were dropped.
settled_slab_kib() {
	sync
	echo 2 > /proc/sys/vm/drop_caches
	slab_kib
}

load_metaroce || { echo "soak: cannot load metaroce"; exit 1; }
slab0=$(settled_slab_kib)
setup_pair metaroce || { echo "soak: cannot set up the device pair"; exit 1; }
# shellcheck disable=SC2086 # NETEM is netem's arguments
tc -n "$NSA" qdisc add dev vethA root netem $NETEM &&
	tc -n "$NSB" qdisc add dev vethB root netem $NETEM || { echo "soak: netem failed"; exit 1; }
GA=$(gid_index "$NSA" mroce0 198.18.0.1)
GB=$(gid_index "$NSB" mroce1 198.18.0.2)
START=$SECONDS
END=$((SECONDS + D))
echo "# soak: ${D} s, netem \"$NETEM\" on both ends, kernel $(uname -r)"

# loop NAME FUNCTION: runs FUNCTION until the deadline; counts runs in $LOG/NAME.runs
# (each with its seconds) and failures in $LOG/NAME.fail (run, exit status, seconds:
# 124 is a timeout), keeping the first failure's output.
loop() {
	local name=$1 fn=$2 i=0 t0 rc
	: > "$LOG/$name.runs"; : > "$LOG/$name.fail"
	while [ $SECONDS -lt $END ]; do
		i=$((i + 1))
		t0=$SECONDS
		"$fn" "$i" > "$LOG/$name.out" 2>&1
		rc=$?
		if [ $rc = 0 ]; then
			echo "ok $((SECONDS - t0))" >> "$LOG/$name.runs"
		else
			echo "run $i at $((t0 - START)) s: exit $rc after $((SECONDS - t0)) s" >> "$LOG/$name.fail"
			[ -e "$LOG/$name.first_failure" ] || cp "$LOG/$name.out" "$LOG/$name.first_failure"
		fi
		cat "$LOG/$name.out" >> "$LOG/$name.all"
	done
}

rc_run() {
	ip netns exec "$NSA" timeout 600 /usr/bin/python3 "$HERE/selftests/rc_integrity.py" \
		mroce0 mroce1 --seed "$((0x50a6 + $1))" --batches 8 --atomics 50
}

# cm_dreq DEV GROUP: DEV's count of DREQs in the IB CM counter group GROUP.
# cm_dreqs: the rdma_cm disconnects so far: DREQs the client's device sent and
# resent, DREQs the server's device received.
cm_dreq() { cat "/sys/class/infiniband/$1/ports/1/$2/dreq"; }
cm_dreqs() {
	echo "sent $(cm_dreq mroce1 cm_tx_msgs), resent $(cm_dreq mroce1 cm_tx_retries)," \
		"received $(cm_dreq mroce0 cm_rx_msgs)"
}

rping_run() {
	local port=$((20000 + $1 % 2000)) srv cli_rc srv_rc t0 t1
	# The server ends on the client's disconnect (a DREQ), after the client: it may
	# take two minutes past the client's limit.
	ip netns exec "$NSA" timeout 420 rping -s -a $IPA -p $port -C 500 -V -S 1024 &
	srv=$!
	await_cm_listen $port
	t0=$SECONDS
	ip netns exec "$NSB" timeout 300 rping -c -a $IPA -p $port -C 500 -V -S 1024
	cli_rc=$?
	t1=$SECONDS
	wait $srv
	srv_rc=$?
	[ $cli_rc = 0 ] && [ $srv_rc = 0 ] && return 0
	echo "rping: client exit $cli_rc after $((t1 - t0)) s, server exit $srv_rc $((SECONDS - t1)) s after it (124: timed out)"
	echo "rping: CM DREQs in this soak: $(cm_dreqs) (one per run)"
	return 1
}

perftest_run() {
	local tool=$2 port=$((22000 + $1 % 2000)) srv rc; shift 2
	ip netns exec "$NSA" timeout 120 "$tool" -d mroce0 -x "$GA" -p $port -F "$@" &
	srv=$!
	busywait 20000 listening "$NSA" $port || { kill $srv; return 1; }
	ip netns exec "$NSB" timeout 120 "$tool" -d mroce1 -x "$GB" -p $port -F "$@" $IPA
	rc=$?
	wait $srv || rc=1
	return $rc
}
ud_run() { perftest_run "$1" ib_send_bw -c UD -s 1024 -D 10; }
write_run() { perftest_run "$(($1 + 1000))" ib_write_bw -q 2 -s 65536 -D 10; }

loop rc rc_run &
loop rping rping_run &
loop ud ud_run &
loop write write_run &
wait

rc=0
runs() { wc -l < "$LOG/$1.runs"; }
fails() { wc -l < "$LOG/$1.fail"; }
mib=$(grep -ho '[A-Z_]* [0-9.]* MiB' "$LOG/rc.all" 2>/dev/null | awk '{ s += $2 } END { printf "%.1f", s }')
echo "# rc_integrity.py: $(runs rc) runs, $(fails rc) failed; $mib MiB moved and checked byte for byte"
pings=$(($(runs rping) * 500))
echo "# rping -V: $(runs rping) runs, $(fails rping) failed; $pings pings of 1 KiB validated ($((pings / 1024)) MiB); CM DREQs $(cm_dreqs)"
echo "# ib_send_bw -c UD: $(runs ud) runs, $(fails ud) failed"
echo "# ib_write_bw -q 2: $(runs write) runs, $(fails write) failed"
for n in rc rping ud write; do
	[ -s "$LOG/$n.fail" ] || continue
	rc=1
	echo "# $n failed: $(paste -sd ';' "$LOG/$n.fail"); its runs that passed took" \
		"$(awk '{ print $2 }' "$LOG/$n.runs" | sort -n | awk '{ a[NR] = $1 } END { if (NR) printf "%d-%d s, median %d s", a[1], a[NR], a[int((NR + 1) / 2)] }')"
	echo "# first failure of $n:"
	sed 's/^/#   /' "$LOG/$n.first_failure" | tail -20
done
echo "# counters: $(for c in tx_data tx_retransmits rto_expired rx_duplicates tx_naks rx_dropped ud_rx_dropped; do printf '%s %s ' $c "$(counter mroce1 $c)"; done)"
pkill -x rping; pkill -x ib_send_bw; pkill -x ib_write_bw
cleanup_devices_and_ns
trap 'rm -rf "$LOG"' EXIT
unload_metaroce || { echo "# rmmod metaroce failed"; rc=1; }
slab1=$(settled_slab_kib)
echo "# slab memory: $slab0 KiB before the devices, $slab1 KiB after they and the module went ($((slab1 - slab0)) KiB)"
exit $rc
