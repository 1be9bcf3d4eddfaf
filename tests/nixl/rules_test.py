#!/usr/bin/env python3
"""monitoring/rules over real NIXL agents, served through xtel's plug-in and from NIXL's
prometheus_mp stores (docs/nixl.md, "The monitoring rules and dashboards over NIXL").

Two pairs of real NIXL agents (tests/nixl/nixl_agents.py) move their bytes, one with
NIXL_TELEMETRY_EXPORTER=xtel, one with prometheus_mp; an xtel-exporter serves each pair (the
node files, --nixl-multiproc-dir), and a real Prometheus scrapes both every second and evaluates
every rule of monitoring/rules/*.rules.yaml, unchanged but for their ranges, shortened to
RULE_RANGE (tests/dashboards_test.py's rule_text) so that they have data within the test. Then
each rule is classified, over each exporter's instance, by what its expression reads (its series
names: xtel_* families, `up`, and the recording rules' names):

- works: every series it reads has data for the NIXL agents;
- needs a peer: it joins or groups by remote_agent, and NIXL's events name no peer, so every
  series it reads has remote_agent="unknown" alone (one "peer": a straggler, which is a peer
  slower than the others, cannot be told);
- no data: a series it reads has none here, named (a state NIXL agents did not reach in the
  test, or a family NIXL's events cannot fill);

and, for a recording rule, whether it recorded series. The classifications must be PLUGIN's and
STORE's, the tables docs/nixl.md gives.

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


# What each rule is over NIXL agents through xtel's plug-in (docs/nixl.md's table). A recording
# rule's second field: whether it records series.
PLUGIN = {
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

# Over NIXL agents whose prometheus_mp stores xtel-exporter reads: as through the plug-in, but
# for what reads xtel's latency histograms (a store has none: the straggler chain has nothing to
# rank before it has no peer to) or what only an agent of a node file has (its writer's state,
# its pipeline's exporters).
BUCKET, COUNT, SUM = ('xtel_transfer_duration_seconds_bucket',
                      'xtel_transfer_duration_seconds_count', 'xtel_transfer_duration_seconds_sum')
P99, GOODPUT = ('peer_operation:xtel_transfer_duration_seconds:p99_5m',
                'peer_operation:xtel_transfer_goodput_bytes_per_second:5m')
STORE = {
    **PLUGIN,
    'peer_operation:xtel_transfer_duration_seconds:p50_5m': (no_data(BUCKET), False),
    P99: (no_data(BUCKET), False),
    'agent_peer_operation:xtel_transfer_duration_seconds:p99_5m': (no_data(BUCKET), False),
    'peer_operation:xtel_transfer_timed:rate5m': (no_data(COUNT), False),
    GOODPUT: (no_data(COUNT, SUM), False),
    **{f'operation:xtel_transfer_slow:ratio_rate{w}': (no_data(BUCKET, COUNT), False)
       for w in ('5m', '30m', '1h', '6h')},
    P99 + '_eligible': (no_data(P99, COUNT), False),
    GOODPUT + '_eligible': (no_data(GOODPUT, COUNT), False),
    'peer_operation:xtel_transfer_duration_p99:straggler_ratio': (no_data(P99 + '_eligible'),
                                                                  False),
    'peer_operation:xtel_transfer_goodput:straggler_ratio': (no_data(GOODPUT + '_eligible'),
                                                             False),
    'peer_operation:xtel_transfer:straggler': (
        no_data('peer_operation:xtel_transfer_duration_p99:straggler_ratio', P99 + '_eligible',
                'peer_operation:xtel_transfer_goodput:straggler_ratio'), False),
    'XtelAgentDied': (no_data('xtel_exporter_agent_state'), None),
    'XtelAgentExporterOff': (no_data('xtel_telemetry_exporter_up'), None),
    'XtelExporterLosingEvents': (no_data('xtel_telemetry_exporter_events_lost_total'), None),
    'XtelTransferLatencyBudgetBurn': (no_data('operation:xtel_transfer_slow:ratio_rate30m',
                                              'operation:xtel_transfer_slow:ratio_rate6h'), None),
    'XtelStragglerPeer': (no_data('peer_operation:xtel_transfer:straggler'), None),
}

EXPECTED = {'plugin': PLUGIN, 'store': STORE}


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


def peers(prom, name, instance):
    """The remote_agent values of `name`'s series of `instance` (None for a series without
    one); None when it has no series."""
    answer = prom.query(f'count by (remote_agent) ({{__name__="{name}", instance="{instance}"}})')
    result = (answer.get('data') or {}).get('result') or []
    if not result:
        return None
    return {s['metric'].get('remote_agent') for s in result}


def classify(prom, instance, name, expr, record, found):
    """`name`'s verdict over `instance` and, for a recording rule, whether it recorded series
    there; `found`: the verdicts of the rules before it, a rule that reads one needing a peer
    needing one too."""
    reads = {n: peers(prom, n, instance) for n in read_names(expr)}
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
    return verdict, (peers(prom, name, instance) is not None) if record else None


def failures_counted(prom, instance):
    """NIXL's failed transfer (the WRITE it refused) is an error event, not a transfer: counted
    by kind, and in no transfer series, so the transfer error ratio stays 0 for NIXL agents."""
    out = []
    at = f'instance="{instance}"'
    kinds = prom.query(f'sum(xtel_errors_total{{kind="not_found", {at}}})')['data']['result']
    if [float(k['value'][1]) for k in kinds] != [1.0]:
        out.append(f'{instance}: xtel_errors_total{{kind="not_found"}} is {kinds}, expected 1')
    failed = prom.query(f'xtel_transfer_requests_total{{status!="success", {at}}}')
    if failed['data']['result']:
        out.append(f'{instance}: NIXL\'s refused WRITE became a failed transfer: {failed}')
    return out


def short_rules(source_dir, work):
    """The rule files with their ranges shortened, written into `work`."""
    dash.RULE_RANGE = RULE_RANGE
    short = []
    for f in sorted({r[0] for r in rules(source_dir)}):
        with open(os.path.join(source_dir, 'monitoring', 'rules', f)) as src, \
                open(os.path.join(work, f), 'w') as dst:
            dst.write(dash.rule_text(src.read()))
        short.append(os.path.join(work, f))
    return short


def serve(args, python, driver, work, log):
    """Two xtel-exporters (one over the plug-in's node files, one over prometheus_mp stores),
    Prometheus scraping both as job xtel-exporter, and two pairs of NIXL agents, one each
    (Prometheus and NIXL take seconds to start: side by side). Returns (the agents' processes,
    the others, Prometheus, {source: its instance})."""
    node_dir, store_dir, empty = (os.path.join(work, d) for d in ('node', 'stores', 'empty'))
    os.mkdir(node_dir)
    os.mkdir(store_dir, 0o700)  # NIXL refuses a directory others may write to
    os.mkdir(empty)
    ports = {'plugin': harness.free_port(), 'store': harness.free_port()}
    procs = [dash.start([args.exporter, '--dir', node_dir, '--listen',
                         f'127.0.0.1:{ports["plugin"]}'], log),
             dash.start([args.exporter, '--dir', empty, '--nixl-multiproc-dir', store_dir,
                         '--listen', f'127.0.0.1:{ports["store"]}'], log)]
    instances = {source: f'127.0.0.1:{port}' for source, port in ports.items()}
    prom_port = harness.free_port()
    config = os.path.join(work, 'prometheus.yml')
    with open(config, 'w') as c:
        c.write('global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n'
                'rule_files:\n' + ''.join(f"  - '{r}'\n" for r in short_rules(args.source_dir, work))
                + "scrape_configs:\n  - job_name: 'xtel-exporter'\n    static_configs:\n"
                f"      - targets: {list(instances.values())}\n")
    procs.append(dash.start([args.prometheus, f'--config.file={config}',
                             f'--storage.tsdb.path={os.path.join(work, "data")}',
                             f'--web.listen-address=127.0.0.1:{prom_port}', '--log.level=warn'],
                            log))
    agents = [harness.start_agents(python, driver, node_dir, log)[0],
              harness.start_agents(
                  python, driver, node_dir, log, names=('mp-initiator', 'mp-target'),
                  exporter='prometheus_mp',
                  extra={'NIXL_TELEMETRY_MULTIPROC_DIR': store_dir,
                         'NIXL_TELEMETRY_PROMETHEUS_PORT': str(harness.free_port()),
                         'NIXL_TELEMETRY_PROMETHEUS_LOCAL': 'y'})[0]]
    return agents, procs, dash.Prometheus(f'127.0.0.1:{prom_port}'), instances


def evaluate(args, python, driver, work, log):
    """{source: {rule: (verdict, recorded)}} and the problems found on the way."""
    problems = []
    agents, procs, prom, instances = serve(args, python, driver, work, log)
    try:
        # The chain's rules record once those they read did: the last inputs, then one more
        # evaluation.
        if not dash.wait_for(prom, [f'agent:xtel_telemetry_loss:ratio_rate5m{{instance="{i}"}}'
                                    for i in instances.values()] +
                             ['peer_operation:xtel_transfer_goodput_bytes_per_second:5m',
                              'operation:xtel_transfer_slow:ratio_rate6h'],
                             time.time() + SETTLE_S):
            problems.append(f'the rules had no data after {SETTLE_S} s')
        time.sleep(1.1)  # one more evaluation
        found = {}
        for source, instance in instances.items():
            found[source] = {}
            # The recording rules first: the alerts read them.
            for _, name, expr, record in sorted(rules(args.source_dir), key=lambda r: not r[3]):
                found[source][name] = classify(prom, instance, name, expr, record, found[source])
            problems += failures_counted(prom, instance)
    finally:
        for a in agents:
            harness.end_agents(a)
        dash.stop(procs)
    return found, problems


def main():
    p = argparse.ArgumentParser()
    for a in ('--source-dir', '--venv', '--plugin', '--exporter', '--prometheus'):
        p.add_argument(a, required=True)
    args = p.parse_args()
    started = time.monotonic()
    python = harness.install(args.source_dir, args.venv)
    harness.link_plugin(python, args.plugin)
    driver = os.path.join(args.source_dir, 'tests', 'nixl', 'nixl_agents.py')
    with tempfile.TemporaryDirectory(prefix='xtel-nixl-rules-') as work:
        log_path = os.path.join(work, 'processes.log')
        with open(log_path, 'w') as log:
            found, problems = evaluate(args, python, driver, work, log)
        if problems:
            with open(log_path) as f:
                print(f.read()[-4000:])
    summary = []
    for source, table in found.items():
        for name, (verdict, recorded) in table.items():
            shown = '' if recorded is None else ('  (records series)' if recorded else
                                                  '  (records nothing)')
            print(f'{source}: {name}: {verdict}{shown}')
            want = EXPECTED[source].get(name)
            if want is None:
                problems.append(f'{name} is a rule EXPECTED (and docs/nixl.md) does not list')
            elif (verdict, recorded) != want:
                problems.append(f'{source}: {name} is {verdict}, records {recorded}; expected '
                                f'{want[0]}, records {want[1]}')
        verdicts = [v for v, _ in table.values()]
        summary.append(f'through {source}s {verdicts.count(WORKS)} rules work, '
                       f'{verdicts.count(PEER)} need a peer, '
                       f'{sum(v.startswith("no data") for v in verdicts)} have no data')
    for line in problems:
        print(f'FAIL: {line}')
    if problems:
        return 1
    print(f'monitoring/rules over real NIXL agents: {"; ".join(summary)}, as docs/nixl.md says '
          f'({time.monotonic() - started:.1f} s)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
