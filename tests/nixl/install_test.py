#!/usr/bin/env python3
"""`xtel nixl install` against the real NIXL of the test's virtual environment (docs/nixl.md).

It finds the environment's NIXL plug-in directory through its Python and links the plug-in
there; run again it changes nothing; a file of the plug-in's name that is not a link, a
--plugin-dir that is not a directory and a Python without NIXL are each refused with a message
naming them. Then NIXL, told NIXL_TELEMETRY_EXPORTER=xtel, loads the plug-in from the link: its
agents' node files appear.

Arguments: --source-dir, --venv and --plugin as plugin_test.py's, and --xtel (the built xtel
program). Prints what failed and exits 1, or a summary and exits 0.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import plugin_test as harness


def install(xtel, *options):
    r = subprocess.run([xtel, 'nixl', 'install', *options], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def check(problems, what, got, want_rc, want_words):
    rc, said = got
    if rc != want_rc or want_words not in said:
        problems.append(f'{what}: expected exit status {want_rc} and "{want_words}", got '
                        f'{rc}: {said.strip()}')


def main():
    p = argparse.ArgumentParser()
    for a in ('--source-dir', '--venv', '--plugin', '--xtel'):
        p.add_argument(a, required=True)
    args = p.parse_args()
    started = time.monotonic()
    python = harness.install(args.source_dir, args.venv)
    link = harness.link_plugin(python, args.plugin)  # where the install must put it
    os.unlink(link)
    plugin = os.path.abspath(args.plugin)
    problems = []
    check(problems, 'the first install', install(args.xtel, '--python', python, '--plugin',
                                                 plugin), 0, f'linked {link} to {plugin}')
    if os.path.realpath(link) != os.path.realpath(plugin):
        problems.append(f'{link} does not lead to {plugin}')
    check(problems, 'the second install', install(args.xtel, '--python', python, '--plugin',
                                                  plugin), 0, 'already links to')
    with tempfile.TemporaryDirectory(prefix='xtel-nixl-install-') as scratch:
        absent = os.path.join(scratch, 'absent')
        check(problems, 'an absent --plugin-dir', install(args.xtel, '--plugin-dir', absent,
                                                          '--plugin', plugin), 1,
              f"--plugin-dir '{absent}' is not a directory")
        with open(os.path.join(scratch, 'libtelemetry_exporter_xtel.so'), 'w'):
            pass
        check(problems, 'a file in the way', install(args.xtel, '--plugin-dir', scratch,
                                                     '--plugin', plugin), 1,
              'is not a link: not xtel\'s to replace')
        check(problems, 'a Python without NIXL', install(args.xtel, '--python', sys.executable,
                                                         '--plugin', plugin), 1,
              'has no NIXL wheel')
        driver = os.path.join(args.source_dir, 'tests', 'nixl', 'nixl_agents.py')
        with open(os.path.join(scratch, 'agents.log'), 'w') as log:
            agents, done = harness.start_agents(python, driver, scratch, log)
            files = sorted(f for f in os.listdir(scratch) if f.endswith('.metrics'))
            rc = harness.end_agents(agents)
        want = sorted(f'{done[a]}.metrics' for a in ('initiator', 'target'))
        if files != want or rc != 0:
            problems.append(f'NIXL through the installed link: expected node files {want} '
                            f'and exit status 0, got {files} and {rc}')
    for line in problems:
        print(f'FAIL: {line}')
    if problems:
        return 1
    print(f'xtel nixl install linked the plug-in into the real NIXL\'s plug-in directory once, '
          f'refused what it must, and NIXL loaded it from there '
          f'({time.monotonic() - started:.1f} s)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
