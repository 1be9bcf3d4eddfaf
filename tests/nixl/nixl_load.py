#!/usr/bin/env python3
"""A decode agent moving KV blocks to or from prefill agents at a steady rate: one process holding
one initiator agent and its target agents, with no line of xtel in it. What observes it is its
environment: XTEL_INSTRUMENT=nixl (tests/python/test_instrument_straggler.py) or NIXL's own
telemetry with xtel's plug-in (tests/nixl/rules_test.py).

  nixl_load.py --initiator NAME --target NAME [--target NAME...] --size N --rate R --seconds S
               [--op READ|WRITE] [--fail-every K]

Each target agent registers a buffer of N bytes; the initiator loads each target's metadata
as an engine does (add_remote_agent), prepares both sides as vLLM's NixlConnector does
(prep_xfer_dlist), then for S seconds makes R prepped transfers (READs unless --op) a second to
each target, in a shuffled order, each polled to completion and released; every K-th round also
asks for a WRITE past the first target's buffer, which NIXL refuses (not found). The transport
is UCX's choice, or UCX_TLS's: a process started in a throttled network namespace with
UCX_TLS=tcp is a slow link between its agents. Prints "nixl_load: " and JSON (the states
counted) at the end, then waits for a line on stdin (its node files stay live meanwhile) and
ends with os._exit, as nixl_flow.py does.
"""
import argparse
import collections
import json
import os
import random
import sys
import time

import numpy as np
from nixl._api import nixl_agent, nixl_agent_config

DEADLINE_S = 30


def prefill(name, size):
    """A target agent and its registered buffer."""
    agent = nixl_agent(name, nixl_agent_config(backends=['UCX']))
    buf = np.full(size, 3, dtype=np.uint8)
    agent.register_memory([(buf.ctypes.data, buf.nbytes, 0, '')], 'DRAM')
    return agent, buf


def transfer_once(agent, op, local_side, remote_side):
    h = agent.make_prepped_xfer(op, local_side, [0], remote_side, [0])
    state = agent.transfer(h)
    deadline = time.monotonic() + DEADLINE_S
    while state == 'PROC':
        if time.monotonic() > deadline:
            raise RuntimeError(f'a {op} did not complete in {DEADLINE_S} s')
        state = agent.check_xfer_state(h)
    agent.release_xfer_handle(h)
    return state


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--initiator', required=True)
    p.add_argument('--target', action='append', required=True)
    p.add_argument('--size', type=int, required=True)
    p.add_argument('--rate', type=float, required=True)
    p.add_argument('--seconds', type=float, required=True)
    p.add_argument('--op', choices=('READ', 'WRITE'), default='READ')
    p.add_argument('--fail-every', type=int, default=0)
    a = p.parse_args()

    targets = [prefill(name, a.size) for name in a.target]
    decode = nixl_agent(a.initiator, nixl_agent_config(backends=['UCX']))
    local = np.zeros(a.size, dtype=np.uint8)
    decode.register_memory([(local.ctypes.data, local.nbytes, 0, '')], 'DRAM')
    local_side = decode.prep_xfer_dlist(
        'NIXL_INIT_AGENT', decode.get_xfer_descs([(local.ctypes.data, a.size, 0)], 'DRAM'))
    remote_sides = []
    for agent, buf in targets:
        peer = decode.add_remote_agent(agent.get_agent_metadata())
        remote_sides.append(decode.prep_xfer_dlist(peer, [(buf.ctypes.data, a.size, 0)], 'DRAM'))
    local_descs = decode.get_xfer_descs([(local.ctypes.data, a.size, 0)], 'DRAM')
    first_buf = targets[0][1]
    outside = decode.get_xfer_descs([(first_buf.ctypes.data + first_buf.nbytes + 4096, a.size, 0)],
                                    'DRAM')

    states = collections.Counter()
    period = 1.0 / a.rate
    next_round = started = time.monotonic()
    rounds = 0
    while time.monotonic() - started < a.seconds:
        rounds += 1
        if a.fail_every and rounds % a.fail_every == 0:
            try:
                decode.initialize_xfer('WRITE', local_descs, outside, a.target[0])
                states['created outside'] += 1
            except Exception as e:  # nixl's binding raises its nixlNotFoundError
                states[type(e).__name__] += 1
        # In a shuffled order: the first transfer after the sleep is the round's slowest (most
        # likely the process waking up), and one peer always first would make that peer look
        # slow.
        for remote_side in random.sample(remote_sides, len(remote_sides)):
            states[transfer_once(decode, a.op, local_side, remote_side)] += 1
        next_round += period
        time.sleep(max(0.0, next_round - time.monotonic()))
    hooked = sys.modules.get('xtel.instrument.nixl')
    print('nixl_load: ' + json.dumps({
        'states': dict(states), 'read_back': bool(np.all(local == 3)) if a.op == 'READ' else None,
        'instrument_errors': hooked.errors() if hooked is not None else None}), flush=True)
    sys.stdin.readline()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == '__main__':
    sys.exit(main())
