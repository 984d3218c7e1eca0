#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR MIT
#
# Compiles the protocol core and an instantiation of Connection<Aimd> (every
# public entry point, see no_panic.rs) with the exact rustc flags of the last
# kernel build, and fails if the objects reference any core panic function:
# with the kernel's overflow checks on, that proves no reachable panic paths.
# Needs a prior module build (for rust/proto/.metaroce_proto.o.cmd).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
kernel_compile no_panic "$here/no_panic.rs"
if nm -u "$out/proto.o" "$out/inst.o" | grep -i panic; then
	echo "FAIL: panic paths above" >&2
	exit 1
fi
echo "ok: no panic paths in the core ($(size -d "$out/inst.o" | awk 'NR==2{print $1}') bytes of instantiated text)"
