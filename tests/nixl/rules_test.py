#!/usr/bin/env python3
"""monitoring/'s rules and dashboards over real NIXL agents that run xtel's plug-in, in a real
Prometheus: which of them work on what NIXL's events can tell, unchanged, and which need a peer.

Two processes of real agents (tests/nixl/nixl_load.py) over UCX on host memory, with
NIXL_TELEMETRY_EXPORTER=xtel: one decode agent WRITEs 64 KiB blocks to a prefill agent and every
tenth round asks for a WRITE NIXL refuses (not found); another READs from a second prefill agent.
xtel-exporter serves their node files; Prometheus 2.42 scrapes it every second and evaluates
monitoring/rules/*.rules.yaml every second with every range shortened as
tests/dashboards_test.py shortens them.

Then, exactly:
- every recording rule answers with series, except those NEEDS_PEER lists, which must answer
  with none: NIXL's events name no peer (every series reads remote_agent="unknown"), so a rule
  comparing a node's peers has one peer to compare;
- every recording rule that keeps agent_name answers for each of the two decode agents, which
  initiate every transfer (NIXL's events are the initiator's: the prefill agents move nothing of
  their own), and those of an agent's health (EVERY_AGENT) for all four; the errors rule names
  the refusal's kind, not_found; those BLIND lists read 0;
- every query of every dashboard panel (its variables at "All") answers with series, except
  those NIXL_EMPTY lists with the reason, which must answer with none.
docs/nixl.md's "Rules and dashboards" says the same lists.

Arguments: those of every NIXL test (tests/cmake/nixl.cmake) and --prometheus.
"""
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
import dashboards_test as dash  # noqa: E402  (tests/: the range shortening, the substitution)
import plugin_test as harness  # noqa: E402

SETTLE_S = 60

# Recording rules that need peers to compare, so none of theirs answers for NIXL's agents.
NEEDS_PEER = {
    'peer_operation:xtel_transfer_duration_p99:straggler_ratio':
        'the median of at least 3 peers per operation; a NIXL agent\'s are all "unknown"',
    'peer_operation:xtel_transfer_goodput:straggler_ratio': 'the same, for goodput',
    'peer_operation:xtel_transfer:straggler': 'the flag over the two ratios above',
}

# Recording rules that answer but cannot see what they are for over NIXL's events: they must
# read 0 for every agent.
BLIND = {
    'agent:xtel_transfer_errors:ratio_rate5m':
        'failed requests over requests; NIXL counts a failure as an error event of its kind, '
        'with no request and no operation, so no request of a NIXL agent fails',
}

# The agents nixl_load.py makes: the initiators, which make every transfer, and their targets.
INITIATORS = {'decode-w', 'decode-r'}
TARGETS = {'prefill-w', 'prefill-r'}

# Recording rules of an agent's health, not its transfers: every agent answers, targets too.
EVERY_AGENT = {'agent_kind:xtel_errors:rate5m', 'agent:xtel_telemetry_loss:ratio_rate5m'}

# (dashboard uid, panel title) -> why its query has no series over NIXL's agents.
NIXL_EMPTY = {
    ('xtel-node', 'Dead agents'): 'no agent dies in the test',
    ('xtel-fleet', 'Alerts firing'): 'no alert fires within the test',
    ('xtel-node', 'Stragglers'): 'the straggler flag needs peers (NEEDS_PEER)',
    ('xtel-fleet', 'Stragglers across nodes'): 'the straggler flag needs peers (NEEDS_PEER)',
    ('xtel-fleet', 'Stragglers'): 'the straggler flag needs peers (NEEDS_PEER)',
    ('xtel-node', "p99 over the node's median p99, per peer"): 'a straggler ratio (NEEDS_PEER)',
    ('xtel-node', "Median goodput over the peer's goodput"): 'a straggler ratio (NEEDS_PEER)',
}


def recording_rules(source_dir):
    names = []
    for f in sorted(glob.glob(os.path.join(source_dir, 'monitoring/rules/*.rules.yaml'))):
        with open(f) as src:
            names += [line.split('record:', 1)[1].strip() for line in src
                      if line.strip().startswith('- record:')]
    return names


def start_prometheus(prometheus, work, exporter_port, source_dir, log):
    rules = []
    for f in sorted(glob.glob(os.path.join(source_dir, 'monitoring/rules/*.rules.yaml'))):
        rules.append(os.path.join(work, os.path.basename(f)))
        with open(f) as src, open(rules[-1], 'w') as dst:
            dst.write(dash.rule_text(src.read()))
    config = os.path.join(work, 'prometheus.yml')
    with open(config, 'w') as c:
        json.dump({'global': {'scrape_interval': '1s', 'scrape_timeout': '1s',
                              'evaluation_interval': '1s'},
                   'rule_files': rules,
                   'scrape_configs': [{'job_name': 'xtel-exporter', 'static_configs': [
                       {'targets': [f'127.0.0.1:{exporter_port}']}]}]}, c)
    port = dash.free_port()
    proc = dash.start([prometheus, f'--config.file={config}',
                       f'--storage.tsdb.path={os.path.join(work, "data")}',
                       f'--web.listen-address=127.0.0.1:{port}', '--log.level=warn'], log)
    return proc, dash.Prometheus(f'127.0.0.1:{port}')


def series(prom, expr):
    return prom.query(expr).get('data', {}).get('result') or []


