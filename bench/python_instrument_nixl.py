#!/usr/bin/env python3
"""What xtel.instrument.nixl adds to each NIXL transfer, paired against the same calls
unwrapped in the same run (docs/python.md, "Instrumenting NIXL").

usage: python bench/python_instrument_nixl.py [--rounds N] [--transfers M] [--size BYTES] [--smoke]

Run with the Python of an environment holding the xtel wheel and NIXL's (tests/python's fresh
venv, for one). Two real NIXL agents in this process over UCX on host memory; the loop is
vLLM's for each transfer: make_prepped_xfer (a READ of one --size block, default 4096, with a
notification), transfer, check_xfer_state until done, release_xfer_handle. Each round times M
transfers (default 2,000) through NIXL's own methods (the class's, saved before enable()) and
M through the instrumented ones, in an order that alternates round by round; N rounds (default
41). Prints the median ns per transfer of each, the median of the rounds' differences (what
the instrumentation adds) and the blocks tracemalloc sees allocated per transfer by each, and
exits 0. --smoke: 3 rounds of 50, to check the bench runs.
"""

import json
import os
import statistics
import sys
import tempfile
import time
import tracemalloc

import numpy as np
from nixl._api import nixl_agent, nixl_agent_config

import xtel.instrument.nixl as instrument

METHODS = ("make_prepped_xfer", "transfer", "check_xfer_state", "release_xfer_handle")


POLLS = {}


def loop(calls, agent, local_side, remote_side, n):
    make, post, check, release = calls
    polls = 0
    for i in range(n):
        h = make(agent, "READ", local_side, [0], remote_side, [0], b"req")
        state = post(agent, h)
        while state == "PROC":
            state = check(agent, h)
            polls += 1
        if state != "DONE":
            raise RuntimeError(f"transfer {i}: {state}")
        release(agent, h)
    POLLS[calls] = POLLS.get(calls, 0) + polls


def per_poll_ns(check, agent, handle, n):
    """check_xfer_state of a transfer done and recorded: what each poll of an engine costs."""
    started = time.perf_counter_ns()
    for _ in range(n):
        check(agent, handle)
    return (time.perf_counter_ns() - started) / n


def per_transfer_ns(calls, agent, local_side, remote_side, n):
    started = time.perf_counter_ns()
    loop(calls, agent, local_side, remote_side, n)
    return (time.perf_counter_ns() - started) / n


def blocks_per_transfer(calls, agent, local_side, remote_side, n):
    loop(calls, agent, local_side, remote_side, n)  # warm: caches filled, handles reused
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    loop(calls, agent, local_side, remote_side, n)
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(s.count_diff for s in after.compare_to(before, "filename") if s.count_diff > 0)
    return grown / n


def main(argv):
    rounds, transfers, size = 41, 2_000, 4096
    for flag in ("--rounds", "--transfers", "--size"):
        if flag in argv:
            value = int(argv[argv.index(flag) + 1])
            rounds, transfers, size = ((value, transfers, size) if flag == "--rounds" else
                                       (rounds, value, size) if flag == "--transfers" else
                                       (rounds, transfers, value))
    if "--smoke" in argv:
        rounds, transfers = 3, 50
    os.environ.setdefault("NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH",
                          tempfile.mkdtemp(prefix="xtel-bench-nixl-"))
    plain = tuple(getattr(nixl_agent, m) for m in METHODS)
    if not instrument.enable(nixl_agent):
        print("xtel.instrument.nixl did not wrap nixl_agent", file=sys.stderr)
        return 1
    wrapped = tuple(getattr(nixl_agent, m) for m in METHODS)
    cfg = nixl_agent_config(backends=["UCX"])
    initiator = nixl_agent("bench-initiator", cfg)
    target = nixl_agent("bench-target", cfg)
    local = np.zeros(size, dtype=np.uint8)
    remote = np.ones(size, dtype=np.uint8)
    initiator.register_memory([(local.ctypes.data, size, 0, "")], "DRAM")
    target.register_memory([(remote.ctypes.data, size, 0, "")], "DRAM")
    peer = initiator.add_remote_agent(target.get_agent_metadata())
    local_side = initiator.prep_xfer_dlist("NIXL_INIT_AGENT", [(local.ctypes.data, size, 0)],
                                           "DRAM")
    remote_side = initiator.prep_xfer_dlist(peer, [(remote.ctypes.data, size, 0)], "DRAM")
    args = (initiator, local_side, remote_side)
    per_transfer_ns(plain, *args, transfers)  # warm both
    per_transfer_ns(wrapped, *args, transfers)
    times = {"plain": [], "instrumented": []}
    differences = []
    done = plain[0](initiator, "READ", local_side, [0], remote_side, [0], b"")
    state = plain[1](initiator, done)
    while state == "PROC":
        state = plain[2](initiator, done)
    poll_differences = []
    for r in range(rounds):
        order = ("plain", "instrumented") if r % 2 == 0 else ("instrumented", "plain")
        got = {}
        for name in order:
            got[name] = per_transfer_ns(plain if name == "plain" else wrapped, *args, transfers)
            times[name].append(got[name])
        differences.append(got["instrumented"] - got["plain"])
        polls = {name: per_poll_ns((plain if name == "plain" else wrapped)[2], initiator, done,
                                   transfers * 5) for name in order}
        poll_differences.append(polls["instrumented"] - polls["plain"])
        target.get_new_notifs()  # the notifications, drained between rounds
    result = {
        "size": size, "rounds": rounds, "transfers": transfers,
        "plain_ns": statistics.median(times["plain"]),
        "instrumented_ns": statistics.median(times["instrumented"]),
        "added_ns": statistics.median(differences),
        "added_ns_quartiles": statistics.quantiles(differences, n=4) if rounds >= 4 else None,
        "polls_per_transfer": {
            "plain": POLLS.get(plain, 0) / ((rounds + 1) * transfers),
            "instrumented": POLLS.get(wrapped, 0) / ((rounds + 1) * transfers)},
        "poll_added_ns": statistics.median(poll_differences),
        "blocks_per_transfer": {
            "plain": blocks_per_transfer(plain, *args, min(transfers, 500)),
            "instrumented": blocks_per_transfer(wrapped, *args, min(transfers, 500)),
        },
        "instrument_errors": instrument.errors(),
    }
    print(json.dumps(result), flush=True)
    sys.stdout.flush()
    os._exit(0)  # NIXL 1.5.1's bundled libnl crashes at exit after UCX was loaded


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
