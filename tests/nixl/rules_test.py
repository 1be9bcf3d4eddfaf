#!/usr/bin/env python3
"""monitoring/rules over real NIXL agents served through xtel's plug-in (docs/nixl.md, "The
monitoring rules over NIXL").

Two real NIXL agents (tests/nixl/nixl_agents.py) move their bytes with NIXL_TELEMETRY_EXPORTER=xtel;
xtel-exporter serves them, and a real Prometheus scrapes it every second and evaluates every
rule of monitoring/rules/*.rules.yaml, unchanged but for their ranges, shortened to RULE_RANGE
(tests/dashboards_test.py's rule_text) so that they have data within the test. Then each rule is
classified by what its expression reads (its series names: xtel_* families, `up`, and the
recording rules' names):

- works: every series it reads has data for the NIXL agents;
- needs a peer: it joins or groups by remote_agent, and NIXL's events name no peer, so every
  series it reads has remote_agent="unknown" alone (one "peer": a straggler, which is a peer
  slower than the others, cannot be told);
- no data: a series it reads has none here, named (a state NIXL agents did not reach in the
  test, or a family NIXL's events cannot fill);

and, for a recording rule, whether it recorded series. The classification must be EXPECTED's,
the table docs/nixl.md gives.

Arguments as tests/nixl/plugin_test.py's, and --prometheus. Prints the table and what failed and
exits 1, or the table and a summary and exits 0.
"""
import argparse
import os
import re
import sys
import tempfile
import time

import yaml

import plugin_test as harness

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
import dashboards_test as dash  # noqa: E402 (tests/, beside this directory)

RULE_RANGE = '3s'  # three scrapes: a rate has two samples
SETTLE_S = 30

WORKS, PEER = 'works', 'needs a peer'


def no_data(*names):
    return 'no data: ' + ', '.join(names)


# What each rule is over NIXL agents (docs/nixl.md's table). A recording rule's second field:
# whether it records series.
EXPECTED = {
    'agent_operation:xtel_transfer_bytes:rate1m': (WORKS, True),
    'peer_operation:xtel_transfer_bytes:rate1m': (PEER, True),
    'agent_peer_operation:xtel_transfer_bytes:rate1m': (PEER, True),
    'agent_operation:xtel_transfer_requests:rate1m': (WORKS, True),
    'peer_operation:xtel_transfer_duration_seconds:p50_5m': (PEER, True),
    'peer_operation:xtel_transfer_duration_seconds:p99_5m': (PEER, True),
    'agent_peer_operation:xtel_transfer_duration_seconds:p99_5m': (PEER, True),
    'peer_operation:xtel_transfer_timed:rate5m': (PEER, True),
    'peer_operation:xtel_transfer_goodput_bytes_per_second:5m': (PEER, True),
    'agent:xtel_transfer_errors:ratio_rate5m': (WORKS, True),
    'agent_kind:xtel_errors:rate5m': (WORKS, True),
    'agent:xtel_telemetry_loss:ratio_rate5m': (WORKS, True),
    'operation:xtel_transfer_slow:ratio_rate5m': (WORKS, True),
    'operation:xtel_transfer_slow:ratio_rate30m': (WORKS, True),
    'operation:xtel_transfer_slow:ratio_rate1h': (WORKS, True),
    'operation:xtel_transfer_slow:ratio_rate6h': (WORKS, True),
    'peer_operation:xtel_transfer_duration_seconds:p99_5m_eligible': (PEER, False),
    'peer_operation:xtel_transfer_goodput_bytes_per_second:5m_eligible': (PEER, False),
    'peer_operation:xtel_transfer_duration_p99:straggler_ratio': (PEER, False),
    'peer_operation:xtel_transfer_goodput:straggler_ratio': (PEER, False),
    'peer_operation:xtel_transfer:straggler': (PEER, False),
    'XtelExporterDown': (WORKS, None),
    'XtelExporterNotScraped': (WORKS, None),
    'XtelExporterAbsent': (WORKS, None),
    'XtelExporterRefusesFiles': (WORKS, None),
    # No --remote-write here: its families are served with it, whatever the agents.
    'XtelExporterRemoteWriteLosing': (no_data('xtel_exporter_remote_write_requests_dropped_total',
                                              'xtel_exporter_remote_write_requests_rejected_total'),
                                      None),
    'XtelAgentDied': (WORKS, None),
    # Served for an agent that cannot publish its node file: none here.
    'XtelAgentCouldNotPublish': (no_data('xtel_exporter_agent_unpublished'), None),
    'XtelAgentExporterOff': (WORKS, None),
    'XtelTelemetryDropping': (WORKS, None),
    'XtelExporterLosingEvents': (WORKS, None),
    # Evaluates, and counts no NIXL failure (failures_counted).
    'XtelTransferErrorRatioHigh': (WORKS, None),
    'XtelTransferLatencyBudgetBurn': (WORKS, None),
    'XtelStragglerPeer': (PEER, None),
}


