#!/usr/bin/env python3
"""A vLLM-shaped NIXL flow in two processes, for tests/python/test_instrument_nixl.py: the
program an engine is, with no line of xtel in it (XTEL_INSTRUMENT=nixl in its environment does
the rest, through the package's .pth hook).

  nixl_flow.py target --name NAME --dir DIR --size N --notifs A,B,...
      [--poll get_new_notifs|check_remote_xfer_done]
      registers a buffer of 2N bytes, writes its agent's metadata and the buffer's address into
      DIR, and polls its notifications until every one of A, B, ... has come: by
      get_new_notifs as vLLM's NixlConnector does, or by check_remote_xfer_done for each in
      turn as SGLang's disaggregation does; prints "nixl_flow: " and JSON.
  nixl_flow.py initiator --name NAME --dir DIR --size N --reads R --writes W [--request ID]
      [--otel-span]
      reads the target's metadata; prepares both sides' descriptor lists as vLLM's
      NixlConnector does (prep_xfer_dlist); makes R prepped READs, each with a notification
      (req-0, req-1, ...; the first is ID when given), polled to completion and released; then
      W WRITEs made with initialize_xfer (notified w-0, w-1, ...); then one WRITE into memory
      the target never registered (notification bad-0), which NIXL refuses (not found); and
      asks NIXL's get_xfer_telemetry for one transfer, as vLLM does. With --otel-span, the
      first READ is posted inside a span of OpenTelemetry's SDK (the engine's own tracing),
      whose ids the JSON gives as "caller". Prints "nixl_flow: " and JSON.

Both then wait for a line on stdin before they go (their node files stay live meanwhile), and
end with os._exit: NIXL 1.5.1's bundled libnl crashes at the exit of a process that loaded UCX.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
from nixl._api import nixl_agent, nixl_agent_config

DEADLINE_S = 30


def wait_for(path):
    deadline = time.monotonic() + DEADLINE_S
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise RuntimeError(f'{path} did not appear in {DEADLINE_S} s')
        time.sleep(0.01)


def target(a):
    agent = nixl_agent(a.name, nixl_agent_config(backends=['UCX']))
    buf = np.zeros(2 * a.size, dtype=np.uint8)
    buf[:a.size] = np.arange(a.size, dtype=np.uint8)  # what the READs bring back
    agent.register_memory([(buf.ctypes.data, buf.nbytes, 0, '')], 'DRAM')
    with open(os.path.join(a.dir, 'target.meta.tmp'), 'wb') as f:
        f.write(agent.get_agent_metadata())
    with open(os.path.join(a.dir, 'target.addr.tmp'), 'w') as f:
        f.write(f'{buf.ctypes.data} {buf.nbytes}')
    os.rename(os.path.join(a.dir, 'target.addr.tmp'), os.path.join(a.dir, 'target.addr'))
    os.rename(os.path.join(a.dir, 'target.meta.tmp'), os.path.join(a.dir, 'target.meta'))
    expect = a.notifs.split(',')
    got = []
    deadline = time.monotonic() + DEADLINE_S
    while len(got) < len(expect):
        if time.monotonic() > deadline:
            raise RuntimeError(f'{len(got)} of {len(expect)} notifications in {DEADLINE_S} s')
        if a.poll == 'get_new_notifs':
            for sender, messages in agent.get_new_notifs().items():
                got += [(sender, m.decode()) for m in messages]
        elif agent.check_remote_xfer_done('decode-0', expect[len(got)].encode()):
            got.append(('decode-0', expect[len(got)]))
        time.sleep(0.001)
    return {'notifications': sorted(got), 'written_back': bool(
        np.array_equal(buf[a.size:2 * a.size], np.full(a.size, 7, dtype=np.uint8)))}, agent


def wait_done(agent, handle):
    deadline = time.monotonic() + DEADLINE_S
    while True:
        state = agent.check_xfer_state(handle)
        if state != 'PROC':
            return state
        if time.monotonic() > deadline:
            raise RuntimeError(f'a transfer did not complete in {DEADLINE_S} s')


def initiator(a):
    agent = nixl_agent(a.name, nixl_agent_config(backends=['UCX']))
    wait_for(os.path.join(a.dir, 'target.meta'))
    with open(os.path.join(a.dir, 'target.meta'), 'rb') as f:
        peer = agent.add_remote_agent(f.read())
    with open(os.path.join(a.dir, 'target.addr')) as f:
        remote_addr, remote_len = (int(x) for x in f.read().split())
    local = np.zeros(a.size, dtype=np.uint8)
    agent.register_memory([(local.ctypes.data, local.nbytes, 0, '')], 'DRAM')
    local_descs = agent.get_xfer_descs([(local.ctypes.data, a.size, 0)], 'DRAM')
    local_side = agent.prep_xfer_dlist('NIXL_INIT_AGENT', local_descs)
    remote_side = agent.prep_xfer_dlist(
        peer, [(remote_addr, a.size, 0), (remote_addr + a.size, a.size, 0)], 'DRAM')
    states = []
    caller = None
    for i in range(a.reads):
        h = agent.make_prepped_xfer('READ', local_side, [0], remote_side, [0],
                                    notif_msg=(a.request if a.request and i == 0
                                               else f'req-{i}').encode())
        if a.otel_span and i == 0:
            # The engine's own tracing: the first READ posted inside a span of its request.
            with otel_tracer().start_as_current_span('request') as span:
                posted = agent.transfer(h)
                context = span.get_span_context()
                caller = {'trace': f'{context.trace_id:032x}', 'span': f'{context.span_id:016x}'}
        else:
            posted = agent.transfer(h)
        states.append(posted if posted != 'PROC' else wait_done(agent, h))
        agent.release_xfer_handle(h)
    read_back = bool(np.array_equal(local, np.arange(a.size, dtype=np.uint8)))
    local[:] = 7
    # The engine's own get_xfer_telemetry: NIXL's answer (or exception) reaches it unchanged.
    telemetry = 'not asked'
    written = agent.get_xfer_descs([(remote_addr + a.size, a.size, 0)], 'DRAM')
    for i in range(a.writes):
        h = agent.initialize_xfer('WRITE', local_descs, written, peer, f'w-{i}'.encode())
        posted = agent.transfer(h)
        states.append(posted if posted != 'PROC' else wait_done(agent, h))
        if i == 0:
            try:
                telemetry = f'bytes {agent.get_xfer_telemetry(h).totalBytes}'
            except Exception as e:
                telemetry = f'raised {type(e).__name__}'
        agent.release_xfer_handle(h)
    refused = 'created'
    outside = agent.get_xfer_descs([(remote_addr + remote_len + 4096, a.size, 0)], 'DRAM')
    try:
        agent.initialize_xfer('WRITE', local_descs, outside, peer, b'bad-0')
    except Exception as e:
        refused = type(e).__name__
    return {'peer': peer.decode() if isinstance(peer, bytes) else peer, 'states': states,
            'read_back': read_back, 'refused': refused, 'engine_telemetry': telemetry,
            'caller': caller}, agent


def otel_tracer():
    """OpenTelemetry's SDK tracer, its spans recorded and exported nowhere: the engine's."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    trace.set_tracer_provider(TracerProvider())
    return trace.get_tracer('engine')


def main():
    p = argparse.ArgumentParser()
    p.add_argument('role', choices=('target', 'initiator'))
    p.add_argument('--name', required=True)
    p.add_argument('--dir', required=True)
    p.add_argument('--size', type=int, required=True)
    p.add_argument('--notifs', default='')
    p.add_argument('--poll', choices=('get_new_notifs', 'check_remote_xfer_done'),
                   default='get_new_notifs')
    p.add_argument('--request', default='')
    p.add_argument('--otel-span', action='store_true')
    p.add_argument('--reads', type=int, default=0)
    p.add_argument('--writes', type=int, default=0)
    a = p.parse_args()
    result, agent = (target if a.role == 'target' else initiator)(a)
    instrumented = getattr(type(agent).transfer, '__wrapped__', None) is not None
    # For the test only, read where the hook left it: the engine itself imports nothing of xtel.
    hooked = sys.modules.get('xtel.instrument.nixl')
    errors = hooked.errors() if hooked is not None else None
    print('nixl_flow: ' + json.dumps(dict(result, instrumented=instrumented,
                                          instrument_errors=errors)), flush=True)
    sys.stdin.readline()
    del agent
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == '__main__':
    sys.exit(main())
