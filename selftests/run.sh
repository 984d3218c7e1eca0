#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Host side of the selftests: boots the test VM once (with kmemleak), runs
# selftests/run_tests.sh in it, and fails on any failed test or kernel splat.
#   selftests/run.sh [TEST_PROG...]
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
[ -f metaroce.ko ] || { echo "selftests: build the module first (make)" >&2; exit 1; }
# The whole run takes 1,400 to 2,200 s on these machines (2 cores, TCG); CI allows 90 min.
tools/vm-run --kmemleak -t "${SELFTESTS_TIMEOUT:-4200}" "selftests/run_tests.sh $*"
