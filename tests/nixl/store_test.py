#!/usr/bin/env python3
"""xtel-exporter serving NIXL agents that installed nothing: NIXL's own prometheus_mp stores
(--nixl-multiproc-dir, docs/nixl.md).

1. Two real NIXL agents (tests/nixl/nixl_agents.py) run with NIXL_TELEMETRY_EXPORTER=prometheus_mp:
   each keeps its store in NIXL_TELEMETRY_MULTIPROC_DIR, and NIXL serves them all on its own
   port. xtel-exporter, given that directory, must serve every agent_* series NIXL's port
   serves, with the same labels and value, and no other; those values must be what
   the agents moved (tests/nixl/prometheus_test.py's table), under NIXL's names and xtel's
   (NIXL_TELEMETRY_METRIC_SET=both in its environment), but for xtel's latency histograms, which
   a store cannot fill (none served). No store is
   refused. Once the agents' process ends, its stores' locks are free and nothing of them is
   served.
2. Hostile, from a copy of the initiator's real store, each under an agent name of its own and
   the lock held by this process, as a writer holds it: the copy as it is (served, the same
   values), truncated, grown past a store's size, of another schema, with a pid that is not the
   lock holder's, a link to the copy, and (as root) the copy given to another uid. Each bad one is
   refused with one log line and one count in
   xtel_exporter_files_refused_total{kind="nixl_store", reason}, however often the exporter
   looks, and nothing is served under its name.

Arguments as tests/nixl/plugin_test.py's. Prints what failed and exits 1, or a summary and exits
0.
"""
import fcntl
import os
import struct
import subprocess
import sys
import tempfile
import time

import files_test
import plugin_test as harness
import prometheus_test

STORE = 6800
NAME_AT, NAME_BYTES = 48, 256
NOBODY = 65534


def start_exporter(args, node_dir, store_dir, log):
    port = harness.free_port()
    p = subprocess.Popen([args.exporter, '--dir', node_dir, '--nixl-multiproc-dir', store_dir,
                          '--listen', f'127.0.0.1:{port}'], stdout=log, stderr=log,
                         env=files_test.exporter_env())  # NIXL's names and xtel's
    return p, f'http://127.0.0.1:{port}/metrics'


def agent_series(s):
    """{(name, labels): value} of the agent_* series of a scrape."""
    return {(n, ls): v for (n, ls), v in s.items() if n.startswith('agent_')}


def refused(s, reason):
    return files_test.refused(s, reason, 'nixl_store')


# xtel's families a store cannot fill: it holds no transfer, and its one time histogram does not
# tell a write from a read.
UNTOLD = ('xtel_transfer_duration_seconds_count', 'xtel_transfer_post_duration_seconds_count')


def rows(done):
    """(name, agent, labels, value) of both names of every family prometheus_test checks; None:
    no series."""
    out = []
    for _, agent, nixl, xtel, want in prometheus_test.families(done):
        out.append((nixl[0], agent, nixl[1], prometheus_test.nixl_value(want)))
        out.append((xtel[0], agent, xtel[1],
                    None if xtel[0] in UNTOLD else prometheus_test.xtel_value(want)))
    return out


def side_by_side(xtel_url, nixl_url):
    """The differences between NIXL's agent_* series and xtel-exporter's, family by family."""
    nixl = agent_series(files_test.scrape(nixl_url))
    xtel = agent_series(files_test.scrape(xtel_url))
    out = [f'{n}{dict(ls)}: NIXL serves {v}, xtel-exporter {xtel.get((n, ls))}'
           for (n, ls), v in sorted(nixl.items(), key=str) if xtel.get((n, ls)) != v]
    out += [f'{n}{dict(ls)}: xtel-exporter serves {v}, NIXL serves no such series'
            for (n, ls), v in sorted(xtel.items(), key=str) if (n, ls) not in nixl]
    return out, len(nixl)


def real_stores(args, python, driver, work, log):
    """Part 1; returns the problems, what the agents did, the initiator's store and the count of
    series compared."""
    problems = []
    store_dir = os.path.join(work, 'stores')
    node_dir = os.path.join(work, 'node')
    os.mkdir(store_dir, 0o700)  # NIXL refuses a directory others may write to
    os.mkdir(node_dir)
    nixl_port = harness.free_port()
    agents, done = harness.start_agents(
        python, driver, node_dir, log, exporter='prometheus_mp',
        extra={'NIXL_TELEMETRY_MULTIPROC_DIR': store_dir,
               'NIXL_TELEMETRY_PROMETHEUS_PORT': str(nixl_port),
               'NIXL_TELEMETRY_PROMETHEUS_LOCAL': 'y'})
    exporter, url = start_exporter(args, node_dir, store_dir, log)
    nixl_url = f'http://127.0.0.1:{nixl_port}/metrics'
    compared = 0
    try:
        nixl_rows = [r for r in rows(done) if r[0].startswith('agent_')]
        for who, at, want_rows in (('NIXL\'s prometheus_mp port', nixl_url, nixl_rows),
                                   ('xtel-exporter', url, rows(done))):
            for name, agent, labels, want, got in harness.scrape_until(at, want_rows):
                problems.append(f'{who}: {name}{labels} of {agent} is {got}, expected {want}')
        different, compared = side_by_side(url, nixl_url)
        problems += different
        s = files_test.scrape(url)
        for reason in ('foreign_owner', 'not_regular', 'too_large', 'unreadable',
                       'not_nixl_file', 'damaged', 'writer_mismatch', 'writer_unverified'):
            if refused(s, reason) != 0:
                problems.append(f'a real NIXL store was refused ({reason}: {refused(s, reason)})')
        initiator = None
        for name in sorted(os.listdir(store_dir)):
            if name.endswith('.mmap'):
                with open(os.path.join(store_dir, name), 'rb') as f:
                    data = f.read()
                if data[NAME_AT:NAME_AT + NAME_BYTES].split(b'\0')[0] == \
                        done['initiator'].encode():
                    initiator = data
        if initiator is None:
            problems.append(f'no store of {done["initiator"]} in {os.listdir(store_dir)}')
        rc = harness.end_agents(agents)
        if rc != 0:
            problems.append(f'the agents\' process ended with exit status {rc}')
        # The writer gone, its lock is free: its totals are no longer served.
        deadline = time.monotonic() + 10
        while agent_series(files_test.scrape(url)) and time.monotonic() < deadline:
            time.sleep(0.2)
        if agent_series(files_test.scrape(url)):
            problems.append('the stores of an ended process are still served')
    finally:
        files_test.stop(exporter)
        if agents.poll() is None:
            harness.end_agents(agents)
    return problems, done, initiator, compared


