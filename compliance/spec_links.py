#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Writes, under each row of the spec's "Implementation status" table, the
tests that check the statement:

- ``tests:`` the Rust tests (the core's unit and integration tests, the
  simulator's) that cite it with a ``// spec: MR-...`` comment above them;
- ``comply:`` the compliance tests (compliance/comply.py) that checked it in a
  run, from that run's --json file (without one, the old lines are kept).

  compliance/run.sh --no-table --json /tmp/comply.json
  compliance/spec_links.py /tmp/comply.json   # rewrites Documentation/metaroce/spec.rst
  compliance/spec_links.py --check            # exit 1 if the tests: lines are stale

Old lines are replaced; nothing else in the table changes.
"""

import json
import os
import re
import sys

INDENT = " " * 24
WIDTH = 111
REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SPEC = os.path.join(REPO, "Documentation/metaroce/spec.rst")
# Where the Rust tests are, and how the table names their files (paths in the
# core are relative to rust/proto/src, as in the rest of the table).
RUST = [("rust/proto/src", ""), ("rust/proto/tests", "proto tests/"),
        ("rust/sim/tests", "sim tests/"), ("rust/sim/src", "sim "),
        ("rust/user/src", "user "), ("rust/user/tests", "user tests/")]
MAX_TESTS = 4


def names(tests):
    """Compliance test names without the t_ prefix; the NAK cases as one group."""
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


def rust_citations():
    """ID -> [(file, fn), ...]: each `// spec:` comment names the next fn."""
    cites = {}
    for top, label in RUST:
        root = os.path.join(REPO, top)
        for d, _, files in sorted(os.walk(root)):
            for f in sorted(files):
                if not f.endswith(".rs"):
                    continue
                path = os.path.join(d, f)
                name = label + os.path.relpath(path, root)
                lines = open(path).read().split("\n")
                for i, line in enumerate(lines):
                    m = re.match(r"\s*//\s*spec:\s*(.*)", line)
                    if not m:
                        continue
                    ids = re.findall(r"MR-[A-Z]+-\d+", m.group(1))
                    for nxt in lines[i + 1:i + 20]:
                        fn = re.match(r"\s*(?:pub(?:\(crate\))? )?(?:async )?fn (\w+)", nxt)
                        if fn:
                            for mid in ids:
                                cites.setdefault(mid, []).append((name, fn.group(1)))
                            break
    return cites


def wrap(label, pieces):
    """`label: a, b, ...` as table continuation lines of at most WIDTH."""
    out, cur = [], []
    for n in pieces:
        if cur and len(INDENT + label + ": " + ", ".join(cur + [n])) > WIDTH:
            out.append(INDENT + label + ": " + ", ".join(cur))
            cur = []
        cur.append(n)
    if cur:
        out.append(INDENT + label + ": " + ", ".join(cur))
    return out


def test_lines(tests):
    """Grouped by file: `conn/tests.rs a, b`; at most MAX_TESTS names."""
    by_file = {}
    for f, fn in tests[:MAX_TESTS]:
        by_file.setdefault(f, []).append(fn)
    pieces = [f"{f} {', '.join(fns)}" for f, fns in by_file.items()]
    if len(tests) > MAX_TESTS:
        pieces.append(f"{len(tests) - MAX_TESTS} more")
    return wrap("tests", pieces)


def rewrite(lines, cites, comply):
    out, in_table, current, kept = [], False, None, []

    def end_row():
        out.extend(test_lines(cites.get(current, [])) if cites.get(current) else [])
        if comply is None:
            out.extend(kept)
        else:
            tests = names({t for _, t, _ in comply.get(current, [])})
            if tests:
                out.extend(wrap("comply", tests))

    for line in lines:
        if line == "Implementation status":
            in_table = True
        if in_table and line.startswith("Known deviations"):
            in_table = False
        if in_table and current and line.startswith(INDENT + "tests: "):
            continue
        if in_table and current and line.startswith(INDENT + "comply: "):
            kept.append(line)
            continue
        if in_table and current and not line.startswith(INDENT):
            end_row()
            current, kept = None, []
        m = re.match(r"(MR-[A-Z]+-\d+) ", line) if in_table else None
        if m:
            current = m.group(1)
        out.append(line)
    return out


def main():
    args = sys.argv[1:]
    check = "--check" in args
    args = [a for a in args if a != "--check"]
    comply = json.load(open(args[0])) if args else None
    lines = open(SPEC).read().split("\n")
    out = rewrite(lines, rust_citations(), comply)
    if check:
        if out != lines:
            print("spec_links: the tests: lines of the status table are stale: "
                  "run compliance/spec_links.py", file=sys.stderr)
            return 1
        return 0
    open(SPEC, "w").write("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
