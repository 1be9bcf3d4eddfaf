#!/usr/bin/env python3
"""xtel-exporter absent while real NIXL agents transfer, then started, killed and restarted
(docs/nixl.md).

The agents (tests/nixl/nixl_agents.py, NIXL_TELEMETRY_EXPORTER=xtel) make every transfer with
no xtel-exporter running: nothing waits for one. Then one starts over their node directory and
must serve their totals so far, exactly (plugin_test.py's rows: bytes and requests by
direction, both histograms' counts, memory registered, the failure by its kind). Then it is
killed (SIGKILL: no goodbye) and another started on the same port: the same totals, exactly,
so nothing was counted twice and nothing lost, the agents untouched all along.

Arguments as plugin_test.py's. Prints what failed and exits 1, or a summary and exits 0.
"""
import os
import subprocess
import sys
import tempfile
import time

import plugin_test as harness


def start_exporter(exporter, node_dir, port, log):
    return subprocess.Popen([exporter, '--dir', node_dir, '--listen', f'127.0.0.1:{port}'],
                            stdout=log, stderr=log)


def served(url, done, who):
    """Problems of one exporter's /metrics against what the agents did."""
    wrong = harness.scrape_until(url, harness.expected(done))
    return [f'{who}: {name}{{agent_name="{agent}", {labels}}} is {got}, expected {want}'
            for name, agent, labels, want, got in wrong]


def main():
    args, python, started = harness.prepare()
    driver = os.path.join(args.source_dir, 'tests', 'nixl', 'nixl_agents.py')
    problems = []
    with tempfile.TemporaryDirectory(prefix='xtel-nixl-restart-') as node_dir, \
            tempfile.TemporaryFile('w+') as log:
        # Every transfer is made before any xtel-exporter exists.
        agents, done = harness.start_agents(python, driver, node_dir, log)
        port = harness.free_port()
        url = f'http://127.0.0.1:{port}/metrics'
        exporter = None
        try:
            exporter = start_exporter(args.exporter, node_dir, port, log)
            problems += served(url, done, 'the first xtel-exporter, started after the transfers')
            exporter.kill()
            exporter.wait(timeout=10)
            exporter = start_exporter(args.exporter, node_dir, port, log)
            problems += served(url, done, 'the second xtel-exporter, after the first was killed')
        finally:
            if exporter is not None:
                exporter.terminate()
                exporter.wait(timeout=10)
            rc = harness.end_agents(agents)
        if rc != 0:
            problems.append(f'the agents\' process ended with exit status {rc}')
        if problems:
            log.seek(0)
            print(log.read())
    for line in problems:
        print(f'FAIL: {line}')
    if problems:
        return 1
    print(f'real NIXL agents with no xtel-exporter: one started after their {harness.WRITES} '
          f'WRITEs and {harness.READS} READs served their totals exactly, and one restarted '
          f'after it was killed served the same ({time.monotonic() - started:.1f} s)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
