#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Build (once) the test kernel from Debian's linux-source with selftests/config merged
# in, into $METAROCE_CACHE/kernel/<key>, where <key> hashes what the repository pins:
# the kernel series, the recipe and the config inputs. It never depends on what the
# machine has installed, so the path is the same before and after setup-host.sh (a
# fresh machine builds the kernel under the key it later looks for;
# scripts/check-cache-keys.sh tests this). The tree records the source package version
# it was built from, and a changed package rebuilds it in place. A warm run only prints
# the tree's path.
#
#   scripts/build-kernel.sh [FLAVOUR]          build if missing, print KDIR
#   scripts/build-kernel.sh [FLAVOUR] --kdir   print KDIR without building (may not exist yet)
#
# --bench: the benchmark kernel (tools/bench, tools/ab), the same kernel without the
# lock and memory debugging that scripts/kernel/bench.config names. Lockdep makes
# every lock taken cost many times what it costs in a production kernel; the
# selftests keep it to catch bugs, measurements leave it out.
# --sanitize: the sanitizer kernel (selftests/run.sh --sanitize), the test kernel plus
# KASAN, UBSAN, KFENCE and the rest of scripts/kernel/sanitize.config.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

FLAVOUR=test
case ${1:-} in
--bench) FLAVOUR=bench; shift;;
--sanitize) FLAVOUR=sanitize; shift;;
esac
TRIM=$REPO_ROOT/scripts/kernel/trim.config
# The fragment: selftests/config, for the bench kernel without the options it names.
FRAGMENT=$(mktemp)
trap 'rm -f "$FRAGMENT"' EXIT
if [ $FLAVOUR = bench ]; then
	drop=$(grep -v '^#' "$REPO_ROOT/scripts/kernel/bench.config" | tr -s ' \n' '|' | sed 's/^|//; s/|$//')
	grep -Ev "^CONFIG_($drop)=" "$REPO_ROOT/selftests/config" > "$FRAGMENT"
	# Its own release string: a module built for the other kernel does not load.
	echo 'CONFIG_LOCALVERSION="-bench"' >> "$FRAGMENT"
elif [ $FLAVOUR = sanitize ]; then
	cat "$REPO_ROOT/selftests/config" "$REPO_ROOT/scripts/kernel/sanitize.config" > "$FRAGMENT"
else
	cp "$REPO_ROOT/selftests/config" "$FRAGMENT"
fi
# Bump when the way the config is produced changes.
RECIPE=2

src_version() {
	dpkg-query -W -f='${Version}' "linux-source-$KERNEL_SERIES" 2>/dev/null || echo none
}
kernel_key() {
	{ echo "linux-source-$KERNEL_SERIES recipe $RECIPE"; cat "$FRAGMENT" "$TRIM"; } |
		sha256sum | cut -c1-16
}
if [ $FLAVOUR = test ]; then
	KDIR=$METAROCE_CACHE/kernel/$KERNEL_SERIES-$(kernel_key)
else
	KDIR=$METAROCE_CACHE/kernel/$KERNEL_SERIES-$FLAVOUR-$(kernel_key)
fi
if [ "${1:-}" = --kdir ]; then echo "$KDIR"; exit 0; fi

"$REPO_ROOT/scripts/setup-host.sh"
ver=$(src_version)
[ "$ver" != none ] || die "linux-source-$KERNEL_SERIES is not installed after setup"
# One build per tree: a second caller (another checkout, CI) waits for the first.
mkdir -p "$METAROCE_CACHE/kernel"
exec 8>"$KDIR.lock"
if ! flock -n 8; then
	log "another build of $KDIR is running: waiting for it"
	flock 8
fi
if [ -f "$KDIR/.metaroce-complete" ]; then
	built=$(cat "$KDIR/.metaroce-source" 2>/dev/null || echo unknown)
	if [ "$built" = "$ver" ]; then echo "$KDIR"; exit 0; fi
	log "linux-source-$KERNEL_SERIES changed ($built -> $ver): rebuilding $KDIR"
	rm -rf "$KDIR"
fi
export PATH=$VENV_DIR/bin:$PATH

SRC=$METAROCE_CACHE/src/linux-source-$KERNEL_SERIES-$ver
if [ ! -f "$SRC/.unpacked" ]; then
	log "unpacking linux-source-$KERNEL_SERIES $ver"
	rm -rf "$SRC"; mkdir -p "$SRC"
	tar -xaf /usr/src/linux-source-$KERNEL_SERIES.tar.* -C "$SRC" --strip-components=1
	touch "$SRC/.unpacked"
fi

start=$(date +%s)
mkdir -p "$KDIR"
cd "$SRC"
log "configuring the $FLAVOUR kernel in $KDIR"
# x86_64_defconfig + virtme-ng's guest options + our fragment, then trims.
virtme-configkernel --defconfig --custom "$FRAGMENT" O="$KDIR" "${KBUILD_VARS[@]}" >/dev/null 2>&1
cfg=(scripts/config --file "$KDIR/.config")
for opt in $(grep -v '^#' "$TRIM"); do "${cfg[@]}" --disable "$opt"; done
"${cfg[@]}" --enable DEBUG_INFO_NONE --disable DEBUG_INFO_DWARF_TOOLCHAIN_DEFAULT \
	--disable DEBUG_INFO_BTF --disable MODVERSIONS --disable WERROR
# The fragment wins over the trims; olddefconfig resolves the rest.
while read -r line; do
	case "$line" in CONFIG_*=*) ;; *) continue;; esac
	name=${line%%=*}; val=${line#*=}
	case "$val" in
		y) "${cfg[@]}" --enable "${name#CONFIG_}";;
		m) "${cfg[@]}" --module "${name#CONFIG_}";;
		n) "${cfg[@]}" --disable "${name#CONFIG_}";;
		*) "${cfg[@]}" --set-val "${name#CONFIG_}" "$val";;
	esac
done < "$FRAGMENT"
make -s O="$KDIR" "${KBUILD_VARS[@]}" olddefconfig

missing=0
while read -r line; do
	case "$line" in CONFIG_*=*) ;; *) continue;; esac
	grep -qx "$line" "$KDIR/.config" || { echo "config: $line did not survive olddefconfig" >&2; missing=1; }
done < "$FRAGMENT"
[ $missing = 0 ] || die "kernel config is missing options the tests need"
make -s O="$KDIR" "${KBUILD_VARS[@]}" rustavailable >/dev/null || die "Rust is not available for this kernel build"

log "building kernel (cold build: expect 15-30 min on 2 cores)"
make -s O="$KDIR" "${KBUILD_VARS[@]}" -j"$(nproc)" bzImage modules
end=$(date +%s)
echo "$((end - start))" > "$KDIR/.metaroce-build-seconds"
echo "$ver" > "$KDIR/.metaroce-source"
touch "$KDIR/.metaroce-complete"
log "kernel built in $((end - start)) s: $KDIR"
echo "$KDIR"
