#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
#
# The host side of tools/bench-fabric: reads the guest's RESULT, SERIES and INFO lines
# (tools/bench-fabric-guest.sh), prints the markdown table and writes the plots
# (matplotlib; skipped with a note when it is missing) into OUTDIR.
#   bench-fabric-report.py GUEST_OUTPUT OUTDIR
# Run with /usr/bin/python3 (Debian's python3-matplotlib).

import collections
import sys


def parse(path):
    info, results, series = {}, [], collections.defaultdict(list)
    with open(path, errors='replace') as f:
        for line in f:
            p = line.rstrip('\n').split('|')
            if p[0] == 'INFO' and len(p) >= 3:
                info[p[1]] = p[2]
            elif p[0] == 'RESULT' and len(p) >= 5:
                results.append(dict(cell=p[1], drv=p[2], value=p[3], unit=p[4],
                                    note=p[5] if len(p) > 5 else ''))
            elif p[0] == 'SERIES' and len(p) == 4:
                try:
                    series[p[1]].append((float(p[2]), float(p[3])))
                except ValueError:
                    pass
    return info, results, series


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def jain(xs):
    xs = [x for x in xs if x is not None]
    if not xs or not sum(xs):
        return None
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))


def totals(series, prefix):
    """Time -> sum over the series whose name starts with prefix (same sample times)."""
    names = sorted(n for n in series if n.startswith(prefix + '/'))
    if not names:
        return names, []
    n = min(len(series[x]) for x in names)
    return names, [(series[names[0]][i][0], sum(series[x][i][1] for x in names))
                   for i in range(n)]


def mean(xs):
    return sum(xs) / len(xs) if xs else None


def blackhole_metrics(tot, fault):
    """Throughput before and after the fault (Mbit/s), and seconds to recover."""
    if not tot or fault is None:
        return None, None, None
    peak = max(v for _, v in tot) or 1
    # The last second before the fault: the transfer's first second is its ramp.
    before = (mean([v for t, v in tot if fault - 1.0 <= t < fault])
              or mean([v for t, v in tot if t < fault and v > 0.1 * peak]))
    end = max(t for t, v in tot if v > 0.05 * peak) if any(v > 0.05 * peak for _, v in tot) else fault
    after_w = [v for t, v in tot if fault < t <= end]
    steady = mean([v for t, v in tot if (fault + end) / 2 <= t <= end]) if end > fault + 1 else None
    after = mean(after_w) if after_w else 0.0
    rec = None
    if steady and before and steady > 0.2 * before:
        pts = [(t, v) for t, v in tot if t > fault]
        for i in range(len(pts) - 2):
            if mean([v for _, v in pts[i:i + 3]]) >= 0.9 * steady:
                rec = pts[i][0] - fault
                break
    return before, (after, steady), rec


