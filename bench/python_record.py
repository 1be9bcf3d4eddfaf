#!/usr/bin/env python3
"""The cost of xtel.Telemetry.record_transfer per call, paired with nanobind calls that do
nothing in the same run (docs/python.md).

usage: python bench/python_record.py [--rounds N] [--calls M]

Run with the Python of an environment the xtel wheel is installed in. Times, interleaved, N
rounds (default 201) of M calls (default 2,000) each of:
  noop      a property of the pipeline read (Telemetry.closed): a nanobind call, no argument;
  off       record_transfer on a pipeline with telemetry off: the same call and the same
            argument conversions, no record;
  on        record_transfer into a node-exporter pipeline, peer and times given by keyword,
            as an engine calls it (one staged record; the flusher folds it elsewhere);
  on_plain  the same with positional arguments only (an untimed, counted transfer);
and prints each one's median ns per call and its ratio to noop. One process, interleaved, so
that every case sees the same machine; the loop's own cost is in each figure alike. The
pipeline is flushed between rounds, outside the timing, so that no record finds its staging
ring full (a dropped record costs less than a staged one); the drops are printed.
"""

import os
import statistics
import sys
import tempfile
import time

import xtel


def per_call_ns(fn, calls):
    started = time.perf_counter_ns()
    fn(calls)
    return (time.perf_counter_ns() - started) / calls


def cases(on, off):
    def noop(n):
        for _ in range(n):
            on.closed

    def recorded_off(n):
        for _ in range(n):
            off.record_transfer("write", "decode-1", 4096, post_us=2, xfer_us=30)

    def recorded_on(n):
        for _ in range(n):
            on.record_transfer("write", "decode-1", 4096, post_us=2, xfer_us=30)

    def recorded_plain(n):
        for _ in range(n):
            on.record_transfer("write", "decode-1", 4096)

    return {"noop": noop, "off": recorded_off, "on": recorded_on, "on_plain": recorded_plain}


def main(argv):
    rounds, calls = 201, 2_000
    if "--rounds" in argv:
        rounds = int(argv[argv.index("--rounds") + 1])
    if "--calls" in argv:
        calls = int(argv[argv.index("--calls") + 1])
    with tempfile.TemporaryDirectory() as d:
        os.environ.update(NIXL_TELEMETRY_ENABLE="y", NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH=d)
        on = xtel.Telemetry("bench-on", exporter="node")
        os.environ["NIXL_TELEMETRY_ENABLE"] = "n"
        off = xtel.Telemetry("bench-off")
        timed = {name: [] for name in cases(on, off)}
        for _ in range(rounds):
            for name, fn in cases(on, off).items():
                timed[name].append(per_call_ns(fn, calls))
                on.flush()
        dropped = on.stats().records_dropped
        on.close()
        off.close()
    base = statistics.median(timed["noop"])
    print(f"xtel {xtel.__version__}, Python {sys.version.split()[0]}, {rounds} rounds of "
          f"{calls} calls (median ns per call; ratio to noop)")
    for name, samples in timed.items():
        m = statistics.median(samples)
        print(f"  {name:9s} {m:7.1f} ns  x{m / base:5.2f}")
    print(f"  records dropped (full staging ring between flushes): {dropped}")


if __name__ == "__main__":
    main(sys.argv[1:])
