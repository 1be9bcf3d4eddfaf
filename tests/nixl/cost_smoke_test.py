#!/usr/bin/env python3
"""bench/nixl_cost.py in its smoke mode: it runs every configuration against the real NIXL and
prints well-formed figures, and each exporter counted every transfer its worker made. Nothing
about speed is asserted: one round of 5 ms windows on a shared machine says nothing of it.

Arguments: --source-dir, --venv, --plugin, --xtel, --exporter. Prints what failed and exits 1,
or a summary and exits 0; exit status 77 (skipped) as plugin_test.py's when NIXL's wheel cannot
be installed for want of the package index.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import plugin_test as harness

CONFIGS = ('off', 'off2', 'buffer', 'prometheus', 'xtel')
SIZES = ('4096', '65536')


def problems_of(result):
    problems = []
    for size in SIZES:
        configs = result['sizes'][size]['configs']
        if sorted(configs) != sorted(CONFIGS):
            problems.append(f'{size}: configurations {sorted(configs)}, expected {CONFIGS}')
            continue
        # Each round: off before, between and after the four others, each of them in its
        # next process.
        rounds, processes = result['rounds'], result['processes']
        for config, row in configs.items():
            want = 5 * rounds if config == 'off' else rounds
            if row['windows'] != want:
                problems.append(f'{size} {config}: {row["windows"]} windows, expected {want}')
            if config != 'off' and len(row['ratio_by_process']) != min(rounds, processes):
                problems.append(f'{size} {config}: {row["ratio_by_process"]} by process, '
                                f'expected {min(rounds, processes)}')
            if not row['ns_per_transfer'] > 0:
                problems.append(f'{size} {config}: ns_per_transfer {row["ns_per_transfer"]}')
            if config != 'off' and not row['ratio_q1'] <= row['ratio_to_off'] <= row['ratio_q3']:
                problems.append(f'{size} {config}: the median ratio is outside its quartiles')
    for config in ('buffer', 'prometheus', 'xtel'):
        made, counted = result['transfers'][config], result['exporter_counted'][config]
        if made <= 0 or counted != made:
            problems.append(f'{config}: its exporter counted {counted} requests, {made} made')
    return problems


def main():
    p = argparse.ArgumentParser()
    for a in ('--source-dir', '--venv', '--plugin', '--xtel', '--exporter'):
        p.add_argument(a, required=True)
    args = p.parse_args()
    started = time.monotonic()
    harness.install(args.source_dir, args.venv)  # skips (77) as the other NIXL tests do
    with tempfile.TemporaryDirectory(prefix='xtel-nixl-cost-') as scratch:
        out = os.path.join(scratch, 'cost.json')
        r = subprocess.run([sys.executable, os.path.join(args.source_dir, 'bench', 'nixl_cost.py'),
                            '--venv', args.venv, '--plugin', args.plugin, '--xtel', args.xtel,
                            '--exporter', args.exporter, '--smoke', '--json', out],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            print(f'FAIL: bench/nixl_cost.py --smoke exited {r.returncode}:\n{r.stdout}{r.stderr}')
            return 1
        with open(out) as f:
            result = json.load(f)
    problems = problems_of(result)
    for line in problems:
        print(f'FAIL: {line}')
    if problems:
        print(r.stdout)
        return 1
    print(f'bench/nixl_cost.py --smoke ran the five configurations at both sizes, each exporter '
          f'counting every transfer of its {result["processes"]} processes '
          f'({time.monotonic() - started:.1f} s)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
