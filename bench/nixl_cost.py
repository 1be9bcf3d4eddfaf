#!/usr/bin/env python3
"""What telemetry costs a real NIXL transfer loop, each exporter against none, in one run
(issue 47, item 6; docs/performance.md, "NIXL's exporters and xtel's plug-in").

NIXL reads its telemetry configuration once, when an agent is made, from the process
environment; so each configuration is a process of its own, a worker: two real NIXL agents
(nixl-cu12 1.5.1, from the virtual environment scripts/deps' xtel_install_nixl_test_deps makes)
over UCX on host memory, the initiator WRITE-ing one registered block into the target's, one
prepared transfer reposted as soon as it is done. The configurations:

  off         no telemetry
  off2        no telemetry, a second process: the method's floor (two processes that should cost
              the same, measured as the others are)
  buffer      NIXL's BUFFER exporter (NIXL_TELEMETRY_ENABLE=y, no exporter named, a ring in
              NIXL_TELEMETRY_DIR), drained by this process as its one reader
  prometheus  NIXL's Prometheus exporter (NIXL_TELEMETRY_EXPORTER=prometheus, a port of its own)
  xtel        xtel's plug-in (NIXL_TELEMETRY_EXPORTER=xtel), linked into the venv's NIXL by
              `xtel nixl install`, its node file on /dev/shm

Every telemetry configuration flushes every 10 ms (NIXL_TELEMETRY_RUN_INTERVAL) into a staging
queue of 65,536 events (NIXL_TELEMETRY_BUFFER_SIZE): at NIXL's defaults (4,096 events) this
loop fills the queue between flushes and NIXL drops events, which would make every exporter
look cheaper than it is. At the end each exporter's own count of the initiator's requests is
read (the ring's events, the Prometheus port, xtel-exporter over the node files) and must be
the transfers made: nothing was dropped.

Paired windows, as the harness's BM_ucx_write/*_paired cases (bench/agent_bench.cpp): for each
block size, rounds of windows in which the workers take turns, off between every two others
(off, A, off, B, off, C, off, D, off; A..D a new order each round), each window the same number
of transfers (about --window-ms of off's), the first tenth of them untimed (the switch between
processes), then a pause of three flush intervals before the next window, so that a worker's
last flush falls in no other's window. Each window's ns per transfer over the mean of the off
windows either side of it is its ratio; the medians of those (quartiles beside them) and of
each configuration's ns per transfer are the result.

Each configuration but off runs in --processes worker processes (default 3), round r's window
in process r mod N. A process keeps its own speed for its whole life (where its buffers landed,
which core it was given): two processes with telemetry off differed by up to 6% in one run, far
more than within either's windows, so one process a configuration measures its luck as much as
its exporter. The pooled windows of N processes each, and each process's own median beside them
(printed and in the JSON), tell the two apart.

usage: bench/nixl_cost.py --venv DIR --plugin LIB --xtel XTEL [--exporter XTEL_EXPORTER]
           [--sizes 4096,65536] [--rounds 30] [--window-ms 50] [--processes 3]
           [--xtel-env VAR=VALUE]... [--smoke] [--json FILE]

--xtel-env: a variable for the xtel worker alone, to measure a variant of the plug-in's
configuration (NIXL_TELEMETRY_TRACE_BUDGET=0: no spans).

--smoke: two rounds of 5 ms windows, two processes a configuration, for a test that it runs and
prints well-formed output; its figures mean nothing. Prints a table per size, then one line "nixl_cost: " and JSON.
Exit status 1 when a worker fails or an exporter's count is not the transfers made.
"""
import argparse
import json
import mmap
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

RESULT = 'nixl_cost: '
RUN_INTERVAL_MS = 10
STAGING_EVENTS = 65536
# Configurations, in the order the tables print them; off is the reference.
MEASURED = ('off2', 'buffer', 'prometheus', 'xtel')
CONFIGS = ('off',) + MEASURED


# --- The worker: two agents in one process, driven over stdin --------------------------------

