#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Runs every metaroce selftest (TEST_PROGS) inside the test VM, kselftest style:
# one KTAP line per program, its own KTAP output indented beneath.
#   selftests/run_tests.sh [TEST_PROG...]

cd "$(dirname "$0")" || exit 1
TEST_PROGS=(device_lifecycle.sh verbs_objects.sh xverbs.sh rc_data.sh rc_integrity.sh rc_errors.sh loopback.sh compliance.sh ud.sh rdma_cm.sh conn_lifecycle.sh fabric.sh rate_hint.sh user_interop.sh many_qps.sh udp_tunnel.sh gso.sh operator.sh hostile_packets.sh faults.sh)
[ $# -gt 0 ] && TEST_PROGS=("$@")
# SELFTESTS_BUDGET=SECONDS (scripts/check.sh sets it from CI's deadline): a program is
# skipped, and says so, when it would not end within the budget at the pace of this
# run so far. TCG's speed on these machines varies by 2x from one hour to the next, and a
# run that outlives CI's 90 minutes reports nothing at all. TYPICAL is each program's
# time in one run (2026-12-07, on a slow hour); only their ratios matter.
declare -A TYPICAL=([device_lifecycle.sh]=300 [verbs_objects.sh]=250 [xverbs.sh]=65
	[rc_data.sh]=600 [rc_integrity.sh]=170 [rc_errors.sh]=200 [loopback.sh]=400
	[compliance.sh]=60 [ud.sh]=90 [rdma_cm.sh]=160 [conn_lifecycle.sh]=150 [fabric.sh]=450
	[rate_hint.sh]=260 [user_interop.sh]=185 [many_qps.sh]=140 [udp_tunnel.sh]=145
	[gso.sh]=95 [operator.sh]=420 [hostile_packets.sh]=750 [faults.sh]=400)
BUDGET=${SELFTESTS_BUDGET:-0}
# Each program's limit: settings, or PROG_TIMEOUT for the long runs of a test's knobs.
TIMEOUT=${PROG_TIMEOUT:-$(sed -n 's/^timeout=//p' settings)}
# KASAN's checks and shadow make the sanitizer kernel two to three times slower.
case $(uname -r) in *-sanitize) TIMEOUT=$((${TIMEOUT:-600} * 3));; esac

echo "TAP version 13"
echo "1..${#TEST_PROGS[@]}"
n=0 pass=0 fail=0 skip=0 typical_done=0 over_budget=()
for prog in "${TEST_PROGS[@]}"; do
	n=$((n + 1))
	if [ "$BUDGET" -gt 0 ]; then
		# Seconds this one needs at this run's pace (the table's, before any ran), +15%.
		need=$((${TYPICAL[$prog]:-300} * 115 / 100))
		[ $typical_done -gt 0 ] && need=$((need * SECONDS / typical_done))
		if [ $((SECONDS + need)) -gt "$BUDGET" ]; then
			echo "ok $n selftests: metaroce: $prog # SKIP out of time: $SECONDS s of a $BUDGET s budget gone, about $need s needed"
			skip=$((skip + 1)) over_budget+=("$prog")
			continue
		fi
	fi
	echo "# selftests: metaroce: $prog"
	start=$SECONDS
	limit=${TIMEOUT:-600}
	# Within a budget, no program outlives it by more than 2 minutes: one that hangs
	# fails alone, and the VM lives to report the others.
	[ "$BUDGET" -gt 0 ] && [ $((BUDGET + 120 - SECONDS)) -lt "$limit" ] && limit=$((BUDGET + 120 - SECONDS))
	timeout "$limit" ./"$prog" 2>&1 | sed 's/^/  /'
	rc=${PIPESTATUS[0]}
	echo "# selftests: metaroce: $prog took $((SECONDS - start)) s"
	typical_done=$((typical_done + ${TYPICAL[$prog]:-300}))
	case $rc in
	0) echo "ok $n selftests: metaroce: $prog"; pass=$((pass + 1));;
	4) echo "ok $n selftests: metaroce: $prog # SKIP"; skip=$((skip + 1));;
	124) echo "not ok $n selftests: metaroce: $prog # TIMEOUT ${limit}s"; fail=$((fail + 1));;
	*) echo "not ok $n selftests: metaroce: $prog # exit=$rc"; fail=$((fail + 1));;
	esac
done
[ ${#over_budget[@]} -eq 0 ] ||
	echo "# skipped for want of time (SELFTESTS_BUDGET=$BUDGET): ${over_budget[*]}"
echo "# Totals: pass:$pass fail:$fail xfail:0 xpass:0 skip:$skip error:0"
[ $fail -eq 0 ]
