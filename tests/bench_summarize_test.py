#!/usr/bin/env python3
"""Checks bench/summarize.py's judgement of issue 46's peer target on small Google Benchmark
JSON fixtures written here: a transfer's whole work in xtel's prometheus and node pipelines
(record_ns plus flush_ns) at most half of prometheus-cpp's record (BM_transfer_tax/prometheus_cpp),
judged on the paired cases (BM_peer_paired/<pipeline>) where they ran, on the windows pooled
over the repetitions where given, and on the separate cases otherwise.

Usage: bench_summarize_test.py SOURCE_DIR"""
import contextlib
import importlib.util
import io
import json
import pathlib
import sys
import tempfile
import unittest

SOURCE_DIR = pathlib.Path(sys.argv.pop(1) if len(sys.argv) > 1 else ".")


def load_summarize():
    spec = importlib.util.spec_from_file_location("summarize",
                                                  SOURCE_DIR / "bench" / "summarize.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


summarize = load_summarize()


def median_row(name, **counters):
    """One case's median aggregate, as Google Benchmark writes it with repetitions."""
    row = {"name": f"{name}_median", "run_name": name, "run_type": "aggregate",
           "aggregate_name": "median", "cpu_time": counters.get("record_ns", 1.0)}
    row.update(counters)
    return row


def run(rows, windows=None):
    """summarize.py's output for the cases `rows`, with the window lines `windows`
    ((case, prefix, ratio) each) when given."""
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "bench.json"
        path.write_text(json.dumps({"context": {}, "benchmarks": rows}))
        windows_path = None
        if windows is not None:
            windows_path = pathlib.Path(tmp) / "bench.json.windows"
            windows_path.write_text("".join(f"{c}\t{p}\t{r}\n" for c, p, r in windows))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            summarize.main(str(path), None, None if windows_path is None else str(windows_path))
        return out.getvalue()


def target_line(text, start):
    """The one target line of `text` that starts with `start` after its check box."""
    found = [line for line in text.splitlines()
             if line.startswith(("- [x] ", "- [ ] ")) and line[6:].startswith(start)]
    if len(found) != 1:
        raise AssertionError(f"expected one target line starting {start!r}, got {found}:\n{text}")
    return found[0]


# prometheus-cpp 60 ns per transfer: half of it is 30 ns.
PEER = median_row("BM_transfer_tax/prometheus_cpp", record_ns=60.0, flush_ns=0.0)


class PeerTarget(unittest.TestCase):
    def test_separate_cases_meet_the_target_at_half_the_peer_and_miss_it_just_above(self):
        text = run([PEER,
                    median_row("BM_transfer_tax/prometheus", record_ns=2.0, flush_ns=28.0),
                    median_row("BM_transfer_tax/node", record_ns=3.0, flush_ns=28.0)])
        met = target_line(text, "BM_transfer_tax/prometheus: ")
        self.assertTrue(met.startswith("- [x] "), met)
        self.assertIn("record 2.00 ns, 0.033x", met)
        self.assertIn("record and flush 30.00 ns, 0.50x", met)
        missed = target_line(text, "BM_transfer_tax/node: ")
        self.assertTrue(missed.startswith("- [ ] "), missed)
        self.assertIn("record and flush 31.00 ns, 0.52x", missed)
        self.assertIn("1 of 2 targets met", text)

    def test_the_paired_case_decides_where_it_ran_and_the_separate_case_is_shown_beside(self):
        paired = median_row("BM_peer_paired/node", record_ns=2.0, flush_ns=20.0, peer_ns=60.0,
                            peer_ratio_median=0.04, peer_whole_ratio_median=0.45,
                            peer_whole_ratio_q1=0.4, peer_whole_ratio_q3=0.5,
                            peer_whole_pairs=9)
        text = run([PEER, paired,
                    median_row("BM_transfer_tax/node", record_ns=3.0, flush_ns=40.0)])
        line = target_line(text, "BM_peer_paired/node: ")
        self.assertTrue(line.startswith("- [x] "), line)
        self.assertIn("0.45x prometheus-cpp's record", line)
        self.assertIn("the record alone 0.040x", line)
        self.assertIn("- (separate cases, for information) BM_transfer_tax/node: record 3.00 ns",
                      text)
        self.assertIn("1 of 1 targets met", text)

    def test_the_pooled_windows_decide_over_the_repetitions_medians(self):
        # The repetitions' medians say met (0.45); the median of every window says missed.
        paired = median_row("BM_peer_paired/prometheus", record_ns=2.0, flush_ns=20.0,
                            peer_ratio_median=0.04, peer_whole_ratio_median=0.45)
        windows = [("BM_peer_paired/prometheus", "peer_whole", r)
                   for r in (0.45, 0.7, 0.8, 0.9, 0.48)]
        windows += [("BM_peer_paired/prometheus", "peer", r) for r in (0.03, 0.05, 0.06)]
        line = target_line(run([PEER, paired], windows), "BM_peer_paired/prometheus: ")
        self.assertTrue(line.startswith("- [ ] "), line)
        self.assertIn("0.70x prometheus-cpp's record", line)
        self.assertIn("median of 5 windows pooled", line)
        self.assertIn("quartiles 0.48x to 0.80x", line)
        self.assertIn("the record alone 0.050x", line)

    def test_no_peer_target_is_judged_without_the_peer_case(self):
        text = run([median_row("BM_transfer_tax/prometheus", record_ns=2.0, flush_ns=28.0)])
        self.assertNotIn("prometheus_cpp", text)
        self.assertIn("0 of 0 targets met", text)


if __name__ == "__main__":
    unittest.main()
