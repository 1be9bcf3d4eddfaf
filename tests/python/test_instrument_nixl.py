"""xtel.instrument.nixl on the real NIXL (the pinned wheel, installed beside the package): a
vLLM-shaped flow in two processes (tests/python/nixl_flow.py), instrumented by XTEL_INSTRUMENT
alone, served by the wheel's xtel-exporter with exact per-peer values; NIXL's answers to the
engine unchanged, NIXL's telemetry off or on; both sides' spans of a request pushed as OTLP by
a push-enabled xtel-exporter and decoded by OpenTelemetry's own definitions
(opentelemetry-proto)."""
import contextlib
import gzip
import hashlib
import http.server
import json
import os
import re
import subprocess
import sys
import threading
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


def notifs(request=''):
    """The notifications the initiator sends, in its order (the first READ's is `request`)."""
    reads = [request or 'req-0'] + [f'req-{i}' for i in range(1, READS)]
    return reads + [f'w-{i}' for i in range(WRITES)]


def run_flow(tmp_path, nixl_telemetry, plugin=False, poll='get_new_notifs', request='',
             variables=None, spans=None, otel_span=False):
    """Both processes run, the target polling by `poll`, with `variables` besides
    XTEL_INSTRUMENT; `spans(node_dir)`, when given, is called while they live. Returns
    (initiator's result, target's result, /metrics samples, what `spans` returned)."""
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
    env.update(variables or {})
    target = start('target', 'prefill-0', flow_dir, env, '--notifs', ','.join(notifs(request)),
                   '--poll', poll)
    initiator = start('initiator', 'decode-0', flow_dir, env, '--reads', str(READS),
                      '--writes', str(WRITES), '--request', request,
                      *(['--otel-span'] if otel_span else []))
    got_spans = None
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
                told = value(samples, 'xtel_notified_transfers_total', agent_name='prefill-0')
                if (moved >= (READS + WRITES) * SIZE and errors >= 1 and
                        (plugin or told >= READS + WRITES) or time.monotonic() > deadline):
                    break
                time.sleep(0.05)
        if spans is not None:
            got_spans = spans(node_dir)
    finally:
        for p in (initiator, target):
            if p.poll() is None:
                p.stdin.write('\n')
                p.stdin.flush()
            p.wait(timeout=20)
    return got_i, got_t, samples, got_spans


def value(samples, family, **labels):
    want = [f'{k}="{v}"' for k, v in labels.items()]
    return sum(float(v) for k, v in samples.items()
               if k.startswith(family + '{') and all(w in k for w in want))


# Each run also polls the target's notifications one of the two ways engines do.
@pytest.mark.parametrize('nixl_telemetry,poll', [
    (False, 'get_new_notifs'), (True, 'check_remote_xfer_done')],
    ids=['nixl-telemetry-off-vllm-poll', 'nixl-telemetry-on-sglang-poll'])
def test_every_transfer_of_a_two_process_flow_is_served_by_peer_exactly(tmp_path,
                                                                       nixl_telemetry, poll):
    got_i, got_t, s, _ = run_flow(tmp_path, nixl_telemetry, poll=poll)
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
    # The target initiated nothing; it was told of every transfer, by the peer that made it
    # (as reads: XTEL_INSTRUMENT_NOTIFIED_OP unset), without bytes (NIXL's notification
    # carries none), and only the target was.
    assert value(s, 'xtel_transfer_requests_total', agent_name='prefill-0') == 0
    assert value(s, 'xtel_notified_transfers_total', agent_name='prefill-0',
                 remote_agent='decode-0', operation='read') == READS + WRITES
    assert value(s, 'xtel_notified_transfers_total', agent_name='prefill-0') == READS + WRITES
    assert value(s, 'xtel_notified_bytes_total', agent_name='prefill-0') == 0
    assert value(s, 'xtel_notified_transfers_total', agent_name='decode-0') == 0
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
    got_i, got_t, s, _ = run_flow(tmp_path, True, plugin=True)
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
    assert got['pairs'] == 200 and got['size'] == 4096
    assert got['plain_ns'] > 0 and got['instrumented_ns'] > 0
    assert set(got['added_ns_by_call']) == {'make', 'post', 'polls', 'release'}
    assert set(got['polls_per_transfer']) == {'plain', 'instrumented'}
    assert all(n >= 1 for n in got['polls_per_transfer'].values())  # each READ was polled
    assert got['target_notified_ns'] > 0 and len(got['target_added_ns_quartiles']) == 3
    assert got['instrument_errors'] == 0


