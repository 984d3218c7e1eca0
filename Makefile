# SPDX-License-Identifier: GPL-2.0
#
#   make            build metaroce.ko (and, once, the test kernel it is built against)
#   make install    build and install metaroce.ko for a host kernel (KDIR; default the
#                   running kernel's build tree) into /lib/modules/<release>/extra
#   make dkms       register the sources with DKMS (rebuilt for every new kernel)
#   make demo       the main job: build, boot the VM, create devices, show them
#   make check      everything: core tests, module build, VM selftests
#   make check-sanitize  the VM selftests on the sanitizer kernel (KASAN, UBSAN, KFENCE;
#                   built once; longer than CI's budget, so not part of make check)
#   make soak       30 minutes of mixed RC, rdma_cm and UD traffic at 1% loss with
#                   reordering on the sanitizer kernel, every checked byte checked
#                   (tools/soak; SOAK_SECONDS, SOAK_KERNEL=test)
#   make fmt        format every Rust file as the kernel does (rustfmt.toml)
#   make sim        the deterministic simulator's results table
#   make sim-cluster   multiplane and fat-tree fabrics at scale: MetaRoCE and RoCEv2 against the ideal
#                      (report and plots in target/sim-cluster/)
#   make bench      metaroce vs rdma_rxe in one VM run (perftest), as ratios, on the
#                   benchmark kernel (no lockdep; built once, like the test kernel)
#   make bench-fabric  metaroce vs rdma_rxe on a routed ECMP fabric in the VM: a
#                   table and plots (tools/bench-fabric)
#   make vm CMD=..  run one command in the test VM (tools/vm-run)
#   make clean
#
# KDIR may point to any Rust-enabled kernel tree; by default it is the cached test
# kernel built by scripts/build-kernel.sh from Debian's linux-source.

SHELL := /bin/bash
export PATH := $(HOME)/.cargo/bin:$(PATH)

CACHE_VARS := $(shell bash -c '. scripts/lib.sh; echo "$${KBUILD_VARS[*]}"')
# Empty: the cached test kernel, built on first use.
KDIR ?=
KDIR_CMD = $(if $(KDIR),echo $(KDIR),scripts/build-kernel.sh)

.PHONY: all modules setup kernel demo check check-sanitize soak test-core test-vm sim sim-cluster bench bench-fabric vm clean install dkms fmt compliance
all: modules

setup:
	@scripts/setup-host.sh

kernel:
	@scripts/build-kernel.sh >/dev/null

# The cached kernel must be the one tools/vm-run will look for (issue 31).
CHECK_KDIR = $(if $(KDIR),true,look=$$(scripts/build-kernel.sh --kdir) && \
	{ [ "$$kdir" = "$$look" ] || { echo "error: kernel built in $$kdir, looked for in $$look" >&2; false; }; })

modules:
	@kdir=$$($(KDIR_CMD)) && $(CHECK_KDIR) && $(MAKE) -C "$$kdir" M=$(CURDIR) $(CACHE_VARS) modules

install:
	@scripts/install-module.sh $(KDIR)

dkms:
	@scripts/dkms.sh add

demo: modules
	@scripts/demo.sh

test-core: setup
	cargo test --workspace --quiet

test-vm: modules
	@selftests/run.sh

check: setup
	@scripts/check.sh

# The packet-level compliance suite against the userspace endpoint on this host,
# then the Wireshark dissector against a capture (compliance/README.md;
# ARGS='--only REGEX -v' and the like go to comply.py).
compliance: setup
	@compliance/run.sh $(ARGS)
	@compliance/check-dissector.sh

check-sanitize: setup
	@selftests/run.sh --sanitize

soak: setup
	@tools/soak

fmt: setup
	@scripts/check-format.sh --fix

sim: setup
	cargo run --release --quiet -p metaroce-sim --bin sim-report

sim-cluster: setup
	mkdir -p target/sim-cluster
	set -o pipefail; cargo run --release --quiet -p metaroce-sim --bin sim-cluster -- $(ARGS) \
		| tee target/sim-cluster/report.md
	/usr/bin/python3 tools/sim-cluster-plots.py target/sim-cluster/report.md target/sim-cluster

bench: setup
	@tools/bench

bench-fabric: setup
	@tools/bench-fabric

vm: modules
	@tools/vm-run '$(CMD)'

clean:
	-kdir=$$(scripts/build-kernel.sh --kdir) && [ -d "$$kdir" ] && \
		$(MAKE) -C "$$kdir" M=$(CURDIR) $(CACHE_VARS) clean
	cargo clean
