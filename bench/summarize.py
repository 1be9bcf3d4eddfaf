#!/usr/bin/env python3
"""Reads Google Benchmark JSON (with repetitions) and prints a markdown table of medians and
ratios to each case's baseline, then checks the harness targets (docs/performance.md).

    summarize.py bench.json [--harness-seconds N] [--windows FILE]

--harness-seconds: how long the whole harness ran (scripts/bench passes it for a whole run),
checked against its 5-minute target.
--windows: the paired cases' window ratios (XTEL_BENCH_WINDOWS_OUT, bench/agent_bench.cpp),
pooled over each case's repetitions: the paired targets are judged on them when given.
"""

import json
import sys
from collections import defaultdict

# Baseline of each family of cases: a ratio says how many times the case costs its baseline.
BASELINES = [
    ("BM_baseline/", "BM_floor/relaxed_fetch_add"),
    ("BM_transfer_tax/", "BM_floor/spsc_ring"),
    ("BM_counter_add/", "BM_baseline/atomic_double_add"),
    ("BM_gauge_set/", "BM_baseline/atomic_double_add"),
    ("BM_record_event/", "BM_baseline/mutex_staging_event"),
]


def load(path):
    with open(path) as f:
        data = json.load(f)
    runs = defaultdict(dict)
    for b in data["benchmarks"]:
        if b.get("run_type") != "aggregate":
            continue
        name = b["run_name"]
        agg = b["aggregate_name"]
        runs[name][agg] = b
    return data.get("context", {}), runs


def load_windows(path):
    """(case, prefix) -> the sorted ratios of every window the case measured."""
    pooled = defaultdict(list)
    if path is None:
        return pooled
    with open(path) as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if len(fields) == 3:
                pooled[(fields[0], fields[1])].append(float(fields[2]))
    for ratios in pooled.values():
        ratios.sort()
    return pooled


def fmt_ns(x):
    return f"{x:.2f}" if x < 100 else f"{x:.0f}"


