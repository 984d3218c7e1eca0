#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Checks the Wireshark dissector (compliance/metaroce.lua): captures a real transfer
# on the loopback interface (metaroce-user check against metaroce-user server: every
# verb, then the compliance suite's NAK, RNR, CONTROL and PATH_FLOOR cases), decodes
# it with tshark and the dissector, and compares every field with mrwire.py's
# decoding of the same capture (compliance/dissector_check.py). Needs root (capture)
# and tshark (scripts/setup-host.sh).
#
#   compliance/check-dissector.sh [CAPTURE]   # keep the capture there
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$HOME/.cargo/bin:$PATH
command -v tshark >/dev/null || { echo "check-dissector: no tshark (scripts/setup-host.sh)" >&2; exit 1; }
nice -n 10 cargo build --release --quiet -p metaroce-user
bin=target/release/metaroce-user
tmp=$(mktemp -d /tmp/comply-dissector.XXXXXX)
cap=${1:-$tmp/metaroce.pcap}
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT
tshark -q -n -i lo -f "udp port 4793" -F pcap -w "$cap" >"$tmp/tshark.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do grep -q "Capturing on" "$tmp/tshark.log" && break; sleep 0.1; done
"$bin" server --bind 127.0.0.1 --peer 127.0.0.2 --time 20 >"$tmp/server.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do ss -Huln 'src 127.0.0.1 and sport = :4793' | grep -q . && break; sleep 0.05; done
"$bin" check --bind 127.0.0.2 --peer 127.0.0.1 --size 5000 >/dev/null
kill "${pids[1]}"; wait "${pids[1]}" 2>/dev/null || true
compliance/run.sh --no-table --only 'open_write|sack_gaps|nak_WRITE_with|^t_rnr$|control_open|read_out_of' >/dev/null
sleep 0.5
kill "${pids[0]}"; wait "${pids[0]}" 2>/dev/null || true
pids=()
/usr/bin/python3 compliance/dissector_check.py "$cap"
