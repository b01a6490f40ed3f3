#!/usr/bin/env python3
"""Summarise dial.sh output: a Markdown table of every setting (timerq at
each --min-claim-interval, each peer setting), each figure the median
[min–max] over its runs, and, with --svg FILE, a plot of lateness p99
against Redis CPU per timer (the medians; bars span the runs' min–max).

usage: dial.py [FILE] [--svg OUT.svg]   (default dial.jsonl)
"""
import json
import math
import statistics
import sys


def spread(values, fmt):
    """median [min–max] of the values."""
    return f"{fmt.format(statistics.median(values))} [{fmt.format(min(values))}–{fmt.format(max(values))}]"


def groups(rows):
    """Steady runs grouped by label, timerq first in rising interval, then the peers."""
    g = {}
    for r in rows:
        if r.get('scenario') == 'steady':
            g.setdefault(r['label'], []).append(r)
    return g


def lateness(r):
    """p50, p99, early count, tasks: timerbench and the peer harnesses name them differently."""
    if r['peer'] == 'timerq':
        return r['lateness_p50_ms'], r['lateness_p99_ms'], r['fired_early'], r['timers']
    return r['late_p50_ms'], r['late_p99_ms'], r['early'], r['tasks']


def summary(label, rs):
    p50 = [lateness(r)[0] for r in rs]
    p99 = [lateness(r)[1] for r in rs]
    early = [lateness(r)[2] for r in rs]
    tasks = [lateness(r)[3] for r in rs]
    cpu = [r['redis_cpu_us_per_task'] for r in rs]
    return {
        'label': label, 'timerq': rs[0]['peer'] == 'timerq', 'runs': len(rs),
        'load': ', '.join(r['loadavg'].split()[0] for r in rs),
        'cpu': cpu, 'p50': p50, 'p99': p99, 'early': early, 'tasks': tasks,
        'wake50': [r['wake_p50_ms'] for r in rs if 'wake_p50_ms' in r],
        'wake99': [r['wake_p99_ms'] for r in rs if 'wake_p99_ms' in r],
        'dup': sum(r['duplicates'] for r in rs), 'lost': sum(r['lost'] for r in rs),
    }


def table(sums):
    print('| setting | runs | load (1 min) per run | Redis CPU µs/timer | lateness p50 ms | lateness p99 ms '
          '| early % (per run) | wake p50 / p99 ms | dup / lost |')
    print('|---|---|---|---|---|---|---|---|---|')
    for s in sums:
        early = ', '.join(f"{100 * e / t:.1f}" if e else '0' for e, t in zip(s['early'], s['tasks']))
        wake = (f"{statistics.median(s['wake50']):.2f} / {statistics.median(s['wake99']):.2f}"
                if s['wake50'] else '–')
        name = f"**{s['label']}**" if s['timerq'] else s['label']
        print(f"| {name} | {s['runs']} | {s['load']} | {spread(s['cpu'], '{:.1f}')} | {spread(s['p50'], '{:,.0f}')} "
              f"| {spread(s['p99'], '{:,.0f}')} | {early} | {wake} | {s['dup']} / {s['lost']} |")