def worker(sizes, name):
    """Reads "window SIZE LEAD COUNT SETTLE_MS" lines, answers each with the ns the COUNT timed
    transfers took; "total" answers the transfers made so far; "end" ends the process."""
    import numpy as np
    from nixl._api import nixl_agent, nixl_agent_config

    # No progress thread: UCX's spins, and four idle workers' spinning would take the cores
    # the measured one runs on. The loop's own calls make progress instead (transfers()).
    cfg = nixl_agent_config(enable_prog_thread=False, backends=['UCX'])
    initiator = nixl_agent(f'{name}-initiator', cfg)
    target = nixl_agent(f'{name}-target', cfg)
    largest = max(sizes)
    src = np.full(largest, 7, dtype=np.uint8)
    dst = np.zeros(largest, dtype=np.uint8)
    initiator.register_memory([(src.ctypes.data, largest, 0, '')], 'DRAM')
    target.register_memory([(dst.ctypes.data, largest, 0, '')], 'DRAM')
    initiator.add_remote_agent(target.get_agent_metadata())
    handles = {}
    for size in sizes:
        local = initiator.get_xfer_descs([(src.ctypes.data, size, 0)], 'DRAM')
        remote = initiator.get_xfer_descs([(dst.ctypes.data, size, 0)], 'DRAM')
        handles[size] = initiator.initialize_xfer('WRITE', local, remote, target.name)
    total = 0

    def transfers(handle, count):
        deadline = time.monotonic() + 30
        for _ in range(count):
            state = initiator.transfer(handle)
            while state != 'DONE':
                if state == 'ERR':
                    raise RuntimeError('a WRITE failed')
                if time.monotonic() > deadline:
                    raise RuntimeError('a WRITE did not complete in 30 s')
                # Without a progress thread only the agents' own calls move UCX, the target's
                # too (its notifications check is one): both sides', as a thread would.
                target.get_new_notifs()
                state = initiator.check_xfer_state(handle)

    print('ready', flush=True)
    for line in sys.stdin:
        words = line.split()
        if words[0] == 'window':
            size, lead, count, settle_ms = (int(w) for w in words[1:])
            transfers(handles[size], lead)
            t0 = time.perf_counter_ns()
            transfers(handles[size], count)
            ns = time.perf_counter_ns() - t0
            total += lead + count
            time.sleep(settle_ms / 1000)
            print(ns, flush=True)
        elif words[0] == 'total':
            print(total, flush=True)
        else:
            break
    if not np.array_equal(dst, src):
        raise RuntimeError('the WRITEs did not move the initiator\'s bytes')
    # Past the libraries' destructors: the libnl-route NIXL 1.5.1's wheel bundles crashes in its
    # own at the exit of a process that loaded UCX (tests/nixl/nixl_agents.py).
    sys.stdout.flush()
    os._exit(0)


# --- The driver ------------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def config_env(config, scratch, port, xtel_env=()):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(('NIXL_TELEMETRY_', 'NIXL_PLUGIN_DIR', 'XTEL_'))}
    if config.startswith('off'):
        return env
    env.update(NIXL_TELEMETRY_ENABLE='y', NIXL_TELEMETRY_RUN_INTERVAL=str(RUN_INTERVAL_MS),
               NIXL_TELEMETRY_BUFFER_SIZE=str(STAGING_EVENTS))
    if config == 'buffer':
        env['NIXL_TELEMETRY_DIR'] = os.path.join(scratch, 'rings')
    elif config == 'prometheus':
        env.update(NIXL_TELEMETRY_EXPORTER='prometheus', NIXL_TELEMETRY_PROMETHEUS_PORT=str(port),
                   NIXL_TELEMETRY_PROMETHEUS_LOCAL='y')
    else:
        env.update(NIXL_TELEMETRY_EXPORTER='xtel',
                   NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH=os.path.join(scratch, 'node'))
        env.update(v.split('=', 1) for v in xtel_env)
    return env


class Worker:
    def __init__(self, python, config, index, args, scratch, log):
        self.config = config
        self.name = f'cost-{config}-{index}'
        self.port = free_port()
        self.process = subprocess.Popen(
            [python, os.path.abspath(__file__), '--worker', '--name', self.name,
             '--sizes', args.sizes],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
            env=config_env(config, scratch, self.port, args.xtel_env))

    def initiator(self):
        return f'{self.name}-initiator'

    def wait_ready(self):
        for line in self.process.stdout:  # NIXL writes to stdout too
            if line.strip() == 'ready':
                return
        raise RuntimeError(f'worker {self.config} ended (exit status {self.process.wait()}) '
                           f'before its agents were ready: see its log')

    def ask(self, line):
        self.process.stdin.write(line + '\n')
        self.process.stdin.flush()
        for answer in self.process.stdout:
            if answer.strip().isdigit():
                return int(answer)
        raise RuntimeError(f'worker {self.config} ended (exit status {self.process.wait()}) '
                           f'answering {line!r}: see its log')

    def end(self):
        if self.process.poll() is None:
            self.process.stdin.write('end\n')
            self.process.stdin.close()
        return self.process.wait(timeout=30)