def main():
    guest, outdir = sys.argv[1], sys.argv[2]
    info, results, series = parse(guest)
    rate = num(info.get('rate_mbit')) or 0
    k = int(num(info.get('links')) or 4)
    mbs = lambda mbit: mbit / 8          # Mbit/s -> MB/s (10^6 bytes)
    by = collections.OrderedDict()
    for r in results:
        by.setdefault(r['cell'], {})[r['drv']] = r
    print(f"Fabric: {k} links of {rate:g} Mbit/s each way ({mbs(rate):.2f} MB/s), "
          f"MTU {info.get('mtu', '1500')}, rate hints: {info.get('rate_hints', '?')}, "
          f"{info.get('duration', '?')} s per cell. Bandwidth is perftest's BW average in "
          "MB/s (10^6 B/s); shares are of the capacity the cell leaves. Incast: goodput "
          "while every sender sent, where measured.")
    print()
    print('| cell | metaroce | rxe | capacity | metaroce share | rxe share | notes |')
    print('|---|---|---|---|---|---|---|')
    hot_left = {}
    for r in results:
        if r['cell'] == 'hot flow received':
            hot_left[r['drv']] = k * rate - (num(r['value']) or 0)

    def cap_of(cell, drv):
        if cell.startswith('bw K=1'):
            return mbs(rate)
        if cell.startswith('incast'):
            return mbs(rate)
        if 'hot UDP' in cell:
            return mbs(hot_left.get(drv, (k - 1) * rate))
        return mbs(k * rate)

    def fmt(v, d=2):
        return '-' if v is None else f'{v:.{d}f}'

    for cell, d in by.items():
        if cell == 'hot flow received' or cell.startswith('blackhole') or cell.startswith('incast'):
            continue
        row, shares, notes = [], [], []
        for drv in ('metaroce', 'rxe'):
            r = d.get(drv)
            v = num(r['value']) if r else None
            row.append(f"{fmt(v)} MB/s" if v is not None else '-')
            c = cap_of(cell, drv)
            shares.append(f'{100 * v / c:.0f}%' if v is not None and c else '-')
            if r and r['note']:
                notes.append(f"{drv}: {r['note']}")
        c = cap_of(cell, 'metaroce')
        print(f"| {cell} | {row[0]} | {row[1]} | {c:.2f} MB/s | {shares[0]} | {shares[1]} | {'; '.join(notes)} |")
    # K=4 against K=1.
    for q in ('1QP', '4QP'):
        a, b = by.get(f'bw K={k} {q}', {}), by.get(f'bw K=1 {q}', {})
        cells = []
        for drv in ('metaroce', 'rxe'):
            x = num(a.get(drv, {}).get('value')) if a.get(drv) else None
            y = num(b.get(drv, {}).get('value')) if b.get(drv) else None
            cells.append(f'{x / y:.2f}x' if x and y else '-')
        if a or b:
            goal = ' (goal metaroce 1 QP >= 3.5x)' if q == '1QP' else ''
            print(f'| K={k} / K=1, {q} | {cells[0]} | {cells[1]} | {k}x | | | ratio of the bandwidths{goal} |')
    # Blackhole.
    for cell, d in by.items():
        if not cell.startswith('blackhole'):
            continue
        row, notes = [], []
        for drv in ('metaroce', 'rxe'):
            r = d.get(drv)
            fault = num(info.get(f'blackhole {drv} fault_t'))
            names, tot = totals(series, f'bh-{drv}')
            before, after, rec = blackhole_metrics(tot, fault)
            v = num(r['value']) if r else None
            row.append(f"{fmt(v)} MB/s" if v is not None else 'failed')
            if before:
                a, steady = after
                s = f"{drv}: before {before:.1f} Mbit/s, after {a:.1f} ({100 * a / before:.0f}%)"
                if steady is not None:
                    s += f", steady after {steady:.1f} ({100 * steady / before:.0f}%)"
                s += f", recovered in {rec:.1f} s" if rec is not None else ', not recovered'
                late = num(info.get(f'blackhole {drv} fault_after_data'))
                late = f", {late:.1f} s after the first data" if late is not None else ''
                notes.append(s + f" ({info.get(f'blackhole {drv} link', '?')} at t={fault:.1f} s{late})")
        print(f"| {cell} | {row[0]} | {row[1]} | {mbs(k * rate):.2f} MB/s | | | {'; '.join(notes)} |")
    # Incast.
    for cell, d in by.items():
        if not cell.startswith('incast'):
            continue
        row, notes = [], []
        for drv in ('metaroce', 'rxe'):
            r = d.get(drv)
            if not r:
                row.append('-')
                continue
            xs = [num(x) for x in r['value'].split()]
            # perftest's averages cover each client's own run, which start apart:
            # their sum overstates the aggregate. The senders' rates sampled at r1
            # over the time all of them were sending give it, and the fairness.
            tag = cell.split(' ')[1].split(':')[0]
            hints = cell.split('hints ')[1] if 'hints ' in cell else '-'
            names, tot = totals(series, f'incast{tag}-{drv}{hints}')
            both = [i for i in range(len(tot)) if all(series[n][i][1] > 0.05 for n in names)]
            # What r1 received from the senders includes what the link then dropped:
            # offered load. What r1 put on the link, less the headers and what d1
            # received twice or dropped, is goodput.
            agg = sum(x for x in xs if x)
            extra, good = '', None
            if names and len(both) >= 3:
                off = mbs(mean([tot[i][1] for i in both]))
                j = jain([mean([series[n][i][1] for i in both]) for n in names])
                extra = (f'offered into the link while all {len(names)} sent '
                         f'({tot[both[-1]][0] - tot[both[0]][0]:.1f} s): {off:.2f} MB/s, '
                         f'Jain {fmt(j)} (sampled at r1); ')
                good, how = goodput(info, series, f'{cell} {drv}',
                                    f'link{tag}-{drv}{hints}/l1', both, tot)
                if good is not None:
                    extra += how
            if good is not None:
                row.append(f'{good:.2f} MB/s goodput ({100 * good / mbs(rate):.0f}%)')
            else:
                row.append(f'{agg:.2f} MB/s ({100 * agg / mbs(rate):.0f}%)')
            senders = int(tag) if tag.isdigit() else len(xs)
            if len(xs) < senders:
                row[-1] += f', **{senders - len(xs)} of {senders} clients failed**'
            notes.append(f"{drv}: {extra}Jain {fmt(jain(xs))} over perftest's averages "
                         f"{' '.join(fmt(x) for x in xs)} MB/s (their sum overstates the aggregate "
                         f"when the clients' runs do not overlap fully); {r['note']}")
        print(f"| {cell} | {row[0]} | {row[1]} | {mbs(rate):.2f} MB/s | | | {'; '.join(notes)} |")
    plot(info, series, outdir)


