#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""No import cycles between the files of a Rust crate (issue 33, issue 40).

    scripts/check-imports.py DIR

Reads the `use crate::...` trees and `crate::x::` paths of every .rs file under DIR
(a file or directory `x` is module `x`), and fails when modules import each other in a
cycle, printing each cycle's files.
"""
import argparse
import pathlib
import re
import sys


def top_names(tree):
    """The first path segment of each item of a `use crate::` tree."""
    tree = tree.strip().rstrip(";").strip()
    if not tree.startswith("{"):
        return {tree.split("::")[0]}
    names, depth, cur = [], 0, ""
    for ch in tree[1:]:
        if ch == "{":
            depth += 1
        elif ch == "}":
            if depth == 0:
                break
            depth -= 1
        elif ch == "," and depth == 0:
            names.append(cur)
            cur = ""
            continue
        if depth == 0:
            cur += ch
    names.append(cur)
    return {n.strip().split("::")[0] for n in names if n.strip()}


def imports(root):
    graph = {}
    for path in sorted(root.rglob("*.rs")):
        module = path.relative_to(root).parts[0].removesuffix(".rs")
        text = "".join(l for l in path.read_text().splitlines(True)
                       if not l.lstrip().startswith("//"))
        deps = set()
        for tree in re.findall(r"use crate::(\{.*?\};|[^;]*;)", text, re.S):
            deps |= top_names(tree)
        deps |= set(re.findall(r"(?<![\w:])crate::([a-z_0-9]+)::", text))
        graph.setdefault(module, set()).update(deps - {module, "self", "bindings"})
    return graph


def cycles(graph):
    def reach(a):
        seen, todo = set(), [a]
        while todo:
            for b in graph.get(todo.pop(), ()):
                if b not in seen:
                    seen.add(b)
                    todo.append(b)
        return seen
    reached = {a: reach(a) for a in graph}
    groups = {frozenset([a] + [b for b in reached[a] if a in reached.get(b, ())]) for a in graph}
    return sorted((sorted(g) for g in groups if len(g) > 1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", type=pathlib.Path)
    args = ap.parse_args()
    bad = cycles(imports(args.dir))
    for c in bad:
        print(f"{args.dir}: import cycle among {', '.join(c)}")
    if bad:
        print(f"{args.dir}: files that import each other cannot be read, tested or split "
              "alone: move what both need to a file below them", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
