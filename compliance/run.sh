#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Runs the compliance suite against the userspace endpoint on this host: builds
# metaroce-user (release), starts `metaroce-user server` on 127.0.0.1 for the
# suite's peer address 127.0.0.2, runs compliance/comply.py, stops the server.
#
#   compliance/run.sh [comply.py options, e.g. --only REGEX, -v, --no-table]
#
# Against another implementation (the kernel driver): run comply.py directly
# with --iut and --bind (compliance/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$HOME/.cargo/bin:$PATH
nice -n 10 cargo build --release --quiet -p metaroce-user
bin=target/release/metaroce-user
log=$(mktemp /tmp/comply-server.XXXXXX)
"$bin" server --bind 127.0.0.1:4793 --peer 127.0.0.2:4793 --paths 4 --mtu 1024 \
	--time 600 >"$log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true; rm -f "$log"' EXIT
# Ready once its socket is bound (a loaded host may take a while to start it).
for _ in $(seq 100); do
	ss -Huln 'src 127.0.0.1 and sport = :4793' | grep -q . && break
	kill -0 "$server" 2>/dev/null || break
	sleep 0.05
done
kill -0 "$server" || { cat "$log" >&2; exit 1; }
/usr/bin/python3 compliance/comply.py --iut 127.0.0.1 --bind 127.0.0.2 "$@"
