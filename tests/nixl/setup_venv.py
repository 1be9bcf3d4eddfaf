#!/usr/bin/env python3
"""The NIXL tests' set-up, run once before them (a ctest fixture, tests/cmake/nixl.cmake): NIXL's
pinned wheel in the build's virtual environment (plugin_test.py's install, which skips with exit
status 77 when the package index cannot be reached) and the plug-in linked into that NIXL's
plug-in directory, so that the tests after it, run side by side, find both in place and change
neither.

Arguments: --source-dir, --venv, --plugin. Prints where the link is and exits 0.
"""
import argparse
import os
import sys

import plugin_test as harness


def main():
    p = argparse.ArgumentParser()
    for a in ('--source-dir', '--venv', '--plugin'):
        p.add_argument(a, required=True)
    args = p.parse_args()
    python = harness.install(args.source_dir, args.venv)
    link = harness.link_plugin(python, args.plugin)
    if os.path.realpath(link) != os.path.realpath(args.plugin):
        print(f'FAIL: {link} does not lead to {args.plugin}')
        return 1
    print(f'NIXL of {python}: {link} -> {os.readlink(link)}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