def test_the_notifications_a_poll_brought_are_told_apart_by_identity_not_by_value():
    from xtel.instrument import _nixl_values as values

    one, again, two, late = b'req-1', bytes(bytearray(b'req-1')), b'req-2', b'req-3'
    before = {'decode-0': [one], 'decode-1': [two]}
    # NIXL's new map: decode-0's message kept, an equal one come after it; decode-1's taken
    # away by check_remote_xfer_done; a new sender.
    after = {'decode-0': [one, again], 'decode-1': [], 'decode-2': [late]}
    added = values.notifs_added(before, after)
    assert added == [('decode-0', b'req-1'), ('decode-2', b'req-3')]
    assert added[0][1] is again
    assert values.notifs_added(before, {'decode-0': [one], 'decode-1': [two]}) == []


# ---- both sides' spans, pushed as OTLP ---------------------------------------------------------

# The caller's context, as an engine would put it in the notification of a request's first READ.
CALLER_TRACE, CALLER_SPAN = '4bf92f3577b34da6a3ce929d0e0e4736', '00f067aa0ba902b7'
TRACEPARENT = f'00-{CALLER_TRACE}-{CALLER_SPAN}-01'
CLIENT, SERVER, STATUS_ERROR = 3, 2, 2  # OpenTelemetry's SpanKind and StatusCode numbers


def derived(request):
    """docs/trace-format.md's trace id for a request id that is no trace context, by hashlib."""
    return hashlib.sha256(request.encode()).hexdigest()[:32]


@contextlib.contextmanager
def otlp_receiver():
    """An OTLP/HTTP receiver on a free port: yields (its /v1/traces URL, the bodies posted)."""
    bodies = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers['Content-Length']))
            if self.headers.get('Content-Encoding') == 'gzip':
                body = gzip.decompress(body)
            bodies.append((self.path, self.headers.get('Content-Type'), body))
            self.send_response(200)
            self.send_header('Content-Type', 'application/x-protobuf')
            self.send_header('Content-Length', '0')
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f'http://127.0.0.1:{server.server_address[1]}/v1/traces', bodies
    finally:
        server.shutdown()
        server.server_close()


