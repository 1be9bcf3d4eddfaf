#!/usr/bin/env python3
"""Four ranks of real NIXL agents on one node, served by one xtel-exporter port (docs/nixl.md).

Four processes, as a launcher starts the ranks of a node (RANK and LOCAL_RANK 0..3 in each
one's environment), each a pair of NIXL agents of its own names moving the scenario of
tests/nixl/plugin_test.py with NIXL_TELEMETRY_EXPORTER=xtel into one node directory. One
xtel-exporter serves them: each rank's series are its own (agent_name, pid, rank, local_rank)
and hold exactly what that rank moved, and their sum is what the four moved.

Then the same four with NIXL's own prometheus exporter told one port: its endpoint is the
process's, so the first rank to bind it is served there and the other three log that the port
is taken and are served nowhere. NIXL's exporter needs a port a rank.

Arguments as plugin_test.py's. Prints what failed and exits 1, or a summary and exits 0.
"""
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

import plugin_test as harness

RANKS = 4
TAKEN = 'could not be bound'  # NIXL's line for a port another process holds


def start_ranks(python, driver, node_dir, log, extra=None):
    """[(rank, process, what it did)] of RANKS agent processes started side by side."""
    ranks = []
    for rank in range(RANKS):
        env = {'RANK': str(rank), 'LOCAL_RANK': str(rank), **(extra or {})}
        process, done = harness.start_agents(python, driver, node_dir, log, env,
                                             names=(f'rank{rank}-initiator',
                                                    f'rank{rank}-target'))
        ranks.append((rank, process, done))
    return ranks


def end_ranks(ranks):
    return [harness.end_agents(process) for _, process, _ in ranks]


def rank_rows(rank, pid, done):
    """What xtel-exporter must serve of one rank, under its own labels."""
    labels = {'pid': str(pid), 'rank': str(rank), 'local_rank': str(rank)}
    return [(name, done['initiator'], labels, want) for name, want in (
        ('agent_tx_bytes_total', done['tx_bytes']),
        ('agent_rx_bytes_total', done['rx_bytes']),
        ('agent_tx_requests_num_total', done['tx_requests']),
        ('agent_rx_requests_num_total', done['rx_requests']),
        ('agent_xfer_time_us_count', done['tx_requests'] + done['rx_requests']),
        ('agent_memory_registered_total', done['initiator_registered']),
        ('agent_errors_total', done['failed_not_found']),
    )] + [('agent_memory_registered_total', done['target'], labels, done['target_registered'])]


def sums(url, ranks):
    """Problems of the four ranks' sums over every agent_name: exact, nothing else counted."""
    with urllib.request.urlopen(url, timeout=5) as r:
        s = harness.samples(r.read().decode())
    problems = []
    for name, key in (('agent_tx_bytes_total', 'tx_bytes'), ('agent_rx_bytes_total', 'rx_bytes'),
                      ('agent_tx_requests_num_total', 'tx_requests')):
        got = sum(v for (n, _), v in s.items() if n == name)
        want = sum(done[key] for _, _, done in ranks)
        if got != want:
            problems.append(f'the sum of {name} over every series is {got}, expected {want}')
    served = {dict(ls)['agent_name'] for (n, ls) in s if n == 'agent_tx_bytes_total'}
    if len(served) != 2 * RANKS:
        problems.append(f'expected {2 * RANKS} agents served, got {sorted(served)}')
    return problems


def one_port_for_xtel(args, python, driver, log):
    problems = []
    with tempfile.TemporaryDirectory(prefix='xtel-nixl-ranks-') as node_dir:
        ranks = start_ranks(python, driver, node_dir, log)
        port = harness.free_port()
        url = f'http://127.0.0.1:{port}/metrics'
        exporter = subprocess.Popen([args.exporter, '--dir', node_dir, '--listen',
                                     f'127.0.0.1:{port}'], stdout=log, stderr=log)
        try:
            rows = [row for rank, p, done in ranks for row in rank_rows(rank, p.pid, done)]
            wrong = harness.scrape_until(url, rows)
            problems += [f'{n}{{agent_name="{a}", {ls}}} is {got}, expected {want}'
                         for n, a, ls, want, got in wrong]
            problems += sums(url, ranks)
        finally:
            exporter.terminate()
            exporter.wait(timeout=10)
            rcs = end_ranks(ranks)
    if any(rcs):
        problems.append(f'the ranks\' processes ended with exit statuses {rcs}')
    return problems


def one_port_for_nixl(python, driver, log_path):
    """Problems unless NIXL's exporter serves exactly one rank of four told one port."""
    port = harness.free_port()
    url = f'http://127.0.0.1:{port}/metrics'
    with open(log_path, 'w+') as log, tempfile.TemporaryDirectory() as unused:
        ranks = start_ranks(python, driver, unused, log, {
            'NIXL_TELEMETRY_EXPORTER': 'prometheus',
            'NIXL_TELEMETRY_PROMETHEUS_PORT': str(port),
            'NIXL_TELEMETRY_PROMETHEUS_LOCAL': 'y'})
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                s = harness.samples(r.read().decode())
        finally:
            end_ranks(ranks)
        log.seek(0)
        taken = [line for line in log.read().splitlines() if TAKEN in line]
    served = sorted({dict(ls)['agent_name'] for (n, ls) in s if n == 'agent_tx_bytes_total'})
    problems = []
    if served != ['rank0-initiator', 'rank0-target']:
        problems.append(f'NIXL\'s exporter on one port: expected rank 0\'s agents alone, '
                        f'got {served}')
    # One line an agent: the two agents of each of the three later ranks.
    if len(taken) != 2 * (RANKS - 1):
        problems.append(f'expected {2 * (RANKS - 1)} lines saying "{TAKEN}", got {taken}')
    return problems


def main():
    args, python, started = harness.prepare()
    driver = os.path.join(args.source_dir, 'tests', 'nixl', 'nixl_agents.py')
    with tempfile.TemporaryDirectory(prefix='xtel-nixl-log-') as logs:
        with open(os.path.join(logs, 'xtel.log'), 'w+') as log:
            problems = one_port_for_xtel(args, python, driver, log)
            if problems:
                log.seek(0)
                print(log.read())
        problems += one_port_for_nixl(python, driver, os.path.join(logs, 'nixl.log'))
    for line in problems:
        print(f'FAIL: {line}')
    if problems:
        return 1
    print(f'{RANKS} ranks of real NIXL agents: one xtel-exporter port served each rank apart '
          f'and their sums exactly; NIXL\'s exporter told one port served one rank '
          f'({time.monotonic() - started:.1f} s)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
