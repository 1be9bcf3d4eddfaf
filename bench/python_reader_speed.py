#!/usr/bin/env python3
"""Times two versions of the Python reader side by side, in one process.

usage: python3 bench/python_reader_speed.py FILE BASELINE_READER [READER] [--runs N]

Runs each reader's main() on FILE (a flight recorder), interleaved, N times each (default 41),
in text and in --json, output to a StringIO; prints the median of each and their ratio. One
process, so that the interpreter's start (about 90 ms of CPU here, more than a 4,096-slot file
takes to print) is left out, and interleaved, so that both see the same machine. READER is
examples/python/telemetry_reader.py by default. With a full 4,096-slot file (the default
size) and, as the baseline, the reader as it was at ac3130d:

    mkdir /tmp/fr && NIXL_TELEMETRY_ENABLE=y NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH=/tmp/fr \
        build/release/examples/xfer_demo/xfer_demo --total 64M --block 4K
    git show ac3130d:examples/python/telemetry_reader.py > /tmp/reader_ac3130d.py
    python3 bench/python_reader_speed.py /tmp/fr/xfer_initiator /tmp/reader_ac3130d.py
"""

import contextlib
import importlib.util
import io
import os
import statistics
import sys
import time


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv):
    runs = 41
    if "--runs" in argv:
        i = argv.index("--runs")
        runs = int(argv[i + 1])
        del argv[i:i + 2]
    if len(argv) not in (2, 3):
        sys.exit(__doc__)
    here = os.path.dirname(os.path.abspath(__file__))
    path = argv[0]
    readers = {
        "baseline": load(argv[1], "baseline_reader"),
        "reader": load(argv[2] if len(argv) == 3 else
                       os.path.join(here, "..", "examples", "python", "telemetry_reader.py"),
                       "reader"),
    }
    for mode in ([], ["--json"]):
        args = ["--telemetry_path", path] + mode
        outputs = {}
        times = {name: [] for name in readers}
        for _ in range(runs):
            for name, module in readers.items():
                out = io.StringIO()
                start = time.perf_counter()
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
                    module.main(list(args))
                times[name].append(time.perf_counter() - start)
                outputs[name] = out.getvalue()
        same = outputs["baseline"] == outputs["reader"]
        base, new = (statistics.median(times[n]) for n in ("baseline", "reader"))
        print(f"{' '.join(mode) or 'text':6}  baseline {base * 1e3:6.2f} ms  "
              f"reader {new * 1e3:6.2f} ms  {base / new:4.1f}x faster  "
              f"({runs} runs each, medians; same output: {'yes' if same else 'NO'})")


if __name__ == "__main__":
    main(sys.argv[1:])
