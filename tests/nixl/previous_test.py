#!/usr/bin/env python3
"""xtel's plug-in, built for NIXL 1.5's ABI, under the real NIXL before it (1.4.0, scripts/deps'
xtel_pip_nixl_previous), whose exporter class has no batch hooks (docs/nixl.md, "Checked
against"): NIXL 1.4 calls the destructor and exportEvent through the same vtable slots and never
the two after them, so one plug-in serves both. Two real agents move known bytes as
plugin_test.py's do, and xtel-exporter must serve exactly what they did: bytes and requests by
direction, both latency histograms' counts, memory registered, the failure by its kind.

Its own virtual environment (--previous-venv), made once, like the pinned NIXL's; skipped (77)
when the package index cannot be reached to make it.

Arguments: those of every NIXL test (tests/cmake/nixl.cmake) and --previous-venv.
"""
import argparse
import os
import sys
import tempfile
import time

import plugin_test as harness


def main():
    p = argparse.ArgumentParser()
    for a in ('--source-dir', '--venv', '--plugin', '--exporter', '--previous-venv'):
        p.add_argument(a, required=True)
    args = p.parse_args()
    started = time.monotonic()
    python = harness.install(args.source_dir, args.previous_venv, 'previous')
    harness.link_plugin(python, args.plugin)
    version = harness.subprocess.run(
        [python, '-c', 'import importlib.metadata as m; print(m.version("nixl-cu12"))'],
        capture_output=True, text=True, check=True).stdout.strip()
    driver = os.path.join(args.source_dir, 'tests', 'nixl', 'nixl_agents.py')
    with tempfile.TemporaryDirectory(prefix='xtel-nixl-previous-') as logs:
        with open(os.path.join(logs, 'served.log'), 'w+') as log:
            problems = harness.served_values(args, python, driver, log)
            if problems:
                log.seek(0)
                print(log.read())
    for line in problems:
        print(f'FAIL: NIXL {version}: {line}')
    if problems:
        return 1
    print(f'real NIXL {version} agents through the plug-in: xtel-exporter served '
          f'{harness.WRITES} WRITEs and {harness.READS} READs of {harness.SIZE} bytes exactly '
          f'({time.monotonic() - started:.1f} s)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