def main(path, harness_seconds=None, windows_path=None):
    context, runs = load(path)
    windows = load_windows(windows_path)
    med = {n: r["median"] for n, r in runs.items() if "median" in r}
    std = {n: r.get("stddev", {}).get("cpu_time", 0.0) for n, r in runs.items()}

    def ns(m):
        """A case's cost per operation: the record alone where the case times its flush apart
        (record_ns, bench_util.hpp's split_clock), else its CPU time."""
        return m.get("record_ns", m["cpu_time"])

    def cpu(name):
        return ns(med[name]) if name in med else None

    def ucx_case(name):
        # Google Benchmark appends what a case sets ("/min_time:4.000", "/real_time").
        for n in sorted(med):
            rest = n[len(name):].split("/")[1:] if n.startswith(name + "/") else None
            if n == name or (rest and all(r == "real_time" or r.startswith("min_time:")
                                          for r in rest)):
                return med[n]
        return {}

    def baseline_of(name):
        if name.startswith("BM_ucx_write/"):
            parts = name.split("/")
            if len(parts) < 3:
                return None
            # Under attack compares with the same exporter left alone; the rest with "off".
            base = "prometheus" if parts[2] == "prometheus_under_attack" else "off"
            return "/".join(parts[:2] + [base] + parts[3:])
        for prefix, base in BASELINES:
            if name.startswith(prefix):
                return base
        return None

    print(f"Machine: {context.get('num_cpus', '?')} CPUs at {context.get('mhz_per_cpu', '?')} MHz, "
          f"{context.get('date', '')}")
    print()
    print("| case | median CPU ns/op | flush ns/op | rate | baseline | ratio to baseline "
          "| x spsc_ring | mutex_staging / case |")
    print("|---|---:|---:|---:|---|---:|---:|---:|")
    floor = cpu("BM_floor/spsc_ring")
    one_lock = cpu("BM_transfer_tax/mutex_staging")
    for name in sorted(med):
        m = med[name]
        rate = ""
        if "items_per_second" in m:
            rate = f"{m['items_per_second'] / 1e6:.1f} M items/s"
        if "bytes_per_second" in m:
            rate = f"{m['bytes_per_second'] / 1e9:.2f} GB/s"
        base = baseline_of(name)
        ratio = ""
        if base and base in med and base != name:
            if name.startswith("BM_ucx_write/"):
                # Throughput: on/off of bytes per second.
                b = med[base].get("bytes_per_second")
                if b:
                    ratio = f"{m.get('bytes_per_second', 0) / b:.3f}"
            elif ns(med[base]) > 0.05:
                ratio = f"{ns(m) / ns(med[base]):.3f}"
        # Paired cases carry their own baseline, measured in the same case: the median of
        # their windows pooled over the repetitions where --windows was given.
        case = "/".join(p for p in name.split("/")
                        if p != "real_time" and not p.startswith("min_time:"))
        for prefix, label in (("telemetry", "off, same case"), ("attack", "no attack, same case"),
                              ("scrape", "not scraped, same case"),
                              ("record", "floor's record, same case"),
                              ("peer", "prometheus-cpp's record, same case")):
            if f"{prefix}_ratio_median" in m:
                pooled = windows.get((case, prefix))
                value = pooled[len(pooled) // 2] if pooled else m[f"{prefix}_ratio_median"]
                base, ratio = label, f"{value:.3f}"
        to_floor = to_lock = ""
        if name.startswith(("BM_transfer_tax/", "BM_floor/spsc_ring")) and ns(m) > 0.05:
            if floor:
                to_floor = f"{ns(m) / floor:.2f}"
            if one_lock:
                to_lock = f"{one_lock / ns(m):.1f}"
        flush = f"{m['flush_ns']:.2f}" if "flush_ns" in m else ""
        print(f"| {name} | {fmt_ns(ns(m))} | {flush} | {rate} | {base or ''} | {ratio} "
              f"| {to_floor} | {to_lock} |")
    print()
    print("ns/op of a case with a flush column is the record alone (record_ns); its flush, "
          "timed apart, is the flush column.")

    print()
    print("Targets:")
    results = []

    def target(ok, text):
        results.append(ok)
        print(f"- [{'x' if ok else ' '}] {text}")

    def paired_ratio(name, prefix):
        """A case that alternates windows (agent_bench.cpp): its median window ratio and
        quartiles, over every window of its repetitions when --windows was given, else the
        median over repetitions of each one's median, and how; None when it did not run."""
        paired = ucx_case(name)
        if f"{prefix}_ratio_median" not in paired:
            return None
        pooled = windows.get((name, prefix))
        if pooled:
            n = len(pooled)
            return (pooled[n // 2], pooled[n // 4], pooled[(3 * n) // 4],
                    f"median of {n} windows pooled over the repetitions")
        return (paired[f"{prefix}_ratio_median"], paired.get(f"{prefix}_ratio_q1", 0),
                paired.get(f"{prefix}_ratio_q3", 0),
                f"median over repetitions of medians of "
                f"{paired.get(f'{prefix}_pairs', 0):.0f} windows")

    def paired_target(name, prefix, what, extra="", within=0.01):
        """The target of a case that alternates windows: its median window ratio (paired_ratio)
        within `within` of 1. False when the case did not run."""
        found = paired_ratio(name, prefix)
        if found is None:
            return False
        r, q1, q3, how = found
        target(r >= 1 - within,
               f"{name}: {100 * (r - 1):+.2f}% {what} ({how}, quartiles "
               f"{100 * (q1 - 1):+.2f}% to {100 * (q3 - 1):+.2f}%){extra}, "
               f"within {100 * within:.0f}%")
        return True

    # Issue 17: the record against the floor and NIXL's shape today, medians of one run.
    mutex = cpu("BM_transfer_tax/mutex_staging")
    floor = cpu("BM_floor/spsc_ring")
    for variant in ("buffer", "prometheus", "node", "buffer_prometheus"):
        name = f"BM_transfer_tax/{variant}"
        v = cpu(name)
        if v is None:
            continue
        if floor:
            target(v <= 1.25 * floor, f"{name}: {v:.2f} ns, {v / floor:.2f}x BM_floor/spsc_ring "
                                      f"({floor:.2f} ns), <= 1.25x")
        if mutex:
            target(mutex / v >= 10.0, f"{name}: {mutex / v:.1f}x cheaper than one-lock "
                                      f"mutex_staging ({mutex:.1f} ns), >= 10x")
        recorder = cpu("BM_floor/spsc_ring_recorder")
        if recorder:
            print(f"- (for information) {name}: {v / recorder:.2f}x BM_floor/spsc_ring_recorder "
                  f"({recorder:.2f} ns: the floor's record, drained with xtel's flush work)")
        two = cpu(f"{name}/threads:2")
        if two is not None:
            target(two <= 1.3 * v, f"{name}/threads:2: {two:.2f} ns per transfer per thread, "
                                   f"{two / v:.2f}x single-thread, <= 1.3x")
    # Issue 32 restated the record's targets (item 5) against the floor doing the same job.
    # Its two ratios are checked on BM_record_paired/buffer (below); the medians of the two
    # cases measured apart are shown beside them, for information: each can land on either side
    # of one of the host's slow spells, which move the floor by half. Two runs of the same
    # binary gave 1.57x and 1.78x here and 1.44x and 1.27x paired (docs/performance.md).
    buf = med.get("BM_transfer_tax/buffer", {})
    rec_floor = med.get("BM_floor/spsc_ring_recorder", {})
    if "record_ns" in buf and "record_ns" in rec_floor:
        r, f = buf["record_ns"], rec_floor["record_ns"]
        print(f"- (separate cases, for information) BM_transfer_tax/buffer record: {r:.2f} ns, "
              f"{r / f:.2f}x BM_floor/spsc_ring_recorder's ({f:.2f} ns); the target is the "
              f"paired case's")
        line = med.get("BM_floor/spsc_ring_line", {}).get("record_ns")
        if line:
            print(f"- (for information) BM_floor/spsc_ring_line record: {line:.2f} ns, the "
                  f"floor with a 64-byte record as xtel's ({r / line:.2f}x of it)")
        # Where the record's time goes past the floor (lookup_bench.cpp): the same ring
        # found per record through a thread_local pointer, and xtel's staging ring found as a
        # pipeline finds it.
        for name, what in (("BM_floor/spsc_ring_recorder_tls", "the floor's ring found through "
                            "a thread_local pointer"),
                           ("BM_floor/staging_ring_registry", "xtel's staging ring found as a "
                            "pipeline finds it (ring_registry::local_ring)")):
            v = med.get(name, {}).get("record_ns")
            if v:
                print(f"- (for information) {name} record: {v:.2f} ns, {v / f:.2f}x the floor: "
                      f"{what}")
        m = med.get("BM_transfer_tax/mutex_staging", {}).get("record_ns")
        if m:
            target(m / r >= 2.5, f"BM_transfer_tax/buffer record: {m / r:.1f}x below one-lock "
                                 f"mutex_staging's ({m:.1f} ns), >= 2.5x")
        # The whole work per transfer: the record and its share of the flush, both CPU time.
        whole = r + buf.get("flush_ns", 0)
        whole_floor = f + rec_floor.get("flush_ns", 0)
        if "flush_ns" in buf and "flush_ns" in rec_floor:
            print(f"- (separate cases, for information) BM_transfer_tax/buffer record and "
                  f"flush: {whole:.2f} ns, {whole / whole_floor:.2f}x "
                  f"BM_floor/spsc_ring_recorder's ({whole_floor:.2f} ns); the target is the "
                  f"paired case's")
    # Item 5's two ratios, in neighbouring windows (paired_record_bench.cpp): the record and
    # the floor's within microseconds of each other, so that a slow spell of the host falls on
    # both sides of a pair, where the medians above can each land on either side of one.
    for prefix, what in (("record", "record"), ("whole", "record and flush")):
        found = paired_ratio("BM_record_paired/buffer", prefix)
        if found is None:
            continue
        r, q1, q3, how = found
        target(r <= 1.5, f"BM_record_paired/buffer: the {what} {r:.2f}x "
                         f"BM_floor/spsc_ring_recorder's in neighbouring windows ({how}, "
                         f"quartiles {q1:.2f}x to {q3:.2f}x), <= 1.5x")
    # Issue 46 item 8: against a real peer, prometheus-cpp recording per transfer what NIXL's
    # Prometheus exporter records (peer_bench.cpp), in the same run. The peer does all its work
    # in its record; xtel's whole work for a transfer is its record and its share of the flush
    # that folds it into the model, so the target is on their sum. It is judged on the paired
    # cases where they ran (the separate cases' medians are shown beside them), else on those.
    peer = med.get("BM_transfer_tax/prometheus_cpp", {}).get("record_ns")
    for variant in ("prometheus", "node"):
        name = f"BM_transfer_tax/{variant}"
        m = med.get(name, {})
        whole = m.get("record_ns", 0) + m.get("flush_ns", 0)
        separate = None
        if peer and "record_ns" in m and "flush_ns" in m:
            separate = (f"{name}: record {m['record_ns']:.2f} ns, {m['record_ns'] / peer:.3f}x "
                        f"BM_transfer_tax/prometheus_cpp's {peer:.2f} ns; record and flush "
                        f"{whole:.2f} ns, {whole / peer:.2f}x")
        found = paired_ratio(f"BM_peer_paired/{variant}", "peer_whole")
        if found is not None:
            if separate:
                print(f"- (separate cases, for information) {separate}; the target is the "
                      f"paired case's")
            r, q1, q3, how = found
            record = paired_ratio(f"BM_peer_paired/{variant}", "peer")
            alone = f"; the record alone {record[0]:.3f}x" if record else ""
            target(r <= 0.5, f"BM_peer_paired/{variant}: a transfer's record and its share of "
                             f"the flush {r:.2f}x prometheus-cpp's record in neighbouring "
                             f"windows ({how}, quartiles {q1:.2f}x to {q3:.2f}x){alone}, <= 0.5x")
        elif separate:
            target(whole <= 0.5 * peer, f"{separate} (separate cases), <= 0.5x")
        two = med.get(f"{name}/threads:2", {}).get("record_ns")
        peer_two = med.get("BM_transfer_tax/prometheus_cpp/threads:2", {}).get("record_ns")
        if two and peer_two:
            print(f"- (for information) {name}/threads:2: record {two:.2f} ns per transfer per "
                  f"thread, {two / peer_two:.3f}x BM_transfer_tax/prometheus_cpp/threads:2's "
                  f"({peer_two:.2f} ns, both threads recording into one agent's series)")
    dis = cpu("BM_transfer_tax/disabled")
    empty = cpu("BM_floor/empty_loop")
    if dis is not None and empty is not None:
        noise = max(0.25, 2 * max(std.get("BM_transfer_tax/disabled", 0),
                                  std.get("BM_floor/empty_loop", 0)))
        target(abs(dis - empty) <= noise,
               f"BM_transfer_tax/disabled (telemetry<>): {dis:.3f} ns vs empty loop "
               f"{empty:.3f} ns, within noise ({noise:.2f} ns)")
    if "BM_drain/buffer" in med:
        rate = med["BM_drain/buffer"].get("items_per_second", 0) / 1e6
        target(rate >= 50.0, f"BM_drain/buffer: {rate:.1f} M events/s >= 50 M events/s")
    def ucx(size, variant):
        for suffix in ("", "/real_time"):
            m = med.get(f"BM_ucx_write/{size}/{variant}{suffix}")
            if m:
                return m.get("bytes_per_second")
        return None

    # Throughput with telemetry against off. The *_paired cases measure it within one case
    # (alternating windows, agent_bench.cpp), and off_paired shows the method's own noise; where
    # they ran they decide, since separate cases differ by more than 1% on a shared machine.
    for size in ("4096", "65536"):
        floor = ucx_case(f"BM_ucx_write/{size}/off_paired")
        pooled_floor = windows.get((f"BM_ucx_write/{size}/off_paired", "telemetry"))
        noise = ""
        if pooled_floor:
            noise = (f"; off against off {100 * (pooled_floor[len(pooled_floor) // 2] - 1):+.2f}%"
                     f" over {len(pooled_floor)} windows (the method's noise)")
        elif "telemetry_ratio_median" in floor:
            noise = (f"; off against off {100 * (floor['telemetry_ratio_median'] - 1):+.2f}% "
                     f"(the method's noise)")
        for variant in ("buffer", "prometheus"):
            if paired_target(f"BM_ucx_write/{size}/{variant}_paired", "telemetry",
                             f"against off in the neighbouring windows", noise):
                continue
            off = ucx(size, "off")
            on = ucx(size, variant)
            if off and on:
                target(on >= 0.99 * off,
                       f"BM_ucx_write/{size}: {variant} {on / 1e9:.2f} GB/s vs off "
                       f"{off / 1e9:.2f} GB/s ({100 * (on / off - 1):+.2f}%), within 1%")
    # Issue 32 item 4: every transfer timed, against off; and the floors of reading the
    # agent's clock once or twice per post with nothing else, in the same kind of case.
    if paired_target("BM_ucx_write/4096/buffer_timed_paired", "telemetry",
                     "every transfer timed, against off in the neighbouring windows",
                     within=0.05):
        for n in ("1", "2"):
            found = paired_ratio(f"BM_ucx_write/4096/clock{n}_floor_paired", "telemetry")
            if found:
                print(f"- (for information) BM_ucx_write/4096/clock{n}_floor_paired: "
                      f"{100 * (found[0] - 1):+.2f}%, {n} clock reading(s) per post and "
                      f"nothing else, against off ({found[3]})")
    for size in ("4096", "65536"):
        quiet = ucx_case(f"BM_ucx_write/{size}/prometheus")
        attacked = ucx_case(f"BM_ucx_write/{size}/prometheus_under_attack")
        if quiet.get("bytes_per_second") and attacked.get("bytes_per_second"):
            q, a = quiet["bytes_per_second"], attacked["bytes_per_second"]
            text = (f"BM_ucx_write/{size}: prometheus under attack {a / 1e9:.2f} GB/s vs quiet "
                    f"{q / 1e9:.2f} GB/s ({100 * (a / q - 1):+.2f}%), within 1%")
            if "attack_ratio_median" in ucx_case(f"BM_ucx_write/{size}/prometheus_attack_paired"):
                # Two cases seconds apart: the paired case below decides.
                print(f"- (separate cases, for information) {text}")
            else:
                target(a >= 0.99 * q, text)
            failed = attacked.get("scrapes_failed", 0)
            target(failed == 0, f"BM_ucx_write/{size}/prometheus_under_attack: "
                                f"{attacked.get('scrapes_ok', 0):.0f} scrapes answered 200 during "
                                f"the attack, {failed:.0f} not")
    for size in ("4096", "65536"):
        paired = ucx_case(f"BM_ucx_write/{size}/prometheus_attack_paired")
        paired_target(f"BM_ucx_write/{size}/prometheus_attack_paired", "attack",
                      "under attack against the quiet windows on either side",
                      f"; endpoint thread {paired.get('endpoint_cpu_pct', 0):.1f}% of a core, "
                      f"attacker {paired.get('attacker_cpu_pct', 0):.1f}%")
    if harness_seconds is not None:
        target(harness_seconds <= 300, f"the whole harness ran in {harness_seconds} s "
                                       f"({harness_seconds / 60:.1f} min), <= 5 min")
    missed = results.count(False)
    print()
    print(f"{len(results) - missed} of {len(results)} targets met")
    return 0


if __name__ == "__main__":
    argv = sys.argv[1:]
    options = {"--harness-seconds": None, "--windows": None}
    for option in options:
        if option in argv:
            i = argv.index(option)
            if i + 1 >= len(argv):
                sys.exit(__doc__)
            options[option] = argv[i + 1]
            del argv[i:i + 2]
    if len(argv) != 1:
        sys.exit(__doc__)
    seconds = options["--harness-seconds"]
    sys.exit(main(argv[0], None if seconds is None else int(seconds), options["--windows"]))