class RingReader:
    """The one reader of NIXL's BUFFER rings in a directory: every few ms it takes what was
    written (read_pos := write_pos) and counts it, so the ring never fills and drops."""
    HEADER = struct.Struct('<QQiiQQ')  # write_pos, read_pos, version, expected, capacity, mask

    def __init__(self, directory):
        self.directory = directory
        self.events = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def drain(self):
        for name in os.listdir(self.directory):
            with open(os.path.join(self.directory, name), 'r+b') as f:
                with mmap.mmap(f.fileno(), self.HEADER.size) as m:
                    write_pos, read_pos, _, _, capacity, _ = self.HEADER.unpack_from(m, 0)
                    if write_pos != read_pos:
                        struct.pack_into('<Q', m, 8, write_pos)
                        # Positions wrap at the capacity; the ring keeps one slot free.
                        self.events[name] = (self.events.get(name, 0) +
                                             (write_pos - read_pos) % capacity)

    def run(self):
        while not self.stop.wait(0.002):
            self.drain()

    def close(self):
        self.stop.set()
        self.thread.join()
        self.drain()


def scrape(url, name, agent, extra=''):
    """The value of `name` for `agent` in the Prometheus text at `url`, or None."""
    with urllib.request.urlopen(url, timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + '{') and f'agent_name="{agent}"' in line and extra in line:
                return int(float(line.rsplit(' ', 1)[1]))
    return None


def exporter_counts(workers, rings, args, scratch):
    """{config: the initiator's requests as its exporter counted them} (None: not read)."""
    counts = {c: None for c in CONFIGS}
    time.sleep(3 * RUN_INTERVAL_MS / 1000)  # the last flush
    rings.close()
    # Each initiator's ring: its one registration, then four events a transfer.
    counts['buffer'] = sum((rings.events.get(w.initiator(), 0) - 1) // 4
                           for w in workers['buffer'])
    counts['prometheus'] = sum(scrape(f'http://127.0.0.1:{w.port}/metrics',
                                      'agent_tx_requests_num_total', w.initiator())
                               for w in workers['prometheus'])
    if args.exporter:
        port = free_port()
        server = subprocess.Popen([args.exporter, '--dir', os.path.join(scratch, 'node'),
                                   '--listen', f'127.0.0.1:{port}'],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 10
            while counts['xtel'] is None and time.monotonic() < deadline:
                try:
                    counts['xtel'] = sum(scrape(f'http://127.0.0.1:{port}/metrics',
                                                'xtel_transfer_requests_total', w.initiator(),
                                                'direction="tx"')
                                         for w in workers['xtel'])
                except OSError:
                    time.sleep(0.1)
        finally:
            server.terminate()
            server.wait(timeout=10)
    return counts


def run_windows(workers, size, rounds, count, lead, samples):
    """Appends (config, ns per transfer, ratio to off or None, process) of every window to
    samples; round r's window of a configuration is its process r mod N's."""
    settle = 3 * RUN_INTERVAL_MS
    off = workers['off'][0]
    for r in range(rounds):
        order = list(MEASURED[r % len(MEASURED):] + MEASURED[:r % len(MEASURED)])
        if r % 2:
            order.reverse()
        before = off.ask(f'window {size} {lead} {count} {settle}') / count
        samples.append(('off', before, None, 0))
        for config in order:
            k = r % len(workers[config])
            ns = workers[config][k].ask(f'window {size} {lead} {count} {settle}') / count
            after = off.ask(f'window {size} {lead} {count} {settle}') / count
            samples.append((config, ns, ns / ((before + after) / 2), k))
            samples.append(('off', after, None, 0))
            before = after


def quartiles(v):
    if len(v) < 2:
        return v[0], v[0], v[0]
    q = statistics.quantiles(v, n=4, method='inclusive')
    return q[0], statistics.median(v), q[2]


def summary(samples):
    out = {}
    for config in CONFIGS:
        ns = [s[1] for s in samples if s[0] == config]
        ratios = [s[2] for s in samples if s[0] == config and s[2] is not None]
        row = {'windows': len(ns), 'ns_per_transfer': statistics.median(ns)}
        if ratios:
            row['ratio_to_off'], row['ratio_q1'], row['ratio_q3'] = (
                quartiles(ratios)[1], quartiles(ratios)[0], quartiles(ratios)[2])
            processes = sorted({s[3] for s in samples if s[0] == config})
            row['ratio_by_process'] = [
                statistics.median(s[2] for s in samples if s[0] == config and s[3] == k)
                for k in processes]
        out[config] = row
    return out


def print_table(size, rows, count):
    print(f'{size}-byte WRITEs, {count} a window: median ns per transfer, and the median of each '
          f'window over the off windows either side (quartiles)')
    for config, row in rows.items():
        ratio = ('1 (reference)' if config == 'off' else
                 f'{row["ratio_to_off"]:.4f} ({row["ratio_q1"]:.4f}-{row["ratio_q3"]:.4f})')
        each = ('' if config == 'off' else
                '  by process ' + ' '.join(f'{v:.4f}' for v in row['ratio_by_process']))
        print(f'  {config:<11} {row["ns_per_transfer"]:10.1f} ns  {ratio}  '
              f'[{row["windows"]} windows]{each}')
    floor = rows['off2']['ratio_to_off']
    print(f'  the floor: off2 over off is {floor:.4f}, so this run does not tell apart ratios '
          f'nearer each other than {abs(floor - 1):.3f}')


def link_plugin(args, python):
    r = subprocess.run([args.xtel, 'nixl', 'install', '--python', python, '--plugin',
                        args.plugin], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f'xtel nixl install failed: {r.stdout}{r.stderr}')


def install(venv):
    deps = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'scripts', 'deps')
    subprocess.run(['bash', '-c', 'source "$1" && xtel_install_nixl_test_deps "$2"', 'deps',
                    deps, venv], check=True)
    return os.path.join(venv, 'bin', 'python3')


