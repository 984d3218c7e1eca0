#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Check the requirement identifiers of the MetaRoCE specification.
#
#   spec-ids.sh [--list] [--cover DIR...] [SPEC]
#
# A requirement is a paragraph (or list item) that starts with a bracketed
# identifier such as "[MR-SACK-2]". Its class is MUST if its text contains
# MUST (or MUST NOT), otherwise SHOULD if it contains SHOULD. Keywords inside
# ``literals`` do not count. Bare identifiers (MR-SACK-2) elsewhere are
# references.
#
# Fails (exit 1) on: duplicate identifiers, requirements without MUST or
# SHOULD, references to undefined identifiers, requirements missing from the
# "Implementation status" table, and MUST/SHOULD keywords outside any
# requirement (before the Conformance section).
#
# --list        print every identifier with its class and first words
# --cover DIR   also scan DIR (e.g. rust selftests) for "spec: MR-..." test
#               citations and list the MUST requirements no test cites
#               (informational; does not fail)
#
# Prints e.g. "spec: 87 MUST, 23 SHOULD, 110 IDs, 0 duplicates".

set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
spec="$here/spec.rst"
list=0
cover=()

while [ $# -gt 0 ]; do
	case "$1" in
	--list) list=1; shift ;;
	--cover)
		shift
		while [ $# -gt 0 ] && [ "${1#--}" = "$1" ] && [ -d "$1" ]; do
			cover+=("$1"); shift
		done ;;
	-h|--help) sed -n '3,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) spec="$1"; shift ;;
	esac
done

