#!/usr/bin/env python3
"""What xtel.instrument.nixl adds to each NIXL transfer, paired against the same calls
unwrapped in the same run (docs/python.md, "Instrumenting NIXL").

usage: python bench/python_instrument_nixl.py [--pairs N] [--size BYTES] [--smoke]

Run with the Python of an environment holding the xtel wheel and NIXL's (tests/python's fresh
venv, for one). Two real NIXL agents in this process over UCX on host memory; each transfer is
vLLM's: make_prepped_xfer (a READ of one --size block, default 4096, with a notification),
transfer, check_xfer_state until done, release_xfer_handle. The transfers come in pairs, one
through NIXL's own methods (the class's, saved before enable()) and one through the
instrumented ones, in an order that alternates pair by pair; N pairs (default 20,000), after
2,000 untimed. Each transfer is timed whole and call by call, so that a pair's difference is
what the instrumentation added to that transfer: a pair is a few tens of microseconds apart, so
that whatever else the machine does (NIXL's progress thread, the pipeline's flusher, another
process) falls on both alike, where rounds of thousands of transfers each differed by more than
the wrappers cost. Prints the medians per transfer of each side, the median of the pairs'
differences with its quartiles (what the instrumentation adds), the same by call, the polls a
transfer took, the cost of one poll of a transfer already done, and the blocks tracemalloc sees
allocated per transfer by each. Then the target's side: pairs (a quarter as many) of the
get_new_notifs call that hands out one transfer's notification, NIXL's own against the
instrumented one. Exits 0. --smoke: 200 pairs, to check the bench runs.
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
PARTS = ("make", "post", "polls", "release")


def one_transfer(calls, agent, local_side, remote_side, clock=time.perf_counter_ns):
    """One transfer through `calls`: the ns of each of its parts (PARTS), and its polls."""
    make, post, check, release = calls
    t0 = clock()
    h = make(agent, "READ", local_side, [0], remote_side, [0], b"req")
    t1 = clock()
    state = post(agent, h)
    t2 = clock()
    polls = 0
    while state == "PROC":
        state = check(agent, h)
        polls += 1
    t3 = clock()
    if state != "DONE":
        raise RuntimeError(f"a transfer ended {state}")
    release(agent, h)
    t4 = clock()
    return (t1 - t0, t2 - t1, t3 - t2, t4 - t3), polls


def notified_poll_ns(get, target, made, clock=time.perf_counter_ns):
    """`made()` makes a transfer with a notification; then `get` (get_new_notifs) is polled
    until it hands that notification out: the ns of that one call."""
    made()
    while True:
        t0 = clock()
        got = get(target)
        t1 = clock()
        if got:
            return t1 - t0


def loop(calls, agent, local_side, remote_side, n):
    for _ in range(n):
        one_transfer(calls, agent, local_side, remote_side)


def per_poll_ns(check, agent, handle, n):
    """check_xfer_state of a transfer done and recorded: what each poll of an engine costs."""
    started = time.perf_counter_ns()
    for _ in range(n):
        check(agent, handle)
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
    pairs, size = 20_000, 4096
    if "--pairs" in argv:
        pairs = int(argv[argv.index("--pairs") + 1])
    if "--size" in argv:
        size = int(argv[argv.index("--size") + 1])
    if "--smoke" in argv:
        pairs = 200
    os.environ.setdefault("NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH",
                          tempfile.mkdtemp(prefix="xtel-bench-nixl-"))
    plain = tuple(getattr(nixl_agent, m) for m in METHODS)
    plain_get = nixl_agent.get_new_notifs
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
    for _ in range(min(pairs, 2_000)):  # warm both
        one_transfer(plain, *args)
        one_transfer(wrapped, *args)
    got = {"plain": [], "instrumented": []}
    polls = {"plain": 0, "instrumented": 0}
    for i in range(pairs):
        for name in (("plain", "instrumented") if i % 2 == 0 else ("instrumented", "plain")):
            parts, n = one_transfer(plain if name == "plain" else wrapped, *args)
            got[name].append(parts)
            polls[name] += n
        if i % 1000 == 999:
            target.get_new_notifs()  # the notifications, drained as an engine's target does
    totals = {name: [sum(p) for p in got[name]] for name in got}
    added = [w - p for w, p in zip(totals["instrumented"], totals["plain"])]
    done = plain[0](initiator, "READ", local_side, [0], remote_side, [0], b"")
    state = plain[1](initiator, done)
    while state == "PROC":
        state = plain[2](initiator, done)
    poll_added = [per_poll_ns(wrapped[2], initiator, done, 5_000) -
                  per_poll_ns(plain[2], initiator, done, 5_000) for _ in range(5)]
    # The target's side: the get_new_notifs call that hands out one transfer's notification,
    # NIXL's own and the instrumented one in pairs as above.
    target.get_new_notifs()
    gets = {"plain": plain_get, "instrumented": nixl_agent.get_new_notifs}
    made = lambda: one_transfer(plain, *args)  # noqa: E731
    notified = {"plain": [], "instrumented": []}
    for i in range(max(pairs // 4, 50)):
        for name in (("plain", "instrumented") if i % 2 == 0 else ("instrumented", "plain")):
            notified[name].append(notified_poll_ns(gets[name], target, made))
    notified_added = [w - p for w, p in zip(notified["instrumented"], notified["plain"])]
    result = {
        "size": size, "pairs": pairs,
        "plain_ns": statistics.median(totals["plain"]),
        "instrumented_ns": statistics.median(totals["instrumented"]),
        "added_ns": statistics.median(added),
        "added_ns_quartiles": statistics.quantiles(added, n=4),
        "added_ns_by_call": {
            part: statistics.median(w[k] - p[k] for w, p in zip(got["instrumented"],
                                                                 got["plain"]))
            for k, part in enumerate(PARTS)},
        "polls_per_transfer": {name: polls[name] / pairs for name in polls},
        "poll_added_ns": statistics.median(poll_added),
        "target_notified_ns": statistics.median(notified["plain"]),
        "target_added_ns": statistics.median(notified_added),
        "target_added_ns_quartiles": statistics.quantiles(notified_added, n=4),
        "blocks_per_transfer": {
            "plain": blocks_per_transfer(plain, *args, min(pairs, 500)),
            "instrumented": blocks_per_transfer(wrapped, *args, min(pairs, 500)),
        },
        "instrument_errors": instrument.errors(),
    }
    print(json.dumps(result), flush=True)
    sys.stdout.flush()
    os._exit(0)  # NIXL 1.5.1's bundled libnl crashes at exit after UCX was loaded


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
