#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Every cached path the scripts look things up under must be the same on an empty
# machine (no packages, no stamps, empty cache) as on this one: a key that hashed
# something installed by setup would send a fresh machine's first build to one path
# and its lookups to another (the cold `make demo` failure of issue 31).
#
# Both machines are simulated, whatever this one has: METAROCE_CACHE is a new empty
# directory, and the package tools on PATH answer "not installed" for the empty
# machine and a made-up version for the set-up one. Paths are compared relative to
# the cache.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

empty=$(mktemp -d)
trap 'rm -rf "$empty"' EXIT
mkdir -p "$empty/bin" "$empty/setup" "$empty/cache"
for tool in dpkg-query dpkg apt-cache apt-get rustc cargo clang-22; do
	printf '#!/bin/sh\necho "%s: not installed (simulated empty machine)" >&2\nexit 1\n' \
		"$tool" > "$empty/bin/$tool"
	printf '#!/bin/sh\necho 0.0-simulated\n' > "$empty/setup/$tool"
	chmod +x "$empty/bin/$tool" "$empty/setup/$tool"
done

# The lookups of tools/vm-run, tools/bench, scripts/build-module.sh and make clean.
lookups=(
	"scripts/build-kernel.sh --kdir"
	"scripts/build-kernel.sh --bench --kdir"
	"scripts/build-module.sh --bench --ko"
	"scripts/build-kernel.sh --sanitize --kdir"
	"scripts/build-module.sh --sanitize --ko"
)
fail=0
for cmd in "${lookups[@]}"; do
	cold=$(cd "$REPO_ROOT" && PATH=$empty/bin:$PATH METAROCE_CACHE=$empty/cache $cmd)
	warm=$(cd "$REPO_ROOT" && PATH=$empty/setup:$PATH METAROCE_CACHE=$empty/cache $cmd)
	if [ "$cold" = "$warm" ]; then
		echo "ok: $cmd -> ${warm#"$empty/cache/"}"
	else
		echo "FAIL: $cmd depends on what is installed:" >&2
		echo "  empty machine: ${cold#"$empty/cache/"}" >&2
		echo "  set up:        ${warm#"$empty/cache/"}" >&2
		fail=1
	fi
done
exit $fail