# A metaroce data packet carries the netdev's MTU less the largest headers (IPv6 40,
# UDP 8, data header 60: the driver's payload_mtu): 1392 bytes at MTU 1500. A WRITE
# over IPv4 adds Ethernet 14, IPv4 20, UDP 8 and the common, stream and WRITE headers
# (16 + 16 + 16; spec [MR-WIRE]) on the wire.
PAYLOAD_LESS = 40 + 8 + 60
WIRE_MORE = 14 + 20 + 8 + 48


def goodput(info, series, key, link, both, tot):
    """Goodput in MB/s while every sender sent, and how it was reckoned: the rate r1
    put on the link (after its queue's drops) times the payload's share of a packet,
    less the share of d1's packets it received twice or dropped. metaroce only (see
    rx_counts in the guest; older guest outputs carry rxe counters that cannot tell
    what it used): rxe's row is perftest's sum."""
    if not key.endswith(' metaroce'):
        return None, ''
    mtu = num(info.get('mtu', '1500'))
    rx = [num(x) for x in info.get(f'{key} rx', '').split()]
    if link not in series or not mtu or len(rx) != 6 or None in rx:
        return None, ''
    times = {tot[i][0] for i in both}
    on_link = mean([v for t, v in series[link] if t in times])
    if on_link is None:
        return None, ''
    pkts, dups, discards = rx[3] - rx[0], rx[4] - rx[1], rx[5] - rx[2]
    waste = min(1, (dups + discards) / pkts) if pkts > 0 else 0
    payload = mtu - PAYLOAD_LESS
    share = payload / (payload + WIRE_MORE)
    good = on_link / 8 * share * (1 - waste)          # Mbit/s -> MB/s
    return good, (f'on the link {on_link / 8:.2f} MB/s, payload {100 * share:.1f}% of a '
                  f'packet of {payload:.0f} payload bytes (the ceiling), of d1\'s {pkts:.0f} packets '
                  f'{dups:.0f} duplicates and {discards:.0f} discarded: '
                  f'goodput {good:.2f} MB/s; ')


def plot(info, series, outdir):
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        print('\n(no plots: matplotlib is missing; apt-get install python3-matplotlib)')
        return
    written = []
    for kind, prefixes, title in (
            ('blackhole', ['bh-metaroce', 'bh-rxe'], 'per-link throughput, one link blackholed'),
            ('incast', sorted({n.split('/')[0] for n in series if n.startswith('incast')}),
             'per-sender rate into one link')):
        prefixes = [p for p in prefixes if any(n.startswith(p + '/') for n in series)]
        if not prefixes:
            continue
        fig, axes = plt.subplots(len(prefixes), 1, figsize=(9, 3 * len(prefixes)), squeeze=False)
        for ax, p in zip(axes[:, 0], prefixes):
            names, tot = totals(series, p)
            for n in names:
                ax.plot([t for t, _ in series[n]], [v for _, v in series[n]], label=n.split('/')[1])
            if kind == 'blackhole':
                ax.plot([t for t, _ in tot], [v for _, v in tot], 'k--', label='total')
                f = num(info.get(f"blackhole {p[3:]} fault_t"))
                if f is not None:
                    ax.axvline(f, color='r', linestyle=':', label='fault')
            ax.set_title(f'{p}: {title}')
            ax.set_xlabel('time (s)')
            ax.set_ylabel('Mbit/s')
            ax.legend(fontsize='small', ncol=5)
            ax.grid(alpha=0.3)
        fig.tight_layout()
        path = f'{outdir}/{kind}.png'
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    if written:
        print('\nplots: ' + ' '.join(written))


if __name__ == '__main__':
    main()
