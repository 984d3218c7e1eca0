# SPDX-License-Identifier: GPL-2.0
# Shared settings for the host-side scripts. Sourced, not run.
#
# Everything downloaded or built lives in $METAROCE_CACHE, outside the repository,
# so a fresh clone reuses it and `git clean` never throws a kernel build away.

# Not under /var/cache: virtme-ng mounts a tmpfs there in the guest.
METAROCE_CACHE=${METAROCE_CACHE:-/opt/metaroce}
TOOLS_DIR=$METAROCE_CACHE/tools
VENV_DIR=$METAROCE_CACHE/venv
KERNEL_SERIES=7.3
# The module's version (DKMS, modinfo).
METAROCE_VERSION=0.1.0
LLVM_SUFFIX=-22
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Make variables every kernel and M= build needs (see Documentation/metaroce/testing.rst).
KBUILD_VARS=(LLVM=$LLVM_SUFFIX RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc
	     BINDGEN=$TOOLS_DIR/bin/bindgen)
export LIBCLANG_PATH=/usr/lib/llvm${LLVM_SUFFIX}/lib

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# The scripts' flag for the kernel named NAME, `bench`, `sanitize` or `test` (tools/bench,
# tools/ab): --bench, --sanitize or nothing.
kernel_flag() {
	case $1 in
	bench|sanitize) echo "--$1";;
	test) ;;
	*) die "no kernel '$1': bench, sanitize or test";;
	esac
}
