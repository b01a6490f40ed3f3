#!/usr/bin/env python3
"""Summarise run.sh output: one Markdown table per scenario, one row per label
(peer setting), each figure the median [min–max] over that label's runs, with
the 1-minute load average before each run.

usage: table.py [FILE]   (default peers.jsonl)
"""
import json
import statistics
import sys


def spread(values, fmt):
    """median [min–max] of the values that are present."""
    values = [v for v in values if v is not None]
    if not values:
        return '–'
    return f"{fmt.format(statistics.median(values))} [{fmt.format(min(values))}–{fmt.format(max(values))}]"


def loads(runs):
    return ', '.join(r['loadavg'].split()[0] for r in runs)


def by_label(rows, scenario):
    """Runs of the scenario grouped by label, in order of first appearance."""
    groups = {}
    for r in rows:
        if r.get('scenario') == scenario:
            groups.setdefault(r['label'], []).append(r)
    return groups


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else 'peers.jsonl'
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]

    print('### steady\n')
    print('| peer / setting | runs | load (1 min) per run | Redis CPU µs/task | lateness p50 ms | p99 ms | max ms '
          '| early (max ms early) | dup | lost | max enqueue lag ms |')
    print('|---|---|---|---|---|---|---|---|---|---|---|')
    for label, rs in by_label(rows, 'steady').items():
        early = ', '.join(f"{r['early']} ({r['early_max_ms']:.0f})" for r in rs)
        print(f"| {label} | {len(rs)} | {loads(rs)} | {spread([r['redis_cpu_us_per_task'] for r in rs], '{:.1f}')} | "
              f"{spread([r['late_p50_ms'] for r in rs], '{:.0f}')} | {spread([r['late_p99_ms'] for r in rs], '{:.0f}')} | "
              f"{spread([r['late_max_ms'] for r in rs], '{:.0f}')} | {early} | {sum(r['duplicates'] for r in rs)} | "
              f"{sum(r['lost'] for r in rs)} | {spread([r.get('max_enqueue_lag_ms') for r in rs], '{:.1f}')} |")

    print('\n### burst\n')
    print('| peer / setting | runs | load (1 min) per run | enqueue /s | fires/s (due → last) | first fire after due ms '
          '| drain fires/s (first → last) | Redis CPU µs/fire | Redis cores used | early | dup | lost |')
    print('|---|---|---|---|---|---|---|---|---|---|---|---|')
    for label, rs in by_label(rows, 'burst').items():
        # Separates the wait for the peer's poller from the drain itself.
        drain = [r['tasks'] / (r['span_s'] - r['first_fire_after_due_ms'] / 1000)
                 if r.get('span_s') and r['span_s'] * 1000 > r['first_fire_after_due_ms'] else None for r in rs]
        print(f"| {label} | {len(rs)} | {loads(rs)} | {spread([r['enqueue_per_s'] for r in rs], '{:,.0f}')} | "
              f"{spread([r.get('fires_per_s') for r in rs], '{:,.0f}')} | "
              f"{spread([r.get('first_fire_after_due_ms') for r in rs], '{:,.0f}')} | "
              f"{spread(drain, '{:,.0f}')} | {spread([r['redis_cpu_us_per_task'] for r in rs], '{:.1f}')} | "
              f"{spread([r['redis_cores_used'] for r in rs], '{:.2f}')} | {sum(r['early'] for r in rs)} | "
              f"{sum(r['duplicates'] for r in rs)} | {sum(r['lost'] for r in rs)} |")

    idle = [r for r in rows if r.get('scenario') == 'idle']
    if idle:
        print('\n### idle (4 consumers, nothing queued, 10 s)\n')
        print('| peer / setting | runs | load (1 min) per run | Redis CPU (cores) while idle |')
        print('|---|---|---|---|')
        for label, rs in by_label(rows, 'idle').items():
            print(f"| {label} | {len(rs)} | {loads(rs)} | {spread([r['idle_redis_cpu_s_per_s'] for r in rs], '{:.4f}')} |")


if __name__ == '__main__':
    main()
