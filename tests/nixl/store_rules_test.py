#!/usr/bin/env python3
"""monitoring/'s recording rules over real NIXL agents served from NIXL's prometheus_mp stores
(--nixl-multiproc-dir), in a real Prometheus: tests/nixl/rules_test.py's set-up and checks, with
the agents' telemetry NIXL's own prometheus_mp exporter instead of xtel's plug-in.

The same two processes of real agents (tests/nixl/nixl_load.py: one decode agent WRITEs, with a
WRITE NIXL refuses every tenth round, one READs) keep their stores in one directory;
xtel-exporter reads it (in xtel's set alone, its default) and Prometheus evaluates
monitoring/rules with every range shortened. A store holds totals, not transfers: xtel's set has
no latency histogram from it. So, exactly:
- every recording rule answers but those NO_LATENCY lists, which read transfer time, and those
  rules_test's NEEDS_PEER lists, which must answer with none;
- every rule that keeps agent_name answers for the two decode agents (the initiators), those of
  an agent's health for all four; the errors rule names the refusal's kind, not_found; the error
  ratio reads 0 (rules_test's BLIND).
docs/nixl.md's "Rules and dashboards over NIXL agents" says the same.

Arguments: those of every NIXL test (tests/cmake/nixl.cmake) and --prometheus.
"""
import os
import sys
import tempfile
import time

import rules_test as base

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
import dashboards_test as dash  # noqa: E402  (tests/)
import plugin_test as harness  # noqa: E402

# Recording rules over transfer time: a store's agent has no xtel latency histogram (a store's
# one histogram does not tell a write's time from a read's).
NO_LATENCY = {
    'peer_operation:xtel_transfer_duration_seconds:p50_5m',
    'peer_operation:xtel_transfer_duration_seconds:p99_5m',
    'agent_peer_operation:xtel_transfer_duration_seconds:p99_5m',
    'peer_operation:xtel_transfer_timed:rate5m',
    'peer_operation:xtel_transfer_goodput_bytes_per_second:5m',
    'operation:xtel_transfer_slow:ratio_rate5m',
    'operation:xtel_transfer_slow:ratio_rate30m',
    'operation:xtel_transfer_slow:ratio_rate1h',
    'operation:xtel_transfer_slow:ratio_rate6h',
    'peer_operation:xtel_transfer_duration_seconds:p99_5m_eligible',
    'peer_operation:xtel_transfer_goodput_bytes_per_second:5m_eligible',
}


def check_rules(prom, source_dir, problems):
    absent = dict(base.NEEDS_PEER, **{r: 'transfer time, which a store does not tell apart by '
                                         'operation' for r in NO_LATENCY})
    base.check_rules(prom, source_dir, problems, absent, over='NIXL stores')


def main():
    args, python, started = harness.prepare(extra=('--prometheus',))
    problems, procs = [], []
    with tempfile.TemporaryDirectory(prefix='xtel-nixl-store-rules-') as work:
        stores, empty = os.path.join(work, 'stores'), os.path.join(work, 'empty')
        os.mkdir(stores, 0o700)  # NIXL refuses a directory others may write to
        os.mkdir(empty)
        log = open(os.path.join(work, 'processes.log'), 'w+')
        env = harness.agent_env(empty, {'NIXL_TELEMETRY_MULTIPROC_DIR': stores,
                                        'NIXL_TELEMETRY_PROMETHEUS_PORT': str(dash.free_port()),
                                        'NIXL_TELEMETRY_PROMETHEUS_LOCAL': 'y'},
                                exporter='prometheus_mp')
        try:
            procs += base.start_loads(python, args.source_dir, env, log)
            exporter_port = dash.free_port()
            procs.append(dash.start([args.exporter, '--dir', empty, '--nixl-multiproc-dir', stores,
                                     '--listen', f'127.0.0.1:{exporter_port}'], log))
            prom_proc, prom = base.start_prometheus(args.prometheus, work, exporter_port,
                                                    args.source_dir, log)
            procs.append(prom_proc)
            # The last rules of the chains a store feeds: once these answer, those before them
            # have data.
            ready = dash.wait_for(prom, ['agent_kind:xtel_errors:rate5m > 0',
                                         'agent:xtel_telemetry_loss:ratio_rate5m',
                                         'agent_operation:xtel_transfer_requests:rate1m'],
                                  time.time() + base.SETTLE_S)
            if not ready:
                problems.append(f'the rules had no data after {base.SETTLE_S} s')
            time.sleep(1.1)  # one more evaluation: a rule that would answer has
            check_rules(prom, args.source_dir, problems)
        finally:
            base.finish(procs, log, problems)
    return base.verdict(
        problems, f'monitoring/rules over real NIXL agents\' prometheus_mp stores: every '
                  f'recording rule but the {len(NO_LATENCY)} over transfer time and the '
                  f'{len(base.NEEDS_PEER)} that compare peers answers '
                  f'({time.monotonic() - started:.1f} s)')


if __name__ == '__main__':
    sys.exit(main())
