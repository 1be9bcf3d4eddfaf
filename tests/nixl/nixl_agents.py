#!/usr/bin/env python3
"""Two real NIXL agents in this process over UCX on host memory, driven for tests/nixl/plugin_test.py.

Run with the Python of the test's virtual environment, where the NIXL wheel is installed. The
initiator registers one buffer, the target another; they exchange metadata; the initiator makes
--writes WRITEs and --reads READs of --bytes each into and out of the target's buffer, and the
last WRITE carries a notification that the target waits for. Every transfer must complete; then
one WRITE into memory the target never registered must fail, as NIXL_ERR_NOT_FOUND.
Prints one line of what was done ("nixl_agents: " and JSON), then waits for a line on stdin before the agents go
(their node files stay live while the test reads them). Exit status 1 on any failure.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
from nixl._api import nixl_agent, nixl_agent_config

DEADLINE_S = 20


def wait_done(agent, handle):
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        state = agent.check_xfer_state(handle)
        if state == 'DONE':
            return
        if state == 'ERR':
            raise RuntimeError('a transfer failed (check_xfer_state: ERR)')
    raise RuntimeError(f'a transfer did not complete in {DEADLINE_S} s')


def wait_notification(agent, sender, message):
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if message in agent.get_new_notifs().get(sender, []):
            return
        time.sleep(0.01)
    raise RuntimeError(f'no notification {message!r} from {sender} in {DEADLINE_S} s')


def fail_on_purpose(initiator, local_descs, remote, a):
    """A WRITE past the end of the target's registered buffer: NIXL refuses to create it."""
    outside = initiator.get_xfer_descs([(remote.ctypes.data + remote.nbytes + 4096, a.bytes, 0)],
                                       'DRAM')
    try:
        initiator.initialize_xfer('WRITE', local_descs, outside, a.target)
    except Exception as e:  # nixl's binding raises its nixlNotFoundError
        if 'NOT_FOUND' not in str(e):
            raise
        return
    raise RuntimeError('a WRITE into memory the target never registered was created')


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--initiator', default='nixl-initiator')
    p.add_argument('--target', default='nixl-target')
    p.add_argument('--writes', type=int, required=True)
    p.add_argument('--reads', type=int, required=True)
    p.add_argument('--bytes', type=int, required=True)
    a = p.parse_args()

    cfg = nixl_agent_config(backends=['UCX'])
    initiator = nixl_agent(a.initiator, cfg)
    target = nixl_agent(a.target, cfg)
    # The target's buffer is twice the initiator's: registered sizes that cannot be confused.
    local = np.arange(a.bytes, dtype=np.uint8)
    remote = np.zeros(2 * a.bytes, dtype=np.uint8)
    local_reg = [(local.ctypes.data, local.nbytes, 0, '')]
    remote_reg = [(remote.ctypes.data, remote.nbytes, 0, '')]
    local_handle = initiator.register_memory(local_reg, 'DRAM')
    remote_handle = target.register_memory(remote_reg, 'DRAM')
    initiator.add_remote_agent(target.get_agent_metadata())
    local_descs = initiator.get_xfer_descs([(local.ctypes.data, a.bytes, 0)], 'DRAM')
    remote_descs = initiator.get_xfer_descs([(remote.ctypes.data, a.bytes, 0)], 'DRAM')

    for op, count in (('WRITE', a.writes), ('READ', a.reads)):
        for i in range(count):
            last_write = op == 'WRITE' and i == count - 1
            note = b'written' if last_write else b''
            handle = initiator.initialize_xfer(op, local_descs, remote_descs, a.target, note)
            if initiator.transfer(handle) == 'ERR':
                raise RuntimeError(f'{op} {i} could not be posted')
            wait_done(initiator, handle)
            initiator.release_xfer_handle(handle)
            if last_write:
                wait_notification(target, a.initiator, b'written')
    if not np.array_equal(remote[:a.bytes], local):
        raise RuntimeError('the WRITEs did not move the initiator\'s bytes')
    fail_on_purpose(initiator, local_descs, remote, a)

    print('nixl_agents: ' + json.dumps({
        'initiator': a.initiator, 'target': a.target,
        'tx_bytes': a.writes * a.bytes, 'rx_bytes': a.reads * a.bytes,
        'tx_requests': a.writes, 'rx_requests': a.reads,
        'initiator_registered': local.nbytes, 'target_registered': remote.nbytes,
        'failed_not_found': 1,
    }), flush=True)
    sys.stdin.readline()
    initiator.remove_remote_agent(a.target)
    initiator.deregister_memory(local_handle)
    target.deregister_memory(remote_handle)
    del initiator, target  # NIXL's agents, and their exporters, end here
    # Then past the libraries' destructors: the libnl-route that NIXL 1.5.1's wheel bundles for
    # UCX crashes in its own (rtnl_tc_unregister, from _dl_fini) at every exit of a process that
    # loaded the UCX backend, telemetry or not.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == '__main__':
    sys.exit(main())
