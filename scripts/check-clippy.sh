#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# clippy on every crate, warnings are errors:
#   - the userspace crates (the protocol core, the simulator, the fuzz targets) with the
#     rustup toolchain's `cargo clippy`, as `cargo test` builds them;
#   - the kernel crates (the driver, rust/rdma, the core as the kernel compiles it)
#     through the kernel's own `CLIPPY=1` build with the kernel's lint set and
#     .clippy.toml, by Debian's clippy-driver of /usr/bin/rustc's release
#     (rust-web-clippy, installed by setup-host.sh), in a copy of the sources
#     (scripts/build-module.sh --clippy) so the repository's objects stay rustc's.
# A lint that does not fit is allowed where it fires, with a reason.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
export PATH=$TOOLS_DIR/bin:$HOME/.cargo/bin:$PATH

log "cargo clippy: workspace (protocol core, simulator)"
cargo clippy --workspace --all-targets --quiet -- -D warnings
log "cargo clippy: fuzz targets"
(cd rust/proto/fuzz && cargo clippy --all-targets --quiet -- -D warnings)
log "kernel CLIPPY=1 build (driver, rust/rdma, protocol core)"
scripts/build-module.sh --clippy >/dev/null
echo "clippy: userspace and kernel crates clean"
