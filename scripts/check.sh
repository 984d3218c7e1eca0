#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make check`: every test of the project, bottom layer first, with one summary.
#   1. lints: no `unsafe` and no `bindings::` in the driver crate, no import cycles,
#      spec IDs, docs,
#      rustfmt, clippy, cache paths that do not depend on what is installed
#   2. the cargo tests of the protocol core, the simulator and the userspace endpoint
#      (unit, property, simulation, loopback UDP), the compliance suite against the
#      userspace endpoint (compliance/, host only),
#      then every fuzz target for a short while from the committed seeds
#   3. metaroce.ko builds against the test kernel (warning-free), the core compiled with
#      its flags has no panic path and no large stack frame, and DKMS builds it too
#   4. the selftests in the VM (kselftest/KTAP), failing on any kernel splat or leak
set -uo pipefail
. "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
export PATH=$HOME/.cargo/bin:$PATH

results=()
run_step() {
	local name=$1; shift
	local start=$SECONDS rc
	log "== $name"
	"$@"
	rc=$?
	results+=("$([ $rc -eq 0 ] && echo PASS || echo FAIL) $name ($((SECONDS - start)) s)")
	return $rc
}

lint_layers() {
	local bad
	bad=$(grep -rnE '\bunsafe\b|bindings::' --include='*.rs' drivers | grep -vE '^\S+:\s*//' || true)
	if [ -n "$bad" ]; then
		echo "drivers/ must use safe abstractions only:" >&2
		echo "$bad" >&2
		return 1
	fi
	grep -q '#!\[forbid(unsafe_code)\]' drivers/infiniband/sw/metaroce/metaroce.rs
}

run_step "layering lint (drivers/ is safe Rust)" lint_layers
check_imports() {
	local rc=0 d
	for d in drivers/infiniband/sw/metaroce rust/rdma rust/proto/src rust/sim/src rust/user/src; do
		scripts/check-imports.py "$d" || rc=1
	done
	return $rc
}

run_step "no import cycles between the files of a crate" check_imports
run_step "spec IDs unique and tracked" Documentation/metaroce/spec-ids.sh
run_step "spec status table names the tests that cite each ID" compliance/spec_links.py --check
run_step "docs parse (docutils, warnings are errors)" scripts/check-docs.sh
run_step "rustfmt --check (the kernel's settings)" scripts/check-format.sh
run_step "clippy (userspace crates; kernel crates with CLIPPY=1)" scripts/check-clippy.sh
run_step "cache paths independent of what is installed" scripts/check-cache-keys.sh
run_step "cargo test (protocol core, simulator, userspace endpoint)" cargo test --workspace --quiet
run_step "compliance suite against metaroce-user on this host" compliance/run.sh --no-table
run_step "Wireshark dissector: tshark decodes a capture as the suite does" compliance/check-dissector.sh
run_step "fuzz smoke (every target, 20 s each)" scripts/fuzz-smoke.sh 20
if run_step "build metaroce.ko" make --no-print-directory modules; then
	run_step "protocol core: no panic path, no large stack frame (kernel flags)" \
		bash -c 'rust/proto/kcheck/no-panic.sh && rust/proto/kcheck/stack-frames.sh'
	run_step "DKMS build against the test kernel" scripts/dkms.sh check "$(scripts/build-kernel.sh --kdir)"
	# CHECK_DEADLINE (epoch seconds; .ci/run sets CI's): the VM gets what is left of it,
	# the guest's programs 5 minutes less (boot, the kmemleak scans, shutdown).
	if [ -n "${CHECK_DEADLINE:-}" ]; then
		left=$((CHECK_DEADLINE - $(date +%s)))
		[ "$left" -lt "${SELFTESTS_TIMEOUT:-4800}" ] && export SELFTESTS_TIMEOUT=$((left > 900 ? left : 900))
		export SELFTESTS_BUDGET=$((${SELFTESTS_TIMEOUT:-4800} - 300))
		log "VM selftests: ${SELFTESTS_TIMEOUT:-4800} s left before CI's deadline, a budget of $SELFTESTS_BUDGET s"
	fi
	vm_log=$(mktemp)
	run_step "VM selftests" bash -c 'selftests/run.sh | tee "$0"; exit "${PIPESTATUS[0]}"' "$vm_log"
	skipped=$(sed -n 's/^# skipped for want of time ([^)]*): //p' "$vm_log")
	[ -z "$skipped" ] || results+=("NOTE VM selftests not run for want of time: $skipped")
	rm -f "$vm_log"
else
	results+=("FAIL VM selftests (not run: no module)")
fi

echo
echo "==== make check summary"
pass=0 fail=0
for r in "${results[@]}"; do
	echo "  $r"
	case $r in PASS*) pass=$((pass + 1));; NOTE*) ;; *) fail=$((fail + 1));; esac
done
echo "check: $pass passed, $fail failed"
[ $fail -eq 0 ]
