#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR MIT
#
# Kernel stacks are 16 KiB: fails if any function of the protocol core has a
# stack frame above LIMIT bytes (default 1024). Checks the core object of the
# last module build (rust/proto/metaroce_proto.o) and, compiled with the exact
# rustc flags of that build, an instantiation of the generic core (every public
# entry point of Connection<Aimd> plus running Connection::init into a slot, see
# stack_frames.rs), which is where the generic methods get their code.
# Needs a prior module build (for rust/proto/.metaroce_proto.o.cmd).
#
#   stack-frames.sh [-v]    -v: list every frame of 256 bytes or more
set -euo pipefail
LIMIT=${LIMIT:-1024}
verbose=0
[ "${1:-}" = -v ] && verbose=1
. "$(dirname "$0")/lib.sh"
objdump=${OBJDUMP:-$(command -v llvm-objdump-22 || command -v llvm-objdump)}
kernel_compile stack_frames "$here/stack_frames.rs"
cd "$root"
# Frame = the immediate of `sub $N, %rsp` in the prologue (plus pushes, which
# are at most 8 words and ignored here).
frames() {
	"$objdump" -d --demangle --no-show-raw-insn "$1" | awk -v obj="$(basename "$1")" '
		function hex(s,   i, n) {
			n = 0
			for (i = 1; i <= length(s); i++)
				n = n * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
			return n
		}
		/^[0-9a-f]+ <.*>:$/ { fn = $0; sub(/^[0-9a-f]+ </, "", fn); sub(/>:$/, "", fn); next }
		/sub[lq]?[ \t]+\$0x[0-9a-f]+, %rsp/ {
			if (match($0, /\$0x[0-9a-f]+/)) {
				n = hex(substr($0, RSTART + 3, RLENGTH - 3))
				if (n > max[fn]) max[fn] = n
			}
		}
		END { for (f in max) printf "%d\t%s\t%s\n", max[f], obj, f }'
}
{ frames "$out/proto.o"; frames "$out/inst.o"; } | sort -rn >"$out/frames"
if [ "$verbose" = 1 ]; then
	awk -F'\t' '$1 >= 256' "$out/frames"
fi
bad=$(awk -F'\t' -v l="$LIMIT" '$1 > l' "$out/frames")
if [ -n "$bad" ]; then
	echo "FAIL: stack frames above $LIMIT bytes:" >&2
	echo "$bad" >&2
	exit 1
fi
echo "ok: no stack frame above $LIMIT bytes (largest: $(head -1 "$out/frames" | cut -f1,3))"
