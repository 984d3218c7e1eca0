#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Parse every reStructuredText file of Documentation/metaroce with docutils and fail
# on any warning or error (a malformed table, a broken list), as the kernel's
# `make htmldocs` would. Sphinx's cross-reference roles (:doc:, :ref:) are accepted
# as plain text: docutils alone does not know them.
set -euo pipefail
cd "$(dirname "$0")/.."
exec /usr/bin/python3 - Documentation/metaroce/*.rst <<'PY'
import io
import re
import sys
import docutils.core
from docutils.parsers.rst import Directive, directives, nodes, roles

def plain(name, rawtext, text, lineno, inliner, options={}, content=[]):
    return [nodes.literal(rawtext, text)], []

class Ignored(Directive):
    has_content = True
    option_spec = {"maxdepth": directives.unchanged}

    def run(self):
        return []

for role in ("doc", "ref"):
    roles.register_local_role(role, plain)
directives.register_directive("toctree", Ignored)

failed = 0
for path in sys.argv[1:]:
    with open(path, encoding="utf-8") as f:
        src = f.read()
    report = io.StringIO()
    docutils.core.publish_doctree(
        src, source_path=path,
        settings_overrides={"report_level": 2, "halt_level": 5, "warning_stream": report})
    problems = [l for l in report.getvalue().splitlines() if re.match(r"\S+:\d+: \(", l)]
    for line in problems:
        print(line, file=sys.stderr)
    failed += bool(problems)
print(f"docs: {len(sys.argv) - 1} files, {failed} with errors")
sys.exit(1 if failed else 0)
PY
