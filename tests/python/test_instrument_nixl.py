"""xtel.instrument.nixl on the real NIXL (the pinned wheel, installed beside the package): a
vLLM-shaped flow in two processes (tests/python/nixl_flow.py), instrumented by XTEL_INSTRUMENT
alone, served by the wheel's xtel-exporter with exact per-peer values; NIXL's answers to the
engine unchanged, NIXL's telemetry off or on."""
import json
import os
import re
import subprocess
import sys
import time

import pytest

from conftest import exporter, program, scrape

nixl = pytest.importorskip('nixl._api', reason='NIXL\'s wheel is not installed beside the '
                           'package (tests/python/run_wheel.py installs it)')

FLOW = os.path.join(os.path.dirname(__file__), 'nixl_flow.py')
SIZE, READS, WRITES = 65536, 5, 3


def start(role, name, flow_dir, env, *args):
    return subprocess.Popen([sys.executable, FLOW, role, '--name', name, '--dir', str(flow_dir),
                             '--size', str(SIZE), *args], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def result(proc):
    """The process's JSON line; its stderr in the failure when there is none."""
    for line in proc.stdout:
        if line.startswith('nixl_flow: '):
            return json.loads(line[len('nixl_flow: '):])
    proc.wait(timeout=10)
    raise AssertionError(f'no result, exit status {proc.returncode}: {proc.stderr.read()}')


def run_flow(tmp_path, nixl_telemetry, plugin=False):
    """Both processes run; yields (initiator's result, target's result, /metrics samples)."""
    node_dir = tmp_path / 'node'
    flow_dir = tmp_path / 'flow'
    node_dir.mkdir()
    flow_dir.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(('NIXL_', 'XTEL_'))}
    env.update(XTEL_INSTRUMENT='nixl', NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH=str(node_dir))
    if plugin:
        env.update(NIXL_TELEMETRY_ENABLE='y', NIXL_TELEMETRY_EXPORTER='xtel')
    elif nixl_telemetry:
        (tmp_path / 'nixl').mkdir()
        env.update(NIXL_TELEMETRY_ENABLE='y', NIXL_TELEMETRY_DIR=str(tmp_path / 'nixl'))
    target = start('target', 'prefill-0', flow_dir, env, '--expect', str(READS + WRITES))
    initiator = start('initiator', 'decode-0', flow_dir, env, '--reads', str(READS),
                      '--writes', str(WRITES))
    try:
        got_i = result(initiator)
        got_t = result(target)
        with exporter(node_dir) as url:
            # The agents' pipelines publish at their next flush (every 100 ms): until then the
            # node files hold the rounds before.
            deadline = time.monotonic() + 10
            while True:
                samples = scrape(url)
                moved = value(samples, 'xtel_transfer_bytes_total', agent_name='decode-0')
                errors = value(samples, 'xtel_errors_total', agent_name='decode-0')
                if (moved >= (READS + WRITES) * SIZE and errors >= 1 or
                        time.monotonic() > deadline):
                    break
                time.sleep(0.05)
    finally:
        for p in (initiator, target):
            if p.poll() is None:
                p.stdin.write('\n')
                p.stdin.flush()
            p.wait(timeout=20)
    return got_i, got_t, samples


def value(samples, family, **labels):
    want = [f'{k}="{v}"' for k, v in labels.items()]
    return sum(float(v) for k, v in samples.items()
               if k.startswith(family + '{') and all(w in k for w in want))


@pytest.mark.parametrize('nixl_telemetry', [False, True], ids=['nixl-telemetry-off',
                                                               'nixl-telemetry-on'])
def test_every_transfer_of_a_two_process_flow_is_served_by_peer_exactly(tmp_path,
                                                                       nixl_telemetry):
    got_i, got_t, s = run_flow(tmp_path, nixl_telemetry)
    # The engine saw what NIXL says, as without the instrumentation.
    assert got_i['instrumented'] and got_t['instrumented']
    assert got_i['instrument_errors'] == 0 and got_t['instrument_errors'] == 0
    assert got_i['states'] == ['DONE'] * (READS + WRITES)
    assert got_i['read_back'] and got_t['written_back']
    assert got_i['refused'] == 'nixlNotFoundError'
    if nixl_telemetry:
        assert got_i['engine_telemetry'] == f'bytes {SIZE}'
    else:  # NIXL raises with its telemetry off (dynamo #12952): still, and only to the engine
        assert got_i['engine_telemetry'].startswith('raised ')
    assert got_t['notifications'] == sorted(
        [['decode-0', f'req-{i}'] for i in range(READS)] +
        [['decode-0', f'w-{i}'] for i in range(WRITES)])

    mine = dict(agent_name='decode-0', remote_agent='prefill-0')
    assert value(s, 'xtel_transfer_bytes_total', **mine, operation='read',
                 status='success') == READS * SIZE
    assert value(s, 'xtel_transfer_bytes_total', **mine, operation='write',
                 status='success') == WRITES * SIZE
    assert value(s, 'xtel_transfer_requests_total', **mine, operation='read') == READS
    assert value(s, 'xtel_transfer_requests_total', **mine, operation='write',
                 status='success') == WRITES
    # Every completed transfer timed, each in its peer's latency histogram.
    assert value(s, 'xtel_transfer_duration_seconds_count', **mine, operation='read') == READS
    assert value(s, 'xtel_transfer_duration_seconds_count', **mine,
                 operation='write') == WRITES
    # The WRITE NIXL refused: counted by its kind, under its peer, and made a span.
    assert value(s, 'xtel_errors_total', agent_name='decode-0', kind='not_found') == 1
    assert value(s, 'xtel_transfer_requests_total', **mine, status='not_found') == 1
    assert value(s, 'xtel_trace_spans_total', agent_name='decode-0', reason='failed') == 1
    # The target initiated nothing.
    assert value(s, 'xtel_transfer_requests_total', agent_name='prefill-0') == 0
    assert value(s, 'xtel_transfer_bytes_total', agent_name='decode-0') == (READS + WRITES) * SIZE