def rules(source_dir):
    """(file, name, expr, is a recording rule) of every rule."""
    out = []
    for f in sorted(os.listdir(os.path.join(source_dir, 'monitoring', 'rules'))):
        if not f.endswith('.rules.yaml'):
            continue
        with open(os.path.join(source_dir, 'monitoring', 'rules', f)) as y:
            for group in yaml.safe_load(y)['groups']:
                for r in group['rules']:
                    out.append((f, r.get('record') or r['alert'], r['expr'], 'record' in r))
    return out


def read_names(expr):
    """The series names `expr` reads: xtel_* families, up, and recording rules' names."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # no label values
    return sorted({t for t in re.findall(r'[a-zA-Z_:][a-zA-Z0-9_:]*', expr)
                   if t.startswith('xtel_') or ':' in t or t == 'up'})


def peers(prom, name):
    """The remote_agent values of `name`'s series (None for a series without one); None when it
    has no series."""
    answer = prom.query(f'count by (remote_agent) ({{__name__="{name}"}})')
    result = (answer.get('data') or {}).get('result') or []
    if not result:
        return None
    return {s['metric'].get('remote_agent') for s in result}


def classify(prom, name, expr, record, found):
    """`name`'s verdict and, for a recording rule, whether it recorded series; `found`: the
    verdicts of the rules before it, a rule that reads one needing a peer needing one too."""
    reads = {n: peers(prom, n) for n in read_names(expr)}
    missing = [n for n, p in reads.items() if p is None]
    if any(found.get(n, (None,))[0] == PEER for n in reads):
        verdict = PEER
    elif missing:
        verdict = no_data(*missing)
    elif 'remote_agent' in expr and all(p <= {'unknown', None} for p in reads.values()) and \
            any('unknown' in p for p in reads.values()):
        verdict = PEER
    else:
        verdict = WORKS
    return verdict, (peers(prom, name) is not None) if record else None


def failures_counted(prom):
    """NIXL's failed transfer (the WRITE it refused) is an error event, not a transfer: counted
    by kind, and in no transfer series, so the transfer error ratio stays 0 for NIXL agents."""
    out = []
    kinds = prom.query('sum(xtel_errors_total{kind="not_found"})')['data']['result']
    if [float(k['value'][1]) for k in kinds] != [1.0]:
        out.append(f'xtel_errors_total{{kind="not_found"}} is {kinds}, expected 1')
    failed = prom.query('xtel_transfer_requests_total{status!="success"}')['data']['result']
    if failed:
        out.append(f'NIXL\'s refused WRITE became a failed transfer: {failed}')
    return out


def serve(args, python, driver, work, log):
    """xtel-exporter, Prometheus and the agents, started (Prometheus and the agents' NIXL take
    seconds to start: side by side); returns (the processes, the agents' first, Prometheus)."""
    node_dir = os.path.join(work, 'node')
    os.mkdir(node_dir)
    exporter_port, prom_port = harness.free_port(), harness.free_port()
    procs = [dash.start([args.exporter, '--dir', node_dir, '--listen',
                         f'127.0.0.1:{exporter_port}'], log)]
    dash.RULE_RANGE = RULE_RANGE
    short = []
    for f, *_ in {r[0]: r for r in rules(args.source_dir)}.values():
        with open(os.path.join(args.source_dir, 'monitoring', 'rules', f)) as src, \
                open(os.path.join(work, f), 'w') as dst:
            dst.write(dash.rule_text(src.read()))
        short.append(os.path.join(work, f))
    config = os.path.join(work, 'prometheus.yml')
    with open(config, 'w') as c:
        c.write('global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n'
                'rule_files:\n' + ''.join(f"  - '{r}'\n" for r in short) +
                "scrape_configs:\n  - job_name: 'xtel-exporter'\n    static_configs:\n"
                f"      - targets: ['127.0.0.1:{exporter_port}']\n")
    procs.append(dash.start([args.prometheus, f'--config.file={config}',
                             f'--storage.tsdb.path={os.path.join(work, "data")}',
                             f'--web.listen-address=127.0.0.1:{prom_port}', '--log.level=warn'],
                            log))
    agents, _ = harness.start_agents(python, driver, node_dir, log)
    return [agents] + procs, dash.Prometheus(f'127.0.0.1:{prom_port}')


def main():
    p = argparse.ArgumentParser()
    for a in ('--source-dir', '--venv', '--plugin', '--exporter', '--prometheus'):
        p.add_argument(a, required=True)
    args = p.parse_args()
    started = time.monotonic()
    python = harness.install(args.source_dir, args.venv)
    harness.link_plugin(python, args.plugin)
    driver = os.path.join(args.source_dir, 'tests', 'nixl', 'nixl_agents.py')
    problems = []
    with tempfile.TemporaryDirectory(prefix='xtel-nixl-rules-') as work:
        log_path = os.path.join(work, 'processes.log')
        with open(log_path, 'w') as log:
            procs, prom = serve(args, python, driver, work, log)
            try:
                # The chain's rules record once those they read did: the last inputs, then one
                # more evaluation.
                if not dash.wait_for(prom, ['agent:xtel_telemetry_loss:ratio_rate5m',
                                            'peer_operation:xtel_transfer_goodput_bytes_per_second:5m',
                                            'operation:xtel_transfer_slow:ratio_rate6h'],
                                     time.time() + SETTLE_S):
                    problems.append(f'the rules had no data after {SETTLE_S} s')
                time.sleep(1.1)  # one more evaluation
                found = {}
                # The recording rules first: the alerts read them.
                for _, name, expr, record in sorted(rules(args.source_dir), key=lambda r: not r[3]):
                    found[name] = classify(prom, name, expr, record, found)
                problems += failures_counted(prom)
            finally:
                harness.end_agents(procs[0])
                dash.stop(procs[1:])
        if problems:
            with open(log_path) as f:
                print(f.read()[-4000:])
    for name, (verdict, recorded) in found.items():
        shown = '' if recorded is None else ('  (records series)' if recorded else
                                              '  (records nothing)')
        print(f'{name}: {verdict}{shown}')
        want = EXPECTED.get(name)
        if want is None:
            problems.append(f'{name} is a rule EXPECTED (and docs/nixl.md) does not list')
        elif (verdict, recorded) != want:
            problems.append(f'{name} is {verdict}, records {recorded}; expected {want[0]}, '
                            f'records {want[1]}')
    for line in problems:
        print(f'FAIL: {line}')
    if problems:
        return 1
    print(f'monitoring/rules over two real NIXL agents through xtel\'s plug-in: '
          f'{sum(v == WORKS for v, _ in found.values())} rules work, '
          f'{sum(v == PEER for v, _ in found.values())} need a peer, '
          f'{sum(v.startswith("no data") for v, _ in found.values())} have no data here, as '
          f'docs/nixl.md says '
          f'({time.monotonic() - started:.1f} s)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
