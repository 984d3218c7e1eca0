#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR MIT
#
# Compiles the protocol core and an instantiation of Connection<Aimd> (every
# public entry point, see no_panic.rs) with the exact rustc flags of the last
# kernel build, and fails if the objects reference any core panic function:
# with the kernel's overflow checks on, that proves no reachable panic paths.
# Needs a prior module build (for rust/proto/.metaroce_proto.o.cmd).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
cmd="$root/rust/proto/.metaroce_proto.o.cmd"
[ -f "$cmd" ] || { echo "no $cmd: build the module first" >&2; exit 4; }
line=$(sed -n 1p "$cmd")
objtree=$(sed -n 's/.*OBJTREE=\([^ ]*\) .*/\1/p' <<<"$line")
rustc=$(sed -n 's/.*OBJTREE=[^ ]* \([^ ]*rustc\) .*/\1/p' <<<"$line")
flags=$(sed 's/^savedcmd_[^ ]* := OBJTREE=[^ ]* [^ ]*rustc //; s/--emit=[^ ]* //g; s/--out-dir [^ ]* //; s/ [^ ]*lib\.rs$//' <<<"$line")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cd "$root"
RUSTC_BOOTSTRAP=1 OBJTREE=$objtree $rustc $flags --emit=obj="$out/proto.o" \
	--emit=metadata="$out/libmetaroce_proto.rmeta" rust/proto/src/lib.rs
# shellcheck disable=SC2001
iflags=$(sed 's/--crate-name metaroce_proto/--crate-name no_panic/' <<<"$flags")
RUSTC_BOOTSTRAP=1 OBJTREE=$objtree $rustc $iflags --emit=obj="$out/inst.o" \
	--extern metaroce_proto="$out/libmetaroce_proto.rmeta" "$here/no_panic.rs"
if nm -u "$out/proto.o" "$out/inst.o" | grep -i panic; then
	echo "FAIL: panic paths above" >&2
	exit 1
fi
echo "ok: no panic paths in the core ($(size -d "$out/inst.o" | awk 'NR==2{print $1}') bytes of instantiated text)"
