#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Host side of the selftests: boots the test VM once (with kmemleak), runs
# selftests/run_tests.sh in it, and fails on any failed test or kernel splat.
#   selftests/run.sh [--sanitize] [TEST_PROG...]
# --sanitize: on the sanitizer kernel (KASAN, UBSAN, KFENCE on top of the test kernel's
# lockdep and kmemleak; scripts/build-kernel.sh --sanitize), with the module built for
# it. Both are built on first use; `make check-sanitize` runs the whole suite this way.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
flavour=() mem=2G
if [ "${1:-}" = --sanitize ]; then
	shift
	flavour=(--sanitize) mem=3G
	scripts/build-module.sh --sanitize >/dev/null || { echo "selftests: building the sanitizer kernel or module failed" >&2; exit 1; }
else
	[ -f metaroce.ko ] || { echo "selftests: build the module first (make)" >&2; exit 1; }
fi
# The whole run takes 2,600 to 5,000 s on these machines (2 cores, TCG: the same code
# took 1x and 2x as long in two hours of one day); CI allows 90 min for everything, so
# scripts/check.sh gives the VM what the host steps left (SELFTESTS_TIMEOUT) and the
# guest a budget 5 minutes shorter (SELFTESTS_BUDGET: run_tests.sh skips, and names,
# the programs that would not end within it). KASAN and its shadow memory make the
# sanitizer kernel's run slower still.
# The tests' knobs, when set here, reach the guest (see each test's header).
# The compiled helpers (selftests/Makefile), on the host: the guest shares its root.
make -s -C selftests || { echo "selftests: building the helpers (selftests/Makefile) failed" >&2; exit 1; }
export VM_ENV="SELFTESTS_BUDGET FAULT_ROUNDS CM_MADS RING_SEEDS RING_SECONDS MUTATIONS MUTATION_SECONDS MUTATION_FLOOR SPOOFED_OPENS METAROCE_PARAMS PROG_TIMEOUT COMPLY_ARGS KTAP_ONLY"
tools/vm-run "${flavour[@]}" -m $mem --kmemleak -t "${SELFTESTS_TIMEOUT:-4800}" "selftests/run_tests.sh $*"