def test_enable_is_idempotent_and_leaves_the_methods_nixls_underneath():
    import xtel.instrument.nixl as instrument

    cls = nixl.nixl_agent
    assert instrument.enable(cls) and instrument.enable(cls)
    assert cls.transfer.__wrapped__.__name__ == 'transfer'
    assert not hasattr(cls.transfer.__wrapped__, '__wrapped__')  # wrapped once


def test_a_class_without_the_methods_is_left_alone_and_said_so(caplog):
    import xtel.instrument.nixl as instrument

    class not_nixl:
        def transfer(self):
            return 'DONE'

    assert not instrument.enable(not_nixl)
    assert not_nixl.transfer(None) == 'DONE' and not hasattr(not_nixl.transfer, '__wrapped__')
    assert 'nothing is instrumented' in caplog.text


def test_with_nixls_xtel_plugin_loaded_an_agent_is_one_node_file_counted_once(tmp_path):
    # The wheel's plug-in, linked into the NIXL beside the package, as `xtel nixl install` does.
    r = subprocess.run([program('xtel'), 'nixl', 'install', '--python', sys.executable],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    got_i, got_t, s = run_flow(tmp_path, True, plugin=True)
    assert got_i['states'] == ['DONE'] * (READS + WRITES) and got_i['instrument_errors'] == 0
    assert sorted(os.listdir(tmp_path / 'node')) == [
        'decode-0.metrics', 'decode-0.spans', 'prefill-0.metrics', 'prefill-0.spans']
    # NIXL's own counts, through the plug-in, once: no peer (its events carry none).
    assert value(s, 'xtel_transfer_bytes_total', agent_name='decode-0') == (READS + WRITES) * SIZE
    assert value(s, 'xtel_transfer_bytes_total', agent_name='decode-0',
                 remote_agent='prefill-0') == 0
    assert value(s, 'xtel_transfer_requests_total', agent_name='decode-0',
                 status='success') == READS + WRITES


# A process of an engine: xtel imported, then a NIXL agent with its UCX backend; prints the UCX
# libraries mapped in it.
UCX_MAPS_PROBE = r"""
import os, re
import xtel
from nixl._api import nixl_agent, nixl_agent_config
agent = nixl_agent('maps-probe', nixl_agent_config(backends=['UCX']))
print('mapped:', *sorted({l.split()[-1] for l in open('/proc/self/maps')
                         if re.search(r'/libuc[pstm][-.]', l)}), flush=True)
os._exit(0)  # NIXL 1.5.1's bundled libnl crashes at exit after UCX was loaded
"""


def test_an_engine_that_imports_xtel_maps_one_ucx_the_one_nixl_bundles():
    # Before the module linked the registry alone, such a process mapped Debian's libucp,
    # libucs, libuct and libucm as well as NIXL's own four.
    env = {k: v for k, v in os.environ.items() if not k.startswith(('NIXL_', 'XTEL_'))}
    r = subprocess.run([sys.executable, '-c', UCX_MAPS_PROBE], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stdout.splitlines() if line.startswith('mapped:')]
    assert len(lines) == 1, r.stdout
    mapped = lines[0].split()[1:]
    names = sorted(re.match(r'libuc[pstm]', os.path.basename(p)).group() for p in mapped)
    assert names == ['libucm', 'libucp', 'libucs', 'libuct'], mapped
    site = os.path.dirname(os.path.dirname(nixl.__file__))  # NIXL's bundled libraries are there
    assert all(p.startswith(site + os.sep) for p in mapped), mapped


def test_the_cost_bench_runs_and_its_figures_are_whole():
    """bench/python_instrument_nixl.py in its smoke mode: every figure there, no error inside
    the instrumentation; nothing about speed (docs/python.md gives the figures)."""
    bench = os.path.join(os.environ['XTEL_SOURCE_DIR'], 'bench', 'python_instrument_nixl.py')
    r = subprocess.run([sys.executable, bench, '--smoke'], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got['rounds'] == 3 and got['transfers'] == 50 and got['size'] == 4096
    assert got['plain_ns'] > 0 and got['instrumented_ns'] > 0
    assert set(got['polls_per_transfer']) == {'plain', 'instrumented'}
    assert got['instrument_errors'] == 0
