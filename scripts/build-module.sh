#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Build metaroce.ko from this working tree and print its path.
#
#   scripts/build-module.sh            for the test kernel, in the repository (make)
#   scripts/build-module.sh --bench    for the benchmark kernel, in
#                                      target/bench-kmod/<kernel>/ (a copy of the
#                                      sources: one tree cannot hold objects for two
#                                      kernels; per checkout, so two worktrees never
#                                      load each other's module)
#   scripts/build-module.sh --sanitize for the sanitizer kernel, likewise in
#                                      target/sanitize-kmod/<kernel>/
#   scripts/build-module.sh --clippy   for the test kernel, with the kernel's clippy
#                                      (CLIPPY=1: Debian's clippy-driver of the same
#                                      release as /usr/bin/rustc), in target/clippy-kmod/
#                                      (a copy: the repository's objects stay rustc's)
#   ... --ko                           print where the module is, build nothing
set -euo pipefail
. "$(dirname "$0")/lib.sh"

FLAVOUR=() EXTRA=()
case ${1:-} in
--bench|--sanitize) FLAVOUR=("$1"); shift
	OUT=$REPO_ROOT/target/${FLAVOUR#--}-kmod/$(basename "$("$REPO_ROOT/scripts/build-kernel.sh" "${FLAVOUR[@]}" --kdir)");;
--clippy) shift
	OUT=$REPO_ROOT/target/clippy-kmod
	EXTRA=(CLIPPY=1 CLIPPY_DRIVER=/usr/bin/clippy-driver);;
*) OUT=$REPO_ROOT;;
esac
if [ "${1:-}" = --ko ]; then echo "$OUT/metaroce.ko"; exit 0; fi

KDIR=$("$REPO_ROOT/scripts/build-kernel.sh" "${FLAVOUR[@]}")
export PATH=$HOME/.cargo/bin:$PATH
if [ "$OUT" != "$REPO_ROOT" ]; then
	# The sources Kbuild reads. Files are compared by content and a changed one gets
	# the time of the copy: an unchanged file is not rebuilt, and a tree older than the
	# objects (another checkout built here last) still rebuilds what differs.
	mkdir -p "$OUT"
	# Generated files stay the ones built for this kernel.
	rsync -rlp --checksum --delete-after --exclude='bindings_generated.rs' --exclude='/rust/sim/' \
		--exclude='/rust/proto/fuzz/' --include='*/' --include='Kbuild' --include='*.rs' \
		--include='*.c' --include='*.h' --exclude='*' --prune-empty-dirs \
		"$REPO_ROOT/Kbuild" "$REPO_ROOT/include" "$REPO_ROOT/drivers" "$REPO_ROOT/rust" "$OUT/"
fi
make -s -C "$KDIR" M="$OUT" "${KBUILD_VARS[@]}" "${EXTRA[@]}" modules >&2
echo "$OUT/metaroce.ko"