def calibrate(off, size, window_ms):
    """Transfers a window: about window_ms of off's, from the fastest of three short runs."""
    probe = 200
    fastest = min(off.ask(f'window {size} 20 {probe} 0') / probe for _ in range(3))
    return max(20, int(window_ms * 1e6 / fastest))


def every(workers):
    return [w for ws in workers.values() for w in ws]


def drive(args):
    python = install(args.venv)
    link_plugin(args, python)
    sizes = [int(s) for s in args.sizes.split(',')]
    scratch = tempfile.mkdtemp(prefix='xtel-nixl-cost-',
                               dir='/dev/shm' if os.path.isdir('/dev/shm') else None)
    log = tempfile.TemporaryFile('w+')
    workers = {}
    try:
        for d in ('rings', 'node'):
            os.mkdir(os.path.join(scratch, d))
        workers = {c: [Worker(python, c, k, args, scratch, log)
                       for k in range(1 if c == 'off' else args.processes)] for c in CONFIGS}
        for w in every(workers):
            w.wait_ready()
        rings = RingReader(os.path.join(scratch, 'rings'))
        result = {'sizes': {}, 'rounds': args.rounds, 'window_ms': args.window_ms,
                  'processes': args.processes, 'command': ' '.join(sys.argv)}
        for size in sizes:
            count = calibrate(workers['off'][0], size, args.window_ms)
            samples = []
            run_windows(workers, size, args.rounds, count, max(2, count // 10), samples)
            rows = summary(samples)
            print_table(size, rows, count)
            result['sizes'][str(size)] = {'transfers_a_window': count, 'configs': rows}
        made = {c: sum(w.ask('total') for w in ws) for c, ws in workers.items()}
        counts = exporter_counts(workers, rings, args, scratch)
        result['transfers'] = made
        result['exporter_counted'] = counts
        problems = [f'{c}: its exporter counted {counts[c]} of the initiator\'s requests, '
                    f'{made[c]} were made' for c in CONFIGS
                    if counts[c] is not None and counts[c] != made[c]]
        print('the initiator\'s requests as each exporter counted them, against those made: ' +
              ', '.join(f'{c} {counts[c]}/{made[c]}' for c in MEASURED if c != 'off2'))
        print(RESULT + json.dumps(result), flush=True)
        if args.json:
            with open(args.json, 'w') as f:
                json.dump(result, f, indent=1)
    except Exception:
        log.seek(0)
        sys.stderr.write(log.read())
        raise
    finally:
        rcs = {w.name: w.end() for w in every(workers)}
        shutil.rmtree(scratch, ignore_errors=True)
    problems += [f'worker {c} ended with exit status {rc}' for c, rc in rcs.items() if rc != 0]
    for p in problems:
        print(f'FAIL: {p}')
    return 1 if problems else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--worker', action='store_true', help=argparse.SUPPRESS)
    p.add_argument('--name', help=argparse.SUPPRESS)
    p.add_argument('--venv')
    p.add_argument('--plugin')
    p.add_argument('--xtel')
    p.add_argument('--exporter')
    p.add_argument('--sizes', default='4096,65536')
    p.add_argument('--rounds', type=int, default=30)
    p.add_argument('--processes', type=int, default=3,
                   help='worker processes a measured configuration (off has one)')
    p.add_argument('--window-ms', type=float, default=50)
    p.add_argument('--xtel-env', action='append', default=[], metavar='VAR=VALUE',
                   help='a variable for the xtel worker alone (repeatable), to measure a variant')
    p.add_argument('--smoke', action='store_true')
    p.add_argument('--json')
    args = p.parse_args()
    sizes = [int(s) for s in args.sizes.split(',')]
    if args.worker:
        return worker(sizes, args.name)
    for need in ('venv', 'plugin', 'xtel'):
        if not getattr(args, need):
            p.error(f'--{need} is required')
    if args.smoke:
        args.rounds, args.window_ms, args.processes = 2, 5, 2
    return drive(args)


if __name__ == '__main__':
    sys.exit(main())
