#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# DKMS for metaroce.ko: the module is rebuilt for every kernel the host installs
# that has Rust support and the RDMA core (Documentation/metaroce/driver.rst,
# "Deploying on a host").
#
#   scripts/dkms.sh add            copy the sources to /usr/src/metaroce-VERSION and
#                                  register them (`make dkms`); replaces an earlier copy
#   scripts/dkms.sh build KDIR     build the registered module against the kernel tree
#                                  KDIR (dkms build --kernelsourcedir), and print the log
#   scripts/dkms.sh remove         unregister and delete the copy
#   scripts/dkms.sh check KDIR     add, build against KDIR, remove (make check)
#
# METAROCE_KBUILD_VARS overrides the make variables written into dkms.conf (default:
# the test kernel's, scripts/lib.sh).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

NAME=metaroce
SRC=/usr/src/$NAME-$METAROCE_VERSION
command -v dkms >/dev/null || die "dkms is not installed (apt-get install dkms)"

remove() {
	if dkms status -m $NAME -v "$METAROCE_VERSION" 2>/dev/null | grep -q .; then
		dkms remove -m $NAME -v "$METAROCE_VERSION" --all >/dev/null
	fi
	rm -rf "$SRC"
}

case "${1:-}" in
add)
	remove
	mkdir -p "$SRC"
	# What Kbuild reads: the sources of the module's crates and C helpers.
	rsync -rlp --exclude='bindings_generated.rs' --exclude='/rust/sim/' \
		--exclude='/rust/proto/fuzz/' --include='*/' --include='Kbuild' --include='*.rs' \
		--include='*.c' --include='*.h' --exclude='*' --prune-empty-dirs \
		"$REPO_ROOT/Kbuild" "$REPO_ROOT/include" "$REPO_ROOT/drivers" "$REPO_ROOT/rust" "$SRC/"
	for f in dkms.conf dkms-make.sh; do
		sed -e "s|@VERSION@|$METAROCE_VERSION|" \
		    -e "s|@KBUILD_VARS@|${METAROCE_KBUILD_VARS:-${KBUILD_VARS[*]}}|" \
		    "$REPO_ROOT/scripts/$f" > "$SRC/$f"
	done
	chmod +x "$SRC/dkms-make.sh"
	dkms add -m $NAME -v "$METAROCE_VERSION"
	;;
build)
	kdir=${2:?usage: scripts/dkms.sh build KDIR}
	release=$(cat "$kdir/include/config/kernel.release")
	rc=0
	dkms build -m $NAME -v "$METAROCE_VERSION" -k "$release" --kernelsourcedir "$kdir" --force || rc=$?
	# The build directory's log on failure; the kernel's copy after a success.
	for log in "/var/lib/dkms/$NAME/$METAROCE_VERSION/build/make.log" \
		   "/var/lib/dkms/$NAME/$METAROCE_VERSION/$release/$(uname -m)/log/make.log"; do
		[ -f "$log" ] && { echo "== $log"; cat "$log"; }
	done
	exit $rc
	;;
remove) remove;;
check)
	"$0" add >/dev/null
	rc=0
	"$0" build "${2:?usage: scripts/dkms.sh check KDIR}" > "${TMPDIR:-/tmp}/metaroce-dkms.log" 2>&1 || rc=$?
	remove
	if [ $rc != 0 ]; then cat "${TMPDIR:-/tmp}/metaroce-dkms.log" >&2; exit $rc; fi
	grep -E '^  (LD|RUSTC)' "${TMPDIR:-/tmp}/metaroce-dkms.log" | sed 's/^/  dkms: /'
	;;
*) die "usage: scripts/dkms.sh add | build KDIR | remove | check KDIR";;
esac
