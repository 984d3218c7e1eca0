#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Plots of `make sim-cluster`'s tables (issue 38), with matplotlib.

    tools/sim-cluster-plots.py REPORT.md OUTDIR

Reads the Markdown that `sim-cluster` prints and writes into OUTDIR:
  planes.png  goodput per host against the number of planes (permutation), MetaRoCE
              and RoCEv2 GBN+DCQCN, with the ideal (every plane full);
  scale.png   the same for the all-to-all at 4,032 connections, against linear;
  loss.png    share of the clean run kept against random loss, MetaRoCE with and
              without probe timeouts and RoCEv2;
  incast.png  drops at the receiver's port against the fan-in, hints on and off;
  queues.png  the backlog 99% and 99.9% of the datagrams found, per run and transport.
A table missing from the report is skipped with a note. Run with /usr/bin/python3
(Debian's python3-matplotlib, installed by scripts/setup-host.sh).
"""

import pathlib
import re
import sys


def tables(text):
    """{section heading: [row cells]} for every Markdown table under a `## ` heading."""
    out, section = {}, None
    for line in text.splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
            out.setdefault(section, [])
        elif section and line.startswith("|") and not line.startswith("|---"):
            out[section].append([c.strip() for c in line.strip("|").split("|")])
    return out


def section(tabs, prefix):
    """The rows (header dropped) of the first section whose heading starts with `prefix`."""
    for name, rows in tabs.items():
        if name.startswith(prefix) and len(rows) > 1:
            return rows[0], rows[1:]
    return None, []


def percent(cell):
    """The first percentage of a cell (`62% (1082 us, ...)` -> 62.0), or None."""
    m = re.match(r"\s*([0-9.]+)%", cell)
    return float(m.group(1)) if m else None


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    tabs = tables(pathlib.Path(sys.argv[1]).read_text())
    out = pathlib.Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(no plots: matplotlib is missing; apt-get install python3-matplotlib)")
        return 0
    written = []

    def against_planes(name, title, planes, series, ylabel, linear=False):
        """Goodput per host against planes: the ideal, `series` ((label, values)...),
        and, if `linear`, the first series' one-plane figure times the planes."""
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot(planes, [100 * p for p in planes], "k--", label="ideal (every plane full)")
        if linear and series:
            base = series[0][1][0]
            ax.plot(planes, [base * p for p in planes], "k:", label="linear from 1 plane")
        for label, ys in series:
            ax.plot(planes, ys, "o-", label=label)
        ax.set_xlabel("planes (100 Gb/s port each)")
        ax.set_ylabel(ylabel)
        ax.set_xticks(planes)
        ax.set_title(title)
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / name, dpi=120)
        written.append(name)

    head, rows = section(tabs, "Goodput against planes")
    if rows:
        planes = [int(r[0]) for r in rows]
        series = [(name, [(percent(r[col]) or 0) * p for r, p in zip(rows, planes)])
                  for col, name in ((2, "MetaRoCE, 16 paths"), (3, "RoCEv2 GBN+DCQCN"))]
        against_planes("planes.png", "Permutation on a multiplane fabric", planes, series,
                       "goodput per host, Gb/s (share of ideal x planes x 100)")
    else:
        print("(no planes table)")

    head, rows = section(tabs, "All-to-all at")
    if rows:
        planes = [int(r[0]) for r in rows]
        series = [(name, [float(r[col]) if r[col] != "-" else 0 for r in rows])
                  for col, name in ((2, "MetaRoCE, 16 paths"), (4, "RoCEv2 GBN+DCQCN"))]
        against_planes("scale.png", "All-to-all, 64 hosts, 4,032 connections", planes, series,
                       "goodput per host, Gb/s", linear=True)
    else:
        print("(no all-to-all at scale table)")

    head, rows = section(tabs, "Random loss")
    if rows:
        labels = [r[0] for r in rows]
        xs = range(len(rows))
        fig, ax = plt.subplots(figsize=(6, 4))
        # Every "of clean" column, named after the column before it.
        for i, h in enumerate(head):
            if h == "of clean" and i > 0:
                name = re.sub(r"\s*\(\[MR-[A-Z]+-\d+\]\)", "", head[i - 1])
                ax.plot(xs, [percent(r[i]) or 0 for r in rows], "o-", label=name)
        ax.set_xticks(list(xs))
        ax.set_xticklabels(labels)
        ax.set_xlabel("random loss across the spines")
        ax.set_ylabel("goodput kept, % of the same transport's clean run")
        ax.set_ylim(0, 110)
        ax.set_title("Random loss, 4 planes (permutation)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "loss.png", dpi=120)
        written.append("loss.png")
    else:
        print("(no loss table)")

    head, rows = section(tabs, "Incast")
    if rows:
        col = head.index("drops")
        fans = sorted({r[0] for r in rows}, key=lambda f: int(f.split(":")[0]))
        fig, ax = plt.subplots(figsize=(6, 4))
        width = 0.38
        for k, hints in enumerate(("on", "off")):
            ys = [next((int(r[col]) for r in rows if r[0] == f and r[2] == hints), 0)
                  for f in fans]
            ax.bar([i + (k - 0.5) * width for i in range(len(fans))], ys, width,
                   label=f"hints {hints}")
        ax.set_xticks(range(len(fans)))
        ax.set_xticklabels(fans)
        ax.set_xlabel("senders into one 100 Gb/s port (1 MiB queue)")
        ax.set_ylabel("datagrams dropped at the port")
        ax.set_yscale("log")
        ax.set_title("Incast, receiver's rate hints on and off")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "incast.png", dpi=120)
        written.append("incast.png")
    else:
        print("(no incast table)")

    head, rows = section(tabs, "Queues and drops")
    if rows:
        seen = [[int(x) for x in re.findall(r"\d+", r[2])] for r in rows]
        labels = [f"{r[0]}\n{r[1]}" for r in rows]
        ys = range(len(rows))
        fig, ax = plt.subplots(figsize=(8, 0.45 * len(rows) + 1.5))
        ax.barh([y + 0.2 for y in ys], [v[1] for v in seen], 0.4, label="p99")
        ax.barh([y - 0.2 for y in ys], [v[2] for v in seen], 0.4, label="p99.9")
        ax.axvline(100, color="k", linestyle=":", label="ECN threshold")
        ax.axvline(1024, color="k", linestyle="--", label="queue (1 MiB)")
        ax.set_yticks(list(ys))
        ax.set_yticklabels(labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("backlog found by the datagrams at switch ports, KiB")
        ax.set_title("Queues")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "queues.png", dpi=120)
        written.append("queues.png")
    else:
        print("(no queues table)")

    print("plots: " + ", ".join(str(out / w) for w in written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
