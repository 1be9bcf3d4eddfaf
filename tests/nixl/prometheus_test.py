#!/usr/bin/env python3
"""xtel's NIXL plug-in side by side with NIXL's own Prometheus exporter (docs/nixl.md).

The two-agent scenario of tests/nixl/plugin_test.py runs twice in the real NIXL of the test's
virtual environment: once with NIXL_TELEMETRY_EXPORTER=xtel, served by xtel-exporter, once with
NIXL_TELEMETRY_EXPORTER=prometheus, NIXL's exporter from the same wheel, whose own port
(NIXL_TELEMETRY_PROMETHEUS_PORT) is scraped. Family by family (bytes and requests by direction,
both histograms' counts, the memory each agent registered, the failure by its kind, the dropped
events), NIXL's value, xtel's value under NIXL's name and xtel's value under its own name must
each equal what the agents moved: the table in docs/nixl.md, checked.

Arguments as plugin_test.py's. Prints what failed and exits 1, or a summary and exits 0.
"""
import os
import subprocess
import sys
import tempfile
import time

import plugin_test as harness


def families(done):
    """(what, agent, NIXL's family and labels, xtel's own family and labels, the value moved).
    NIXL's family is also xtel's name for it under NIXL_TELEMETRY_METRIC_SET=nixl or both.
    None: no series (xtel's transfer families have one only for what was transferred)."""
    ini, tgt = done['initiator'], done['target']
    timed = done['tx_requests'] + done['rx_requests']
    return [
        ('bytes written', ini, ('agent_tx_bytes_total', {}),
         ('xtel_transfer_bytes_total', {'direction': 'tx'}), done['tx_bytes']),
        ('bytes read', ini, ('agent_rx_bytes_total', {}),
         ('xtel_transfer_bytes_total', {'direction': 'rx'}), done['rx_bytes']),
        ('writes', ini, ('agent_tx_requests_num_total', {}),
         ('xtel_transfer_requests_total', {'direction': 'tx'}), done['tx_requests']),
        ('reads', ini, ('agent_rx_requests_num_total', {}),
         ('xtel_transfer_requests_total', {'direction': 'rx'}), done['rx_requests']),
        ('transfers timed', ini, ('agent_xfer_time_us_count', {}),
         ('xtel_transfer_duration_seconds_count', {}), timed),
        ('posts timed', ini, ('agent_xfer_post_time_us_count', {}),
         ('xtel_transfer_post_duration_seconds_count', {}), timed),
        ('initiator memory registered', ini, ('agent_memory_registered_total', {}),
         ('xtel_memory_registered_bytes', {}), done['initiator_registered']),
        ('target memory registered', tgt, ('agent_memory_registered_total', {}),
         ('xtel_memory_registered_bytes', {}), done['target_registered']),
        ('the refused WRITE', ini, ('agent_errors_total', {'status': 'not_found'}),
         ('xtel_errors_total', {'kind': 'not_found'}), done['failed_not_found']),
        ('events dropped', ini, ('agent_telemetry_events_dropped_total', {}),
         ('xtel_telemetry_events_dropped_total', {}), 0),
        # The target initiated nothing: both exporters count on the initiator only.
        ('target bytes written', tgt, ('agent_tx_bytes_total', {}),
         ('xtel_transfer_bytes_total', {'direction': 'tx'}), (0, None)),
    ]


def nixl_value(want):
    return want[0] if isinstance(want, tuple) else want


def xtel_value(want):
    return want[1] if isinstance(want, tuple) else want


def run_once(python, driver, log, extra, serve):
    """Runs the scenario with `extra` in the agents' environment; `serve(node_dir)` starts what
    serves it and returns (its /metrics address, the process to stop or None). Returns what the
    agents did and the problems' rows as harness.scrape_until gives them."""
    with tempfile.TemporaryDirectory(prefix='xtel-nixl-') as node_dir:
        agents, done = harness.start_agents(python, driver, node_dir, log, extra)
        url, server = serve(node_dir)
        try:
            rows = [(name, agent, labels, nixl_value(want))
                    for _, agent, (name, labels), _, want in families(done)]
            if server is not None:  # xtel: NIXL's names and xtel's own, from one scrape
                rows += [(name, agent, labels, xtel_value(want))
                         for _, agent, _, (name, labels), want in families(done)]
            wrong = harness.scrape_until(url, rows)
        finally:
            if server is not None:
                server.terminate()
                server.wait(timeout=10)
            rc = harness.end_agents(agents)
    if rc != 0:
        wrong.append(('exit status', '', {}, 0, rc))
    return done, wrong


def main():
    args, python, started = harness.prepare()
    driver = os.path.join(args.source_dir, 'tests', 'nixl', 'nixl_agents.py')

    def xtel_exporter(node_dir):
        port = harness.free_port()
        server = subprocess.Popen([args.exporter, '--dir', node_dir, '--listen',
                                   f'127.0.0.1:{port}'], stdout=log, stderr=log)
        return f'http://127.0.0.1:{port}/metrics', server

    nixl_port = harness.free_port()
    problems = []
    with tempfile.TemporaryFile('w+') as log:
        for who, extra, serve in (
                ('xtel', {}, xtel_exporter),
                ('NIXL\'s prometheus exporter',
                 {'NIXL_TELEMETRY_EXPORTER': 'prometheus',
                  'NIXL_TELEMETRY_PROMETHEUS_PORT': str(nixl_port),
                  'NIXL_TELEMETRY_PROMETHEUS_LOCAL': 'y'},
                 lambda _: (f'http://127.0.0.1:{nixl_port}/metrics', None))):
            done, wrong = run_once(python, driver, log, extra, serve)
            for name, agent, labels, want, got in wrong:
                problems.append(f'{who}: {name}{{agent_name="{agent}", {labels}}} is {got}, '
                                f'expected {want}')
        if problems:
            log.seek(0)
            print(log.read())
    for line in problems:
        print(f'FAIL: {line}')
    if problems:
        return 1
    print(f'xtel through xtel-exporter and NIXL\'s prometheus exporter on its port served the '
          f'same {len(families(done))} values, family by family, each what the agents moved '
          f'({time.monotonic() - started:.1f} s)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