def svg(sums, path):
    """Lateness p99 (log x) against Redis CPU per timer (y), hand-written SVG."""
    W, H, L, R, T, B = 720, 420, 70, 200, 30, 50
    xlo, xhi = 0.5, 10000.0
    ymax = max(max(s['cpu']) for s in sums)
    ymax = math.ceil(ymax / 20) * 20

    def X(ms):
        ms = max(ms, xlo)
        return L + (math.log10(ms) - math.log10(xlo)) / (math.log10(xhi) - math.log10(xlo)) * (W - L - R)

    def Y(us):
        return T + (1 - us / ymax) * (H - T - B)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
           f'<rect width="{W}" height="{H}" fill="white"/>']
    for ms in (1, 10, 100, 1000, 10000):
        out.append(f'<line x1="{X(ms):.1f}" y1="{T}" x2="{X(ms):.1f}" y2="{H - B}" stroke="#ddd"/>')
        out.append(f'<text x="{X(ms):.1f}" y="{H - B + 15}" text-anchor="middle">{ms:,}</text>')
    for us in range(0, ymax + 1, 20):
        out.append(f'<line x1="{L}" y1="{Y(us):.1f}" x2="{W - R}" y2="{Y(us):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{L - 6}" y="{Y(us) + 4:.1f}" text-anchor="end">{us}</text>')
    out.append(f'<rect x="{L}" y="{T}" width="{W - L - R}" height="{H - T - B}" fill="none" stroke="#444"/>')
    out.append(f'<text x="{(L + W - R) / 2}" y="{H - 12}" text-anchor="middle">'
               f'lateness p99, ms (log scale; due → fired, or the handler\'s start for a peer)</text>')
    out.append(f'<text x="16" y="{(T + H - B) / 2}" text-anchor="middle" '
               f'transform="rotate(-90 16 {(T + H - B) / 2})">Redis CPU per timer, µs</text>')
    tq = [s for s in sums if s['timerq']]
    pts = ' '.join(f"{X(statistics.median(s['p99'])):.1f},{Y(statistics.median(s['cpu'])):.1f}" for s in tq)
    out.append(f'<polyline points="{pts}" fill="none" stroke="#1f77b4" stroke-width="1.5"/>')
    colors = ['#d62728', '#ff7f0e', '#9467bd', '#2ca02c', '#8c564b']
    k = 0
    tq_xy = [(X(statistics.median(s['p99'])), Y(statistics.median(s['cpu']))) for s in tq]
    for s in sums:
        x, y = X(statistics.median(s['p99'])), Y(statistics.median(s['cpu']))
        out.append(f'<line x1="{x:.1f}" y1="{Y(min(s["cpu"])):.1f}" x2="{x:.1f}" y2="{Y(max(s["cpu"])):.1f}" '
                   f'stroke="{"#1f77b4" if s["timerq"] else colors[k % len(colors)]}"/>')
        if s['timerq']:
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="#1f77b4"/>')
            # Of two points close on top of each other, the lower one's label goes below it.
            below = any(abs(x - px) < 10 and 0 < y - py < 15 for px, py in tq_xy)
            out.append(f'<text x="{x + 5:.1f}" y="{y + 14 if below else y - 6:.1f}" fill="#1f77b4">'
                       f'{s["label"][len("timerq-"):]}</text>')
        else:
            c = colors[k % len(colors)]
            out.append(f'<rect x="{x - 4:.1f}" y="{y - 4:.1f}" width="8" height="8" fill="{c}"/>')
            ly = T + 60 + 18 * k
            out.append(f'<rect x="{W - R + 14}" y="{ly - 8}" width="8" height="8" fill="{c}"/>')
            out.append(f'<text x="{W - R + 28}" y="{ly}">{s["label"].removesuffix("-steady")}</text>')
            k += 1
    out.append(f'<circle cx="{W - R + 18}" cy="{T + 14}" r="3.5" fill="#1f77b4"/>')
    out.append(f'<text x="{W - R + 28}" y="{T + 18}">timerq, by</text>')
    out.append(f'<text x="{W - R + 28}" y="{T + 31}">--min-claim-interval</text>')
    out.append(f'<text x="{W - R + 14}" y="{H - B - 30}">medians of {max(s["runs"] for s in sums)} runs;</text>')
    out.append(f'<text x="{W - R + 14}" y="{H - B - 16}">bars: min–max CPU</text>')
    out.append('</svg>')
    with open(path, 'w') as f:
        f.write('\n'.join(out) + '\n')


def main():
    args = sys.argv[1:]
    out = None
    if '--svg' in args:
        i = args.index('--svg')
        out = args[i + 1]
        del args[i:i + 2]
    path = args[0] if args else 'dial.jsonl'
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    g = groups(rows)
    tq = sorted((k for k in g if k.startswith('timerq-')),
                key=lambda k: statistics.median(r['lateness_p99_ms'] for r in g[k]))
    # Rising interval is rising lateness; sort by the interval itself where it parses.
    units = {'us': 1e-6, 'ms': 1e-3, 's': 1}

    def seconds(label):
        v = label[len('timerq-'):]
        for u in ('us', 'ms', 's'):
            if v.endswith(u):
                return float(v[:-len(u)]) * units[u]
        return math.inf
    tq.sort(key=seconds)
    sums = [summary(k, g[k]) for k in tq] + [summary(k, g[k]) for k in g if not k.startswith('timerq-')]
    table(sums)
    if out:
        svg(sums, out)


if __name__ == '__main__':
    main()
