#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Every Rust file of the repository formatted with rustfmt and the kernel's settings
# (rustfmt.toml): the driver, rust/rdma, the protocol core, the simulator and the fuzz
# targets. `--fix` formats them instead (`make fmt`).
#
# Debian's rustfmt-web (installed by setup-host.sh, the same release as the rustc-web
# that builds the kernel), by absolute path: a rustup rustfmt earlier on PATH may
# format differently.
set -euo pipefail
cd "$(dirname "$0")/.."
RUSTFMT=${RUSTFMT:-/usr/bin/rustfmt}
mode=(--check)
[ "${1:-}" = --fix ] && mode=()
mapfile -t files < <(git ls-files '*.rs')
if "$RUSTFMT" "${mode[@]}" --config-path rustfmt.toml "${files[@]}"; then
	echo "format: ${#files[@]} files, rustfmt ${mode[*]:-(applied)} ok"
else
	echo "format: run 'make fmt' (scripts/check-format.sh --fix)" >&2
	exit 1
fi