[ -r "$spec" ] || { echo "spec-ids: cannot read $spec" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One record per requirement: "ID<TAB>CLASS<TAB>LINE<TAB>TEXT", plus
# references and stray keywords, from a single awk pass.
awk -v defs="$tmp/defs" -v refs="$tmp/refs" -v stray="$tmp/stray" \
    -v status="$tmp/status" '
function strip(s) {            # drop ``literals``
	gsub(/``[^`]*``/, "", s)
	return s
}
function classify(s,   t) {
	t = strip(s)
	if (t ~ /(^|[^A-Za-z])(MUST|SHALL|REQUIRED)([^A-Za-z]|$)/) return "MUST"
	if (t ~ /(^|[^A-Za-z])(SHOULD|RECOMMENDED)([^A-Za-z]|$)/) return "SHOULD"
	return "NONE"
}
function end_para() {
	if (pid != "") {
		printf "%s\t%s\t%d\t%s\n", pid, classify(ptext), pline, \
			substr(ptext, 1, 70) > defs
	} else if (ptext != "" && !after_conf) {
		c = classify(ptext)
		if (c != "NONE")
			printf "%d\t%s\t%s\n", pline, c, substr(ptext, 1, 70) > stray
	}
	pid = ""; ptext = ""; pline = 0
}
BEGIN { pid = ""; ptext = ""; in_status = 0; after_conf = 0 }
{
	line = $0
	# Section tracking: a title line followed by an underline.
	if (prev != "" && line ~ /^(=+|-+|~+)$/ && length(line) >= length(prev)) {
		if (prev == "Conformance") after_conf = 1
		in_status = (prev == "Implementation status")
	}
	prev = line

	if (in_status && line ~ /^MR-[A-Z]+-[0-9]+ /) {
		split(line, f, /[ \t]+/)
		print f[1] > status
	}

	# References: bare identifiers anywhere, bracketed ones inside text.
	s = line
	while (match(s, /MR-[A-Z]+-[0-9]+/)) {
		print substr(s, RSTART, RLENGTH) "\t" NR > refs
		s = substr(s, RSTART + RLENGTH)
	}

	if (line ~ /^[ \t]*$/) { end_para(); next }
	# A new list item or requirement starts a new paragraph.
	if (line ~ /^[ \t]*([-*]|#\.|[0-9]+\.)[ \t]/)
		end_para()
	if (ptext == "") {
		pline = NR
		if (match(line, /^[ \t]*([-*][ \t]+|#\.[ \t]+|[0-9]+\.[ \t]+)?\[MR-[A-Z]+-[0-9]+\]/)) {
			t = substr(line, RSTART, RLENGTH)
			sub(/^.*\[/, "", t); sub(/\]$/, "", t)
			pid = t
		}
	}
	# Skip literal-block markers and table borders for keyword purposes.
	if (line ~ /^[ \t]*[=]+([ \t]+[=]+)*[ \t]*$/) next
	ptext = ptext " " line
}
END { end_para() }
' "$spec"

touch "$tmp/defs" "$tmp/refs" "$tmp/stray" "$tmp/status"

fail=0
ids=$(cut -f1 "$tmp/defs" | sort -u | wc -l)
must=$(awk -F'\t' '$2 == "MUST"' "$tmp/defs" | wc -l)
should=$(awk -F'\t' '$2 == "SHOULD"' "$tmp/defs" | wc -l)
dups=$(cut -f1 "$tmp/defs" | sort | uniq -d)
ndups=$(printf '%s' "$dups" | grep -c . || true)

if [ "$list" = 1 ]; then
	sort -t- -k2,2 -k3,3n "$tmp/defs" | awk -F'\t' '{ printf "%-12s %-6s %5d  %s\n", $1, $2, $3, $4 }'
fi

if [ -n "$dups" ]; then
	for d in $dups; do
		echo "spec-ids: duplicate $d at lines $(awk -F'\t' -v d="$d" '$1 == d { printf "%s ", $3 }' "$tmp/defs")" >&2
	done
	fail=1
fi

while IFS=$'\t' read -r id cls line _; do
	if [ "$cls" = NONE ]; then
		echo "spec-ids: $id (line $line) has no MUST or SHOULD" >&2
		fail=1
	fi
done < "$tmp/defs"

cut -f1 "$tmp/defs" | sort -u > "$tmp/defined"
cut -f1 "$tmp/refs" | sort -u > "$tmp/referenced"
for r in $(comm -13 "$tmp/defined" "$tmp/referenced"); do
	echo "spec-ids: reference to undefined $r (line $(awk -F'\t' -v r="$r" '$1 == r { print $2; exit }' "$tmp/refs"))" >&2
	fail=1
done

sort -u "$tmp/status" > "$tmp/status.sorted"
for m in $(comm -23 "$tmp/defined" "$tmp/status.sorted"); do
	echo "spec-ids: $m missing from the Implementation status table" >&2
	fail=1
done

while IFS=$'\t' read -r line cls text; do
	echo "spec-ids: line $line: $cls outside a requirement: $text" >&2
	fail=1
done < "$tmp/stray"

if [ ${#cover[@]} -gt 0 ]; then
	grep -rhoE 'spec:[[:space:]]*MR-[A-Z]+-[0-9]+([[:space:]]*,[[:space:]]*MR-[A-Z]+-[0-9]+)*' \
		"${cover[@]}" 2>/dev/null | grep -oE 'MR-[A-Z]+-[0-9]+' | sort -u > "$tmp/cited" || true
	awk -F'\t' '$2 == "MUST" { print $1 }' "$tmp/defs" | sort -u > "$tmp/musts"
	ncited=$(comm -12 "$tmp/musts" "$tmp/cited" | wc -l)
	nmust=$(wc -l < "$tmp/musts")
	echo "cover: $ncited of $nmust MUST requirements cited by tests in ${cover[*]}"
	uncited=$(comm -23 "$tmp/musts" "$tmp/cited" | sort -t- -k2,2 -k3,3n | tr '\n' ' ')
	[ -n "$uncited" ] && echo "cover: not cited: $uncited"
	for u in $(comm -13 "$tmp/defined" "$tmp/cited"); do
		echo "cover: tests cite undefined $u" >&2
	done
fi

echo "spec: $must MUST, $should SHOULD, $ids IDs, $ndups duplicates"
exit $fail
