#!/usr/bin/env python3
"""xtel-exporter serving NIXL agents that installed nothing: NIXL's own BUFFER rings
(--nixl-buffer-dir, docs/nixl.md).

1. Two real NIXL agents (tests/nixl/nixl_agents.py) run with NIXL_TELEMETRY_ENABLE=y and no
   NIXL_TELEMETRY_EXPORTER: NIXL's BUFFER exporter writes each agent's ring,
   NIXL_TELEMETRY_DIR/<agent name>. xtel-exporter, given that directory, drains the rings and
   must serve, under NIXL's names and xtel's (NIXL_TELEMETRY_METRIC_SET=both in its
   environment), exactly what the agents moved: tests/nixl/prometheus_test.py's table, family by
   family. Each ring is drained (its read position reaches its write position), and no ring is
   refused.
2. Hostile, from a copy of the initiator's real ring: the copy as it is (read again from its
   first event: served, the same values), truncated, with a version NIXL does not write, a
   capacity claimed past what is read, a file past the size limit, a link to the copy, a FIFO,
   and (as root) the copy given to another uid. Each bad one is refused with one log line and
   one count in xtel_exporter_files_refused_total{kind="nixl_ring", reason}, however often the
   exporter looks, and nothing is served under its name.

Arguments as tests/nixl/plugin_test.py's. Prints what failed and exits 1, or a summary and exits
0.
"""
import os
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

import plugin_test as harness
import prometheus_test

HEADER = 40  # write position, read position, version, expected version, capacity, mask
EVENT = 16
NOBODY = 65534


def exporter_env():
    env = dict(os.environ)
    env['NIXL_TELEMETRY_METRIC_SET'] = 'both'  # the models it makes serve NIXL's names too
    return env


def start_exporter(args, node_dir, ring_dir, log):
    port = harness.free_port()
    p = subprocess.Popen([args.exporter, '--dir', node_dir, '--nixl-buffer-dir', ring_dir,
                          '--listen', f'127.0.0.1:{port}'], stdout=log, stderr=log,
                         env=exporter_env())
    return p, f'http://127.0.0.1:{port}/metrics'


def stop(p):
    p.terminate()
    p.wait(timeout=10)


def rows(done):
    """(name, agent, labels, value) of both names of every family prometheus_test checks."""
    out = []
    for _, agent, nixl, xtel, want in prometheus_test.families(done):
        out.append((nixl[0], agent, nixl[1], prometheus_test.nixl_value(want)))
        out.append((xtel[0], agent, xtel[1], prometheus_test.xtel_value(want)))
    return out


def ring_positions(path):
    with open(path, 'rb') as f:
        write_pos, read_pos = struct.unpack('<QQ', f.read(16))
    return write_pos, read_pos


