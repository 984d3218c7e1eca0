#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Writes, under each MUST row of the spec's "Implementation status" table, a
``comply:`` line naming the compliance tests (compliance/comply.py) that check
it, from a run's --json file:

  compliance/run.sh --no-table --json /tmp/comply.json
  compliance/spec_links.py /tmp/comply.json   # rewrites Documentation/metaroce/spec.rst

Old ``comply:`` lines are replaced; nothing else in the table changes.
"""

import json
import os
import re
import sys

INDENT = " " * 24


def names(tests):
    """Test names without the t_ prefix; the NAK cases as one group."""
    if len(tests) >= 15:
        return ["every test (each packet the IUT sends)"]
    out, naks = [], 0
    for t in sorted(tests):
        if t.startswith("t_nak_") and t != "t_nak_to_iut":
            naks += 1
        else:
            out.append(t[2:])
    if naks:
        out.append(f"nak_* ({naks} cases)" if naks > 1 else "nak_*")
    return out


def main():
    rows = json.load(open(sys.argv[1]))
    spec = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                        "Documentation/metaroce/spec.rst")
    lines = open(spec).read().split("\n")
    out, in_table, current = [], False, None
    for line in lines:
        if line == "Implementation status":
            in_table = True
        if in_table and line.startswith("Known deviations"):
            in_table = False
        if in_table and line.startswith(INDENT + "comply: "):
            continue
        if in_table and current and not line.startswith(INDENT):
            tests = names({t for _, t, _ in rows.get(current, [])})
            if tests:
                text, cur = "comply: ", []
                for n in tests:
                    piece = n + ", "
                    if len(INDENT + text + "".join(cur) + piece) > 111 and cur:
                        out.append(INDENT + text + "".join(cur).rstrip())
                        text, cur = "comply: ", []
                    cur.append(piece)
                out.append(INDENT + text + "".join(cur).rstrip(", "))
            current = None
        m = re.match(r"(MR-[A-Z]+-\d+) ", line) if in_table else None
        if m:
            current = m.group(1)
        out.append(line)
    open(spec, "w").write("\n".join(out))


if __name__ == "__main__":
    main()
