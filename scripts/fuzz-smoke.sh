#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Runs every fuzz target of the protocol core for a short while, starting from the
# committed seed corpora, and fails on any crash. New inputs go to a scratch
# directory, so the tree stays clean.
#   scripts/fuzz-smoke.sh [SECONDS_PER_TARGET]   (default 20)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
SECONDS_PER_TARGET=${1:-20}
export PATH=$TOOLS_DIR/bin:$HOME/.cargo/bin:$PATH
# cargo-fuzz needs nightly flags (-Zsanitizer); the stable toolchain accepts them
# with RUSTC_BOOTSTRAP.
export RUSTC_BOOTSTRAP=1
cd "$REPO_ROOT/rust/proto/fuzz"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for target in $(cargo fuzz list); do
	mkdir -p "$scratch/$target"
	log "fuzz $target for ${SECONDS_PER_TARGET}s"
	if ! cargo fuzz run "$target" "$scratch/$target" "corpus/$target" -- \
		-max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=4096 -print_final_stats=1 \
		-artifact_prefix="$scratch/" > "$scratch/$target.log" 2>&1; then
		tail -30 "$scratch/$target.log" >&2
		die "fuzz target $target failed"
	fi
	grep -E '^stat::(number_of_executed_units|new_units_added)' "$scratch/$target.log" | sed "s/^/  $target: /"
	if ls "$scratch"/crash-* "$scratch"/leak-* "$scratch"/timeout-* >/dev/null 2>&1; then
		die "fuzz target $target failed: $(ls "$scratch"/crash-* "$scratch"/leak-* "$scratch"/timeout-* 2>/dev/null)"
	fi
done
