#!/usr/bin/env python3
"""xtel's NIXL plug-in writing into a full 2 MiB tmpfs, under the real NIXL (docs/nixl.md).

The agents' process (tests/nixl/nixl_agents.py) runs in a mount namespace of its own
(`unshare -rm`: no root needed, and nothing is left mounted on the host) in which its
NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH is a 2 MiB tmpfs filled to its last block before NIXL
starts. The plug-in cannot reserve its node file there: both agents must start, every transfer
complete, and each agent's log say so in exactly the node exporter's two lines, the node file's
(`node exporter off: ... No space left on device`) and the unpublished notice's (it cannot be
written either), and no other error line. Skipped (77) with the command's own words where this
machine cannot make such a namespace and mount.

Arguments as plugin_test.py's. Prints what failed and exits 1, or a summary and exits 0.
"""
import os
import stat
import subprocess
import sys
import tempfile
import time

import plugin_test as harness

SKIP = 77
NO_SPACE = 'No space left on device'

# Mounts the tmpfs over $1, fills it and checks that nothing is left, then runs the rest.
IN_NAMESPACE = ('mount -t tmpfs -o size=2m xtel-full "$1" || exit 1; '
                'dd if=/dev/zero of="$1/filler" bs=64k 2>/dev/null; '
                'left=$(df --output=avail "$1" | tail -n 1); '
                '[ "$left" -eq 0 ] || { echo "the tmpfs has $left KiB left, not 0" >&2; exit 3; }; '
                'shift; exec "$@"')


def namespace_refused(directory):
    """Why `unshare -rm` cannot mount a tmpfs here, or None when it can."""
    command = ['unshare', '-rm', 'sh', '-c', 'mount -t tmpfs -o size=2m xtel-full "$1"', 'sh',
               directory]
    try:
        r = subprocess.run(command, capture_output=True, text=True, timeout=20)
    except OSError as e:
        return f'{" ".join(command)}: {e}'
    if r.returncode != 0:
        return f'{" ".join(command)} exited {r.returncode}: {r.stderr.strip()}'
    return None


def wrapper(scratch, python, directory):
    """A stand-in for the venv's python3 that runs it in the namespace of a full tmpfs."""
    path = os.path.join(scratch, 'python-in-full-tmpfs')
    with open(path, 'w') as f:
        f.write('#!/bin/sh\n'
                f"exec unshare -rm sh -c '{IN_NAMESPACE}' sh '{directory}' '{python}' \"$@\"\n")
    os.chmod(path, stat.S_IRWXU)
    return path


def problems_of(done, rc, lines, directory):
    problems = []
    if rc != 0 or done['tx_requests'] != harness.WRITES or done['rx_requests'] != harness.READS:
        problems.append(f'the agents did not complete every transfer (exit status {rc}, {done})')
    errors = [l for l in lines if l.startswith('xtel: error:')]
    for agent in (done['initiator'], done['target']):
        ours = [l for l in errors if f"agent '{agent}'" in l]
        node_file = [l for l in ours if f'node exporter off: node file {directory}/{agent}.metrics'
                     in l and NO_SPACE in l]
        notice = [l for l in ours if 'unpublished notice' in l and NO_SPACE in l
                  and 'nothing at node level shows it' in l]
        if len(node_file) != 1 or len(notice) != 1 or len(ours) != 2:
            problems.append(f'agent {agent}: expected the node file\'s line and the notice\'s, '
                            f'each once, both saying "{NO_SPACE}"; its error lines: {ours}')
    if len(errors) != 4:
        problems.append(f'expected 4 error lines, 2 an agent; got {errors}')
    return problems


def main():
    args, python, started = harness.prepare()
    driver = os.path.join(args.source_dir, 'tests', 'nixl', 'nixl_agents.py')
    with tempfile.TemporaryDirectory(prefix='xtel-nixl-full-') as scratch:
        directory = os.path.join(scratch, 'full')
        os.mkdir(directory)
        refused = namespace_refused(directory)
        if refused:
            print(f'SKIP: no mount namespace with a tmpfs of its own here: {refused}')
            return SKIP
        log_path = os.path.join(scratch, 'agents.log')
        with open(log_path, 'w+') as log:
            agents, done = harness.start_agents(wrapper(scratch, python, directory), driver,
                                                directory, log)
            rc = harness.end_agents(agents)
            log.seek(0)
            lines = log.read().splitlines()
    problems = problems_of(done, rc, lines, directory)
    for line in problems:
        print(f'FAIL: {line}')
    if problems:
        print('\n'.join(lines))
        return 1
    print(f'real NIXL agents over a full 2 MiB tmpfs: {harness.WRITES} WRITEs and '
          f'{harness.READS} READs completed; each agent logged its node file and its notice '
          f'refused for want of space ({time.monotonic() - started:.1f} s)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