def hostile_files(store, hostile_dir):
    """Writes the hostile copies of `store`, each flock'ed by this process as its writer would
    hold it; returns ({name: the reason it must be refused for, or None: served}, the open
    files, kept open for the locks)."""
    held = []

    def put(case, data, pid=None):
        data = bytearray(data)
        if len(data) >= NAME_AT + NAME_BYTES:
            data[NAME_AT:NAME_AT + NAME_BYTES] = case.encode().ljust(NAME_BYTES, b'\0')
        if len(data) >= 24:
            struct.pack_into('<q', data, 16, os.getpid() if pid is None else pid)
        path = os.path.join(hostile_dir, f'nixl.{case}.mmap')
        f = open(path, 'w+b')
        f.write(data)
        f.flush()
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.append(f)
        return path

    put('copy', store)
    put('truncated', store[:-8])
    put('grown', store + b'\0')
    bad_schema = bytearray(store)
    struct.pack_into('<I', bad_schema, 8, 2)
    put('bad-schema', bad_schema)
    put('other-pid', store, pid=os.getpid() + 100000)
    os.symlink(os.path.join(hostile_dir, 'nixl.copy.mmap'),
               os.path.join(hostile_dir, 'nixl.link.mmap'))
    out = {'copy': None, 'truncated': 'damaged', 'grown': 'too_large',
           'bad-schema': 'not_nixl_file', 'other-pid': 'writer_mismatch', 'link': 'not_regular'}
    if os.geteuid() == 0:
        os.chown(put('foreign', store), NOBODY, NOBODY)
        out['foreign'] = 'foreign_owner'
    else:
        print('note: not root, so no store of another uid (chown needs root): foreign_owner is '
              'not checked')
    return out, held


def hostile(args, done, store, work, log_path):
    """Part 2."""
    problems = []
    hostile_dir = os.path.join(work, 'hostile')
    node_dir = os.path.join(work, 'hostile-node')
    os.mkdir(hostile_dir)
    os.mkdir(node_dir)
    files, held = hostile_files(store, hostile_dir)
    want = {}
    for reason in files.values():
        if reason:
            want[reason] = want.get(reason, 0) + 1
    copy_rows = [(n, 'copy', l, v) for n, a, l, v in rows(done) if a == done['initiator']]
    with open(log_path, 'w+') as log:
        exporter, url = start_exporter(args, node_dir, hostile_dir, log)
        try:
            problems += [f'{n}{l} of the copy is {got}, expected {w}'
                         for n, _, l, w, got in harness.scrape_until(url, copy_rows)]
            for _ in range(3):  # more looks: still once each
                time.sleep(0.3)
                s = files_test.scrape(url)
        finally:
            files_test.stop(exporter)
            for f in held:
                f.close()
        log.seek(0)
        lines = log.read().splitlines()
    problems += files_test.refusals_judged(
        s, lines, want, files, 'nixl_store',
        lambda line, case: 'NIXL store' in line and f'/nixl.{case}.mmap refused' in line)
    return problems, files


def main():
    args, python, started = harness.prepare()
    driver = os.path.join(args.source_dir, 'tests', 'nixl', 'nixl_agents.py')
    with tempfile.TemporaryDirectory(prefix='xtel-nixl-stores-') as work:
        os.chmod(work, 0o755)  # the foreign copy's directory is listed by its reader
        log_path = os.path.join(work, 'real.log')
        with open(log_path, 'w+') as log:
            problems, done, store, compared = real_stores(args, python, driver, work, log)
            if problems:
                log.seek(0)
                print(log.read())
        files = {}
        if store is not None:
            hostile_log = os.path.join(work, 'hostile.log')
            more, files = hostile(args, done, store, work, hostile_log)
            if more:
                with open(hostile_log) as f:
                    print(f.read())
            problems += more
    for line in problems:
        print(f'FAIL: {line}')
    if problems:
        return 1
    print(f'real NIXL prometheus_mp stores: xtel-exporter served the same {compared} agent_* '
          f'series as NIXL\'s own port, {done["tx_requests"]} WRITEs and {done["rx_requests"]} '
          f'READs exactly, and nothing once their writer ended; {len(files) - 1} hostile copies '
          f'({", ".join(sorted(c for c, r in files.items() if r))}) each refused once and not '
          f'served ({time.monotonic() - started:.1f} s)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
