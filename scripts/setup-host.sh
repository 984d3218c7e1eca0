#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Install every host dependency of metaroce by package name. Idempotent: each step
# leaves a stamp in $METAROCE_CACHE and is skipped while its stamp is current. Needs
# root (apt-get); runs unattended (no prompts).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

mkdir -p "$METAROCE_CACHE"
# A step is done when its stamp holds the hash of what it installs: adding a package
# re-runs that step, a fresh clone or an unrelated edit of this script does not.
stamp() { echo "$METAROCE_CACHE/.stamp-$1"; }
key() { echo "$*" | sha256sum | cut -c1-16; }
fresh() { [ "$(cat "$(stamp "$1")" 2>/dev/null)" = "$(key "${@:2}")" ]; }
done_() { key "${@:2}" > "$(stamp "$1")"; }

APT_PKGS=(
	# Rust for the kernel: rustc with rust-src, LLVM matching its own (22); clippy of
	# the same release (scripts/check-clippy.sh: the kernel's CLIPPY=1 build)
	rustc-web rust-web-src libstd-rust-web-dev rustfmt-web rust-web-clippy
	clang-22 lld-22 llvm-22 libclang-22-dev
	# kernel build tools
	make gcc flex bison libelf-dev libssl-dev bc cpio dwarves kmod rsync xz-utils
	python3-venv python3-pip python3-docutils
	# test VM and the userspace it runs (the guest shares the host's root)
	busybox-static
	rdma-core ibverbs-utils ibverbs-providers perftest rdmacm-utils python3-pyverbs
	iproute2 iputils-ping ethtool procps psmisc
	# the fabric benchmark (tools/bench-fabric): a competing UDP flow, the plots
	iperf3 python3-matplotlib
	# host install (make install, make dkms) and the tracepoints' reader
	dkms trace-cmd
)

APT_KEY="${APT_PKGS[*]} qemu-system-x86/bookworm-backports linux-source-$KERNEL_SERIES/trixie-backports"
if ! fresh apt "$APT_KEY"; then
	export DEBIAN_FRONTEND=noninteractive
	# The kernel source comes from trixie-backports, pinned low so nothing else
	# on the host is upgraded from it.
	# QEMU comes from bookworm-backports: the machine image already carries
	# qemu-utils 10 from there, which Breaks bookworm's qemu-system 7.2.
	for suite in trixie-backports bookworm-backports; do
		[ -f /etc/apt/sources.list.d/metaroce-$suite.sources ] && continue
		log "adding $suite (pinned at priority 100)"
		cat > /etc/apt/sources.list.d/metaroce-$suite.sources <<SRC
Types: deb
URIs: http://deb.debian.org/debian
Suites: $suite
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
		cat > /etc/apt/preferences.d/metaroce-$suite <<PIN
Package: *
Pin: release n=$suite
Pin-Priority: 100
PIN
	done
	log "apt-get update"
	apt-get update -qq
	log "apt-get install (${#APT_PKGS[@]} packages)"
	apt-get install -y -qq --no-install-recommends "${APT_PKGS[@]}" >/dev/null
	apt-get install -y -qq --no-install-recommends -t bookworm-backports qemu-system-x86 >/dev/null
	apt-get install -y -qq --no-install-recommends "linux-source-$KERNEL_SERIES/trixie-backports" >/dev/null
	done_ apt "$APT_KEY"
fi

# tshark for the compliance suite's Wireshark dissector check (compliance/dissector):
# its own step, so that adding it does not re-run the one above on every machine.
if ! fresh tshark tshark || ! command -v tshark >/dev/null; then
	log "apt-get install tshark"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends tshark >/dev/null
	done_ tshark tshark
fi

if ! fresh bindgen bindgen-cli || [ ! -x "$TOOLS_DIR/bin/bindgen" ]; then
	log "cargo install bindgen-cli"
	# The rustup cargo on PATH builds the host tool; the kernel itself uses /usr/bin/rustc.
	cargo install --quiet bindgen-cli --locked --root "$TOOLS_DIR"
	done_ bindgen bindgen-cli
fi

# clippy for the userspace crates (scripts/check-clippy.sh), in the rustup toolchain
# that builds them; the kernel crates use Debian's rust-web-clippy (above).
if command -v rustup >/dev/null && ! cargo clippy --version >/dev/null 2>&1; then
	log "rustup component add clippy"
	rustup component add clippy
fi

if ! fresh cargo-fuzz cargo-fuzz || [ ! -x "$TOOLS_DIR/bin/cargo-fuzz" ]; then
	log "cargo install cargo-fuzz"
	cargo install --quiet cargo-fuzz --locked --root "$TOOLS_DIR"
	done_ cargo-fuzz cargo-fuzz
fi

if ! fresh venv virtme-ng || [ ! -x "$VENV_DIR/bin/vng" ]; then
	log "virtme-ng in $VENV_DIR"
	/usr/bin/python3 -m venv "$VENV_DIR"
	"$VENV_DIR/bin/pip" install --quiet --disable-pip-version-check virtme-ng
	done_ venv virtme-ng
fi
[ -n "${VERBOSE:-}" ] && log "host setup complete"
exit 0
