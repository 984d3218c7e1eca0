#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# DKMS's make command for metaroce.ko (scripts/dkms.conf): builds the module in
# BUILD_DIR against the kernel tree KDIR with the kernel's toolchain variables
# (@KBUILD_VARS@, filled in by scripts/dkms.sh).
#
#   dkms-make.sh KDIR BUILD_DIR [TARGET] [VAR=VALUE...]
#
# DKMS appends CC=clang and LD=ld.lld for a kernel built with LLVM, which would
# override the versioned tools that LLVM=-NN selects (there may be no plain
# `clang`): those two are dropped, every other assignment is passed on.
set -eu
kdir=$1 build=$2; shift 2
target=modules
extra=
for arg in "$@"; do
	case $arg in
	CC=*|LD=*) ;;
	*=*) extra="$extra $arg";;
	*) target=$arg;;
	esac
done
# shellcheck disable=SC2086 # the variables are words
exec make -C "$kdir" M="$build" @KBUILD_VARS@ $extra "$target"
