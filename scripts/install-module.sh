#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `make install`: build metaroce.ko for a kernel and install it into that kernel's
# module tree, /lib/modules/<release>/extra, then run depmod, so that
# `rdma link add NAME type metaroce netdev DEV` loads it by its alias
# (rdma-link-metaroce). See Documentation/metaroce/driver.rst, "Deploying on a host".
#
#   scripts/install-module.sh [--no-build] [KDIR]
#     KDIR        the kernel build tree (default: the running kernel's,
#                 /lib/modules/$(uname -r)/build); it needs CONFIG_RUST and the Rust
#                 metadata of a full build (distribution headers packages lack it)
#     --no-build  install the module built last (make KDIR=...), build nothing
#
# It also installs contrib/systemd/metaroce@.service, the unit that creates a device at
# boot, into SYSTEMD_UNIT_DIR (default /etc/systemd/system, when that directory exists).
#
# Environment: INSTALL_MOD_PATH (a staging root, as for the kernel's
# modules_install), SYSTEMD_UNIT_DIR, METAROCE_KBUILD_VARS (make variables of the kernel build; default the
# test kernel's, see scripts/lib.sh).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

BUILD=1
if [ "${1:-}" = --no-build ]; then BUILD=0; shift; fi
KDIR=${1:-/lib/modules/$(uname -r)/build}
[ -f "$KDIR/Makefile" ] || die "no kernel build tree at $KDIR: pass one (make install KDIR=...)"
grep -qx 'CONFIG_RUST=y' "$KDIR/.config" 2>/dev/null ||
	die "$KDIR is not a Rust-enabled kernel build (CONFIG_RUST=y missing from its .config)"
release=$(cat "$KDIR/include/config/kernel.release")
read -r -a vars <<< "${METAROCE_KBUILD_VARS:-${KBUILD_VARS[*]}}"
cd "$REPO_ROOT"
export PATH=$HOME/.cargo/bin:$PATH
if [ $BUILD = 1 ]; then
	make -s -C "$KDIR" M="$REPO_ROOT" "${vars[@]}" modules
fi
[ -f metaroce.ko ] || die "no metaroce.ko: build it first (make KDIR=$KDIR)"
built_for=$(modinfo -F vermagic metaroce.ko | cut -d' ' -f1)
[ "$built_for" = "$release" ] ||
	die "metaroce.ko was built for $built_for, not $release: build it again for this kernel"
make -s -C "$KDIR" M="$REPO_ROOT" "${vars[@]}" INSTALL_MOD_DIR=extra modules_install
depmod ${INSTALL_MOD_PATH:+-b "$INSTALL_MOD_PATH"} "$release"
log "installed ${INSTALL_MOD_PATH:-}/lib/modules/$release/extra/metaroce.ko (alias: $(modinfo -F alias metaroce.ko))"
unit_dir=${SYSTEMD_UNIT_DIR:-${INSTALL_MOD_PATH:-}/etc/systemd/system}
if [ -d "$unit_dir" ]; then
	install -m 0644 contrib/systemd/metaroce@.service "$unit_dir/"
	log "installed $unit_dir/metaroce@.service (systemctl enable --now metaroce@NETDEV)"
fi