def scrape(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return harness.samples(r.read().decode())


def refused(s, reason, kind='nixl_ring'):
    """xtel_exporter_files_refused_total{kind, reason}; None when not served."""
    want = {('kind', kind), ('reason', reason)}
    return next((v for (n, ls), v in s.items()
                 if n == 'xtel_exporter_files_refused_total' and want <= ls), None)


def refusals_judged(s, lines, want, files, kind, said_of):
    """What is wrong with the refusals of hostile copies: `want` (reason -> count) against the
    counts of `kind` in samples `s`; for each of `files` (name -> reason, None for the intact
    copy) one log line of `lines` (`said_of(line, name)` picks a file's) saying the reason, or
    none for the intact copy; and nothing of a refused copy served."""
    problems = []
    for reason, count in sorted(want.items()):
        if refused(s, reason, kind) != count:
            problems.append(f'refused for {reason}: {refused(s, reason, kind)}, expected {count}')
    for name, reason in files.items():
        said = [l for l in lines if said_of(l, name)]
        if reason is None:
            if said:
                problems.append(f'the intact copy was refused: {said}')
            continue
        if len(said) != 1 or f'({reason})' not in said[0]:
            problems.append(f'expected one line refusing {name} ({reason}), got {said}')
        served = [n for (n, ls) in s if ('agent_name', name) in ls]
        if served:
            problems.append(f'{name}, refused, is served: {sorted(set(served))}')
    return problems


def real_rings(args, python, driver, work, log):
    """Part 1; returns the problems and the initiator's ring as the agents left it."""
    problems = []
    ring_dir = os.path.join(work, 'rings')
    node_dir = os.path.join(work, 'node')
    os.mkdir(ring_dir)
    os.mkdir(node_dir)
    agents, done = harness.start_agents(python, driver, ring_dir, log, exporter=None,
                                        extra={'NIXL_TELEMETRY_DIR': ring_dir})
    exporter, url = start_exporter(args, node_dir, ring_dir, log)
    try:
        wrong = harness.scrape_until(url, rows(done))
        for name, agent, labels, want, got in wrong:
            problems.append(f'{name}{labels} of {agent} from its NIXL ring is {got}, expected '
                            f'{want}')
        s = scrape(url)
        for reason in ('foreign_owner', 'not_regular', 'too_large', 'unreadable',
                       'not_nixl_file', 'damaged'):
            if refused(s, reason) != 0:
                problems.append(f'a real NIXL ring was refused ({reason}: {refused(s, reason)})')
        for agent in (done['initiator'], done['target']):
            write_pos, read_pos = ring_positions(os.path.join(ring_dir, agent))
            if write_pos == 0 or read_pos != write_pos:
                problems.append(f'the ring of {agent} was not drained: write position '
                                f'{write_pos}, read position {read_pos}')
        # Copied while the agents live: as they end they deregister their memory, and whether
        # NIXL flushes that event into the ring before the process exits is a race.
        with open(os.path.join(ring_dir, done['initiator']), 'rb') as f:
            initiator_ring = f.read()
    finally:
        stop(exporter)
        rc = harness.end_agents(agents)
    if rc != 0:
        problems.append(f'the agents\' process ended with exit status {rc}')
    return problems, done, initiator_ring


def hostile_files(ring, hostile_dir):
    """Writes the hostile copies of `ring`; returns {name: the reason it must be refused for,
    or None: served}."""
    def put(name, data):
        with open(os.path.join(hostile_dir, name), 'wb') as f:
            f.write(data)

    whole = bytearray(ring)
    struct.pack_into('<Q', whole, 8, 0)  # read again from the first event
    put('copy', whole)
    put('truncated', whole[:-EVENT])
    bad_version = bytearray(whole)
    struct.pack_into('<ii', bad_version, 16, 99, 99)
    put('bad-version', bad_version)
    claim = bytearray(whole)
    struct.pack_into('<QQ', claim, 24, 1 << 40, (1 << 40) - 1)
    put('oversized-claim', claim)
    with open(os.path.join(hostile_dir, 'too-large'), 'wb') as f:
        f.truncate(HEADER + EVENT * (1 << 20) + 1)  # sparse: past the largest ring read
    os.symlink('copy', os.path.join(hostile_dir, 'link'))
    os.mkfifo(os.path.join(hostile_dir, 'fifo'))
    out = {'copy': None, 'truncated': 'damaged', 'bad-version': 'not_nixl_file',
           'oversized-claim': 'not_nixl_file', 'too-large': 'too_large', 'link': 'not_regular',
           'fifo': 'not_regular'}
    if os.geteuid() == 0:
        put('foreign', whole)
        os.chown(os.path.join(hostile_dir, 'foreign'), NOBODY, NOBODY)
        out['foreign'] = 'foreign_owner'
    else:
        print('note: not root, so no ring of another uid (chown needs root): foreign_owner is '
              'not checked')
    return out


def hostile(args, done, ring, work, log_path):
    """Part 2."""
    problems = []
    hostile_dir = os.path.join(work, 'hostile')
    node_dir = os.path.join(work, 'hostile-node')
    os.mkdir(hostile_dir)
    os.mkdir(node_dir)
    files = hostile_files(ring, hostile_dir)
    want = {}
    for reason in files.values():
        if reason:
            want[reason] = want.get(reason, 0) + 1
    ini = done['initiator']
    copy_rows = [(n, 'copy', l, v) for n, a, l, v in rows(done) if a == ini]
    with open(log_path, 'w+') as log:
        exporter, url = start_exporter(args, node_dir, hostile_dir, log)
        try:
            problems += [f'{n}{l} of the copy is {got}, expected {w}'
                         for n, _, l, w, got in harness.scrape_until(url, copy_rows)]
            for _ in range(3):  # more looks: still once each
                time.sleep(0.3)
                s = scrape(url)
        finally:
            stop(exporter)
        log.seek(0)
        lines = log.read().splitlines()
    problems += refusals_judged(s, lines, want, files, 'nixl_ring',
                                lambda line, name: 'NIXL ring' in line and f'/{name} refused' in line)
    return problems, files


def main():
    args, python, started = harness.prepare()
    driver = os.path.join(args.source_dir, 'tests', 'nixl', 'nixl_agents.py')
    with tempfile.TemporaryDirectory(prefix='xtel-nixl-files-') as work:
        os.chmod(work, 0o755)  # the foreign copy's directory is listed by its reader
        log_path = os.path.join(work, 'real.log')
        with open(log_path, 'w+') as log:
            problems, done, ring = real_rings(args, python, driver, work, log)
            if problems:
                log.seek(0)
                print(log.read())
        hostile_log = os.path.join(work, 'hostile.log')
        more, files = hostile(args, done, ring, work, hostile_log)
        if more:
            with open(hostile_log) as f:
                print(f.read())
        problems += more
    for line in problems:
        print(f'FAIL: {line}')
    if problems:
        return 1
    print(f'real NIXL BUFFER rings: xtel-exporter served {done["tx_requests"]} WRITEs and '
          f'{done["rx_requests"]} READs of the two agents exactly, under NIXL\'s names and '
          f'xtel\'s, and drained them; {len(files) - 1} hostile copies ({", ".join(sorted(files))}'
          f' less the intact copy) each refused once and not served '
          f'({time.monotonic() - started:.1f} s)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
