#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Runs every metaroce selftest (TEST_PROGS) inside the test VM, kselftest style:
# one KTAP line per program, its own KTAP output indented beneath.
#   selftests/run_tests.sh [TEST_PROG...]

cd "$(dirname "$0")" || exit 1
TEST_PROGS=(device_lifecycle.sh verbs_objects.sh xverbs.sh udp_tunnel.sh gso.sh rc_data.sh rc_integrity.sh rc_errors.sh compliance.sh user_interop.sh ud.sh rdma_cm.sh many_qps.sh conn_lifecycle.sh hostile_packets.sh faults.sh operator.sh loopback.sh rate_hint.sh fabric.sh)
[ $# -gt 0 ] && TEST_PROGS=("$@")
# Each program's limit: settings, or PROG_TIMEOUT for the long runs of a test's knobs.
TIMEOUT=${PROG_TIMEOUT:-$(sed -n 's/^timeout=//p' settings)}
# KASAN's checks and shadow make the sanitizer kernel two to three times slower.
case $(uname -r) in *-sanitize) TIMEOUT=$((${TIMEOUT:-600} * 3));; esac

echo "TAP version 13"
echo "1..${#TEST_PROGS[@]}"
n=0 pass=0 fail=0 skip=0
for prog in "${TEST_PROGS[@]}"; do
	n=$((n + 1))
	echo "# selftests: metaroce: $prog"
	start=$SECONDS
	timeout "${TIMEOUT:-600}" ./"$prog" 2>&1 | sed 's/^/  /'
	rc=${PIPESTATUS[0]}
	echo "# selftests: metaroce: $prog took $((SECONDS - start)) s"
	case $rc in
	0) echo "ok $n selftests: metaroce: $prog"; pass=$((pass + 1));;
	4) echo "ok $n selftests: metaroce: $prog # SKIP"; skip=$((skip + 1));;
	124) echo "not ok $n selftests: metaroce: $prog # TIMEOUT ${TIMEOUT}s"; fail=$((fail + 1));;
	*) echo "not ok $n selftests: metaroce: $prog # exit=$rc"; fail=$((fail + 1));;
	esac
done
echo "# Totals: pass:$pass fail:$fail xfail:0 xpass:0 skip:$skip error:0"
[ $fail -eq 0 ]