def check_rules(prom, source_dir, problems, absent=None, over='NIXL agents'):
    """Every recording rule answers over the agents, except those of `absent` (rule -> why;
    NEEDS_PEER by default), which must not; see the module's docstring for the rest."""
    absent = NEEDS_PEER if absent is None else absent
    for rule in recording_rules(source_dir):
        got = series(prom, rule)
        if rule in absent:
            if got:
                problems.append(f'{rule} answered over {over}, though listed as absent '
                                f'({absent[rule]}): {got[0]["metric"]}')
            continue
        if not got:
            problems.append(f'{rule} has no series over {over}')
            continue
        named = {s['metric'].get('agent_name') for s in got}
        want = INITIATORS | TARGETS if rule in EVERY_AGENT else INITIATORS
        if None not in named and named != want:
            problems.append(f'{rule} answers for agents {sorted(named)}, expected '
                            f'{sorted(want)}')
        if rule in BLIND and any(float(s['value'][1]) != 0 for s in got):
            problems.append(f'{rule} is not 0 over {over}, though listed as blind '
                            f'({BLIND[rule]}): {got}')
        print(f'ok   {rule}: {len(got)} series, e.g. {got[0]["metric"]} {got[0]["value"][1]}')
    kinds = {s['metric'].get('kind') for s in series(prom, 'agent_kind:xtel_errors:rate5m > 0')}
    if kinds != {'not_found'}:
        problems.append(f'agent_kind:xtel_errors:rate5m > 0 names kinds {kinds}, expected '
                        f'not_found alone')


def start_loads(python, source_dir, env, log):
    """The two processes of real agents (see the module's docstring), running for 300 s."""
    load = os.path.join(source_dir, 'tests', 'nixl', 'nixl_load.py')
    common = ['--size', '65536', '--rate', '50', '--seconds', '300']
    return [subprocess.Popen([python, load, *argv, *common], env=env, stdin=subprocess.PIPE,
                             stdout=log, stderr=subprocess.STDOUT)
            for argv in (['--initiator', 'decode-w', '--target', 'prefill-w', '--op', 'WRITE',
                          '--fail-every', '10'],
                         ['--initiator', 'decode-r', '--target', 'prefill-r', '--op', 'READ'])]


def finish(procs, log, problems):
    """Every process stopped; the last of their output shown when something failed."""
    if any(p.poll() is not None for p in procs):
        problems.append('an agents\' process, xtel-exporter or Prometheus ended early')
    dash.stop(procs)
    if problems:
        log.seek(0)
        print('---- processes\' output (last 40 lines)\n' + ''.join(log.readlines()[-40:]))
    log.close()


def verdict(problems, summary):
    """The exit status: 1 with each problem printed, else 0 with `summary`."""
    for line in problems:
        print(f'FAIL: {line}')
    if problems:
        return 1
    print(summary)
    return 0


def check_dashboards(prom, source_dir, problems):
    empty = set()
    for f in sorted(glob.glob(os.path.join(source_dir, 'monitoring/dashboards/*.json'))):
        with open(f) as src:
            d = json.load(src)
        for uid, p, t in dash.targets_of([(d['uid'], d)]):
            answer = prom.query(dash.substitute(t['expr'], dash.all_values(d)))
            if answer.get('status') != 'success':
                problems.append(f'{uid} / {p["title"]}: {answer.get("error")}')
            elif not answer['data']['result']:
                empty.add((uid, p['title']))
    for key in sorted(empty - NIXL_EMPTY.keys()):
        problems.append(f'dashboard panel {key} has no series over NIXL agents')
    for key in sorted(NIXL_EMPTY.keys() - empty):
        problems.append(f'dashboard panel {key} answered, though listed as empty '
                        f'({NIXL_EMPTY[key]})')
    return empty


def main():
    args, python, started = harness.prepare(extra=('--prometheus',))
    problems, procs = [], []
    with tempfile.TemporaryDirectory(prefix='xtel-nixl-rules-') as work:
        node = os.path.join(work, 'node')
        os.mkdir(node)
        log = open(os.path.join(work, 'processes.log'), 'w+')
        env = harness.agent_env(node, {'NIXL_TELEMETRY_METRIC_SET': 'xtel'})
        try:
            procs += start_loads(python, args.source_dir, env, log)
            exporter_port = dash.free_port()
            # --remote-write to a port no one listens on, as tests/dashboards_test.py does, so
            # that the remote-write panel's counters exist.
            procs.append(dash.start([args.exporter, '--dir', node, '--listen',
                                     f'127.0.0.1:{exporter_port}', '--remote-write',
                                     f'http://127.0.0.1:{dash.free_port()}/api/v1/write'], log))
            prom_proc, prom = start_prometheus(args.prometheus, work, exporter_port,
                                               args.source_dir, log)
            procs.append(prom_proc)
            # The last rules of the chains: once these answer, those before them have data.
            ready = dash.wait_for(prom, ['agent_kind:xtel_errors:rate5m > 0',
                                         'peer_operation:xtel_transfer_duration_seconds:'
                                         'p99_5m_eligible', 'operation:xtel_transfer_slow:'
                                         'ratio_rate6h'], time.time() + SETTLE_S)
            if not ready:
                problems.append(f'the rules had no data after {SETTLE_S} s')
            check_rules(prom, args.source_dir, problems)
            check_dashboards(prom, args.source_dir, problems)
        finally:
            finish(procs, log, problems)
    return verdict(problems, f'monitoring/ over real NIXL agents: every recording rule but the '
                             f'{len(NEEDS_PEER)} that compare peers answers; every dashboard '
                             f'query but {len(NIXL_EMPTY)} listed '
                             f'({time.monotonic() - started:.1f} s)')


if __name__ == '__main__':
    sys.exit(main())
