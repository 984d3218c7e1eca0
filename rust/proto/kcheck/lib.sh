# SPDX-License-Identifier: GPL-2.0-only OR MIT
#
# Shared by the kcheck scripts (sourced): compile the protocol core, and a file that
# instantiates it, with the exact rustc flags of the last kernel module build.
# Needs a prior module build (for rust/proto/.metaroce_proto.o.cmd).

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
cmd="$root/rust/proto/.metaroce_proto.o.cmd"
[ -f "$cmd" ] || { echo "no $cmd: build the module first" >&2; exit 4; }
line=$(sed -n 1p "$cmd")
objtree=$(sed -n 's/.*OBJTREE=\([^ ]*\) .*/\1/p' <<<"$line")
rustc=$(sed -n 's/.*OBJTREE=[^ ]* \([^ ]*rustc\) .*/\1/p' <<<"$line")
flags=$(sed 's/^savedcmd_[^ ]* := OBJTREE=[^ ]* [^ ]*rustc //; s/--emit=[^ ]* //g; s/--out-dir [^ ]* //; s/ [^ ]*lib\.rs$//' <<<"$line")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# kernel_compile CRATE FILE: builds $out/proto.o (the core) and $out/inst.o (FILE,
# compiled as crate CRATE against the core).
kernel_compile() {
	local crate=$1 file=$2 iflags
	(cd "$root" && RUSTC_BOOTSTRAP=1 OBJTREE=$objtree $rustc $flags --emit=obj="$out/proto.o" \
		--emit=metadata="$out/libmetaroce_proto.rmeta" rust/proto/src/lib.rs)
	# shellcheck disable=SC2001
	iflags=$(sed "s/--crate-name metaroce_proto/--crate-name $crate/" <<<"$flags")
	(cd "$root" && RUSTC_BOOTSTRAP=1 OBJTREE=$objtree $rustc $iflags --emit=obj="$out/inst.o" \
		--extern metaroce_proto="$out/libmetaroce_proto.rmeta" "$file")
}