def decoded(bodies):
    """Every span of the bodies, decoded as ExportTraceServiceRequest: dicts of what is checked."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest)

    def values(attributes):
        return {a.key: getattr(a.value, a.value.WhichOneof('value')) for a in attributes}

    spans = []
    for path, content_type, body in bodies:
        assert (path, content_type) == ('/v1/traces', 'application/x-protobuf')
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for rs in request.resource_spans:
            agent = values(rs.resource.attributes)['xtel.agent.name']
            for ss in rs.scope_spans:
                spans += [dict(agent=agent, trace=sp.trace_id.hex(), span=sp.span_id.hex(),
                               parent=sp.parent_span_id.hex(), kind=sp.kind, name=sp.name,
                               status=(sp.status.code, sp.status.message),
                               **values(sp.attributes)) for sp in ss.spans]
    return spans


def pushed_spans(push_exporter, want):
    """What `run_flow` calls while the agents live: the push-enabled xtel-exporter reads their
    span rings and pushes to a receiver here until `want` spans came (or 20 s went)."""
    def push(node_dir):
        with otlp_receiver() as (url, bodies):
            env = {k: v for k, v in os.environ.items() if not k.startswith('OTEL_')}
            env['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'] = url
            with exporter(node_dir, push_exporter, env):
                deadline = time.monotonic() + 20
                while len(decoded(list(bodies))) < want and time.monotonic() < deadline:
                    time.sleep(0.1)
            return decoded(list(bodies))
    return push


def test_both_sides_spans_of_a_request_are_in_its_trace_as_an_otlp_receiver_decodes_them(
        tmp_path):
    push_exporter = os.environ.get('XTEL_EXPORTER_PUSH')
    if not push_exporter:
        pytest.skip('XTEL_EXPORTER_PUSH is unset: it names an xtel-exporter built with '
                    'XTEL_PUSH=ON (the wheel\'s has no OTLP client); the ctest python: test '
                    'passes the C++ build\'s')
    assert os.access(push_exporter, os.X_OK), f'XTEL_EXPORTER_PUSH={push_exporter}: no program'
    # Every transfer timed and slow (the initiator's spans), every trace kept (the target's,
    # which have no times and are never slow): each transfer is a span on both sides.
    variables = dict(NIXL_TELEMETRY_TIMING_SAMPLE='1', NIXL_TELEMETRY_TRACE_SLOW_US='0',
                     NIXL_TELEMETRY_TRACE_SAMPLE='1')
    want = 2 * (READS + WRITES) + 1
    got_i, got_t, _, spans = run_flow(tmp_path, False, request=TRACEPARENT, variables=variables,
                                      spans=pushed_spans(push_exporter, want))
    assert got_i['states'] == ['DONE'] * (READS + WRITES) and got_i['instrument_errors'] == 0
    assert got_t['instrument_errors'] == 0
    assert len(spans) == want, spans

    # The request whose notification was the caller's traceparent: on both sides in the
    # caller's trace, each a child of the caller's span, each naming the other side.
    caller = sorted((s for s in spans if s.get('xtel.request_id') == TRACEPARENT),
                    key=lambda s: s['kind'])
    assert [(s['agent'], s['kind'], s['trace'], s['parent'], s['xtel.peer.agent'])
            for s in caller] == [
        ('prefill-0', SERVER, CALLER_TRACE, CALLER_SPAN, 'decode-0'),
        ('decode-0', CLIENT, CALLER_TRACE, CALLER_SPAN, 'prefill-0')]
    assert [(s['xtel.trace.origin'], s['xtel.span.reason']) for s in caller] == [
        ('traceparent', 'sampled'), ('traceparent', 'slow')]
    assert [s['name'] for s in caller] == ['read decode-0', 'read prefill-0']
    assert caller[1]['xtel.transfer.bytes'] == SIZE
    assert len({s['span'] for s in caller} | {CALLER_SPAN}) == 3

    # Every other request: both sides in the trace its id derives, root spans.
    for request in notifs(TRACEPARENT)[1:]:
        two = sorted((s for s in spans if s.get('xtel.request_id') == request),
                     key=lambda s: s['kind'])
        assert [(s['agent'], s['kind'], s['trace'], s['parent'], s['xtel.span.reason'])
                for s in two] == [('prefill-0', SERVER, derived(request), '', 'sampled'),
                                  ('decode-0', CLIENT, derived(request), '', 'slow')], request

    # The WRITE NIXL refused: the initiator's failed span, in its notification's trace, naming
    # the peer and the failure's kind; the target was told nothing of it.
    failed = [s for s in spans if s.get('xtel.span.reason') == 'failed']
    assert [(s['agent'], s['kind'], s['trace'], s['xtel.request_id'], s['xtel.peer.agent'],
             s['status'], s['error.type']) for s in failed] == [
        ('decode-0', CLIENT, derived('bad-0'), 'bad-0', 'prefill-0',
         (STATUS_ERROR, 'transfer failed: not_found'), 'not_found')]
    assert [s for s in spans if s['status'][0] == STATUS_ERROR] == failed


def test_an_opentelemetry_span_current_at_the_post_is_the_parent_of_the_initiators_span(
        tmp_path):
    """The engine's own tracing (OpenTelemetry's SDK, a span current around transfer()): the
    initiator's span is its child, in its trace; the target, told only the notification, is in
    the trace that notification derives (docs/python.md, "Both sides of a request")."""
    push_exporter = os.environ.get('XTEL_EXPORTER_PUSH')
    if not push_exporter:
        pytest.skip('XTEL_EXPORTER_PUSH is unset (see the test above)')
    pytest.importorskip('opentelemetry.sdk.trace', reason='opentelemetry-sdk is not installed '
                        '(tests/python/run_wheel.py installs it from the wheelhouse)')
    variables = dict(NIXL_TELEMETRY_TIMING_SAMPLE='1', NIXL_TELEMETRY_TRACE_SLOW_US='0',
                     NIXL_TELEMETRY_TRACE_SAMPLE='1')
    want = 2 * (READS + WRITES) + 1
    got_i, _, _, spans = run_flow(tmp_path, False, variables=variables, otel_span=True,
                                  spans=pushed_spans(push_exporter, want))
    caller = got_i['caller']
    assert len(caller['trace']) == 32 and caller['trace'] != '0' * 32
    mine = [s for s in spans if s['agent'] == 'decode-0' and s['trace'] == caller['trace']]
    assert [(s['parent'], s['xtel.trace.origin'], s['xtel.peer.agent'], s['name'])
            for s in mine] == [(caller['span'], 'traceparent', 'prefill-0', 'read prefill-0')]
    # Its flags are the SDK's (sampled, and W3C's random-trace-id bit in this version: 03).
    assert mine[0]['xtel.request_id'].startswith(f'00-{caller["trace"]}-{caller["span"]}-')
    told = [s for s in spans if s['agent'] == 'prefill-0' and s.get('xtel.request_id') == 'req-0']
    assert [(s['trace'], s['parent']) for s in told] == [(derived('req-0'), '')]
    # Only the span posted inside the engine's span is in its trace.
    assert [s for s in spans if s['trace'] == caller['trace']] == mine


def test_the_notified_operation_is_read_unless_the_variable_says_write(monkeypatch, caplog):
    import xtel.instrument.nixl as instrument

    monkeypatch.delenv(instrument.NOTIFIED_OP_VARIABLE, raising=False)
    assert instrument._notified_op() == 'read'
    monkeypatch.setenv(instrument.NOTIFIED_OP_VARIABLE, ' Write ')
    assert instrument._notified_op() == 'write'
    monkeypatch.setenv(instrument.NOTIFIED_OP_VARIABLE, 'push')
    assert instrument._notified_op() == 'read'
    assert ("XTEL_INSTRUMENT_NOTIFIED_OP='push' is invalid: expected read or write"
            in caplog.text)
