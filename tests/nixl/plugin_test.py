#!/usr/bin/env python3
"""xtel's NIXL plug-in under the real NIXL, from its published wheel (docs/nixl.md).

1. A virtual environment of the build holds NIXL's wheel, pinned (scripts/deps'
   xtel_install_nixl_test_deps, which installs only what is missing, so a rerun skips it). When
   the install fails and pip's index does not answer, the test is skipped (exit status 77) with
   the address and the error; any other failure to install fails it.
2. libtelemetry_exporter_xtel.so is linked into the plug-in directory of that NIXL, next to
   NIXL's own plug-ins: NIXL_PLUGIN_DIR would hide them, and NIXL's UCX plug-in finds its UCX by
   its own path ($ORIGIN), which a link to it from another directory breaks.
3. Two real NIXL agents (tests/nixl/nixl_agents.py) move known bytes over UCX with
   NIXL_TELEMETRY_EXPORTER=xtel; xtel-exporter, a process of its own, serves their node files,
   and its /metrics must say exactly what the agents did: bytes and requests by direction, the
   transfer-time histogram's count, the memory each registered, the one failure by its kind.
4. Hostile: NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH names no directory, or one no file can be made
   in; an xtel variable is bad; another live process has the agents' names: the agents start,
   every transfer completes, and one error line for each agent says why.

Arguments: --source-dir, --venv (where the environment is made), --plugin (the built plug-in),
--exporter (the built xtel-exporter). Prints what failed and exits 1, or a summary and exits 0.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from ports import free_port  # noqa: E402  (tests/: one choice of port for every test)

SKIP = 77
RESULT = 'nixl_agents: '  # what tests/nixl/nixl_agents.py prints its JSON line after
WRITES, READS, SIZE = 5, 3, 65536


def index_url():
    """The index pip installs from: PIP_INDEX_URL, pip's configuration, or PyPI's."""
    if os.environ.get('PIP_INDEX_URL'):
        return os.environ['PIP_INDEX_URL']
    r = subprocess.run([sys.executable, '-m', 'pip', 'config', 'get', 'global.index-url'],
                       capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else 'https://pypi.org/simple'


def index_unreachable():
    """Why pip's index cannot be reached, or None when it answers. The install runs quiet,
    which hides a connection error behind "No matching distribution": this asks the index."""
    url = index_url().rstrip('/') + '/nixl-cu12/'
    try:
        urllib.request.urlopen(url, timeout=20).close()
    except urllib.error.HTTPError:
        return None  # it answered
    except (OSError, ValueError) as e:
        return f'{url}: {e}'
    return None


def install(source_dir, venv, which=''):
    """The environment's Python, after scripts/deps installed what was missing (`which`:
    'previous' for the NIXL before the pinned one)."""
    deps = os.path.join(source_dir, 'scripts', 'deps')
    started = time.monotonic()
    r = subprocess.run(['bash', '-c', 'source "$1" && xtel_install_nixl_test_deps "$2" "$3"',
                        'deps', deps, venv, which], capture_output=True, text=True)
    if r.returncode != 0:
        words = r.stdout + r.stderr
        reach = index_unreachable()
        if reach:
            print(f'SKIP: pip cannot reach the package index to install NIXL\'s wheel:\n{reach}')
            sys.exit(SKIP)
        print(f'FAIL: installing NIXL\'s wheel into {venv} failed:\n{words}')
        sys.exit(1)
    for line in r.stderr.splitlines():
        if line.startswith('xtel:'):  # pip's own words (torch left out on purpose) are not news
            print(f'{line} ({time.monotonic() - started:.1f} s)')
    return os.path.join(venv, 'bin', 'python3')


def link_plugin(python, plugin):
    """Links the plug-in into the directory NIXL loads its own plug-ins from; returns the link."""
    code = ('import glob, os, sys, nixl_cu12; '
            'root = os.path.dirname(os.path.dirname(nixl_cu12.__file__)); '
            'print(os.path.dirname(glob.glob(os.path.join(root, ".nixl_cu12*.libs", "plugins", '
            '"libplugin_UCX.so"))[0]))')
    plugin_dir = subprocess.run([python, '-c', code], capture_output=True, text=True,
                                check=True).stdout.strip()
    link = os.path.join(plugin_dir, os.path.basename(plugin))
    # Left as it is when it is right already: the NIXL tests run side by side on the link the
    # set-up test made (tests/cmake/nixl.cmake), and one remade under another's agents would
    # be missing for an instant.
    if os.path.islink(link) and os.readlink(link) == os.path.abspath(plugin):
        return link
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(os.path.abspath(plugin), link)
    return link


def agent_env(output_path, extra, exporter='xtel'):
    env = dict(os.environ)
    env.update(NIXL_TELEMETRY_ENABLE='y', NIXL_TELEMETRY_EXPORTER=exporter or '',
               NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH=output_path,
               # Both sets: NIXL's agent_* names beside xtel's.
               NIXL_TELEMETRY_METRIC_SET='both')
    for name in ('NIXL_PLUGIN_DIR', 'XTEL_LOG_LEVEL'):
        env.pop(name, None)
    if not exporter:
        del env['NIXL_TELEMETRY_EXPORTER']  # NIXL's BUFFER exporter
    env.update(extra)
    return env


def start_agents(python, driver, output_path, log, extra=None, names=(), exporter='xtel'):
    """The agents' process, once it printed what it did (it waits on stdin to end). `names`:
    nixl_agents.py's --initiator and --target, when not its own; `exporter`:
    NIXL_TELEMETRY_EXPORTER (None: unset, NIXL's BUFFER exporter)."""
    command = [python, driver, '--writes', str(WRITES), '--reads', str(READS), '--bytes',
               str(SIZE)]
    if names:
        command += ['--initiator', names[0], '--target', names[1]]
    p = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=log, text=True,
                         env=agent_env(output_path, extra or {}, exporter))
    for line in p.stdout:  # NIXL writes to stdout too
        if line.startswith(RESULT):
            return p, json.loads(line[len(RESULT):])
    p.wait(timeout=30)
    raise RuntimeError(f'the NIXL agents ended (exit status {p.returncode}) before their '
                       f'transfers were done: see the log above')


def end_agents(p):
    p.stdin.write('\n')
    p.stdin.flush()
    return p.wait(timeout=30)


def samples(text):
    """{(name, frozenset(labels)): value} of a Prometheus text body."""
    out = {}
    for line in text.splitlines():
        m = re.match(r'^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$', line)
        if m:
            labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ''))
            out[(m.group(1), labels)] = float(m.group(3))
    return out


def value(s, name, agent, **labels):
    want = set(labels.items()) | {('agent_name', agent)}
    found = [v for (n, ls), v in s.items() if n == name and want <= ls]
    return sum(found) if found else None


def expected(done):
    ini, tgt = done['initiator'], done['target']
    return [
        ('agent_tx_bytes_total', ini, {}, done['tx_bytes']),
        ('agent_rx_bytes_total', ini, {}, done['rx_bytes']),
        ('agent_tx_requests_num_total', ini, {}, done['tx_requests']),
        ('agent_rx_requests_num_total', ini, {}, done['rx_requests']),
        ('agent_xfer_time_us_count', ini, {}, done['tx_requests'] + done['rx_requests']),
        ('agent_xfer_post_time_us_count', ini, {}, done['tx_requests'] + done['rx_requests']),
        ('agent_memory_registered_total', ini, {}, done['initiator_registered']),
        ('agent_memory_registered_total', tgt, {}, done['target_registered']),
        ('agent_errors_total', ini, {'status': 'not_found'}, done['failed_not_found']),
        # The target initiated nothing: NIXL counts on the initiator only.
        ('agent_tx_bytes_total', tgt, {}, 0),
        ('agent_rx_bytes_total', tgt, {}, 0),
    ]


def scrape_until(url, rows, deadline_s=15):
    """The last body, and the rows whose value is not (yet) the expected one."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                s = samples(r.read().decode())
        except OSError:
            s = {}
        wrong = [(n, a, l, want, value(s, n, a, **l)) for n, a, l, want in rows
                 if value(s, n, a, **l) != want]
        if not wrong or time.monotonic() > deadline:
            return wrong
        time.sleep(0.2)


def served_values(args, python, driver, log):
    """The /metrics of xtel-exporter over two real NIXL agents, checked value by value."""
    problems = []
    with tempfile.TemporaryDirectory(prefix='xtel-nixl-') as node_dir:
        agents, done = start_agents(python, driver, node_dir, log)
        port = free_port()
        exporter = subprocess.Popen([args.exporter, '--dir', node_dir, '--listen',
                                     f'127.0.0.1:{port}'], stdout=log, stderr=log)
        try:
            wrong = scrape_until(f'http://127.0.0.1:{port}/metrics', expected(done))
        finally:
            exporter.terminate()
            exporter.wait(timeout=10)
            rc = end_agents(agents)
        for name, agent, labels, want, got in wrong:
            problems.append(f'{name}{{agent_name="{agent}"}} is {got}, expected {want}')
        if rc != 0:
            problems.append(f'the agents\' process ended with exit status {rc}')
    return problems


def hostile(python, driver, output_path, why, log_path, extra=None):
    """Agents whose plug-in cannot publish: they transfer, and one line for each says why."""
    problems = []
    with open(log_path, 'w+') as log:
        agents, done = start_agents(python, driver, output_path, log, extra)
        rc = end_agents(agents)
        log.seek(0)
        lines = log.read().splitlines()
    if rc != 0 or done['tx_requests'] != WRITES or done['rx_requests'] != READS:
        problems.append(f'{why}: the agents did not complete every transfer (rc {rc})')
    for agent in (done['initiator'], done['target']):
        said = [l for l in lines if l.startswith('xtel: error:') and f"'{agent}'" in l
                and why in l]
        if len(said) != 1:
            problems.append(f'expected one line for agent {agent} saying "{why}", got '
                            f'{said or "none"} in {lines}')
    return problems


def name_taken(python, driver, node_dir):
    """A second process of the same agent names, beside a live first: it transfers unpublished."""
    with open(os.path.join(node_dir, 'first.log'), 'w') as log:
        first, _ = start_agents(python, driver, node_dir, log)
        try:
            return hostile(python, driver, node_dir, 'in use by the live writer process',
                           os.path.join(node_dir, 'second.log'))
        finally:
            end_agents(first)


def prepare(extra=()):
    """What every NIXL test starts with: its arguments (--source-dir, --venv, --plugin,
    --exporter, and the required options `extra` names), NIXL's venv made or found with the
    plug-in linked into it, and when that began (time.monotonic()).
    """
    p = argparse.ArgumentParser()
    for a in ('--source-dir', '--venv', '--plugin', '--exporter', *extra):
        p.add_argument(a, required=True)
    args = p.parse_args()
    started = time.monotonic()
    python = install(args.source_dir, args.venv)
    link_plugin(python, args.plugin)
    return args, python, started


def main():
    args, python, started = prepare()
    driver = os.path.join(args.source_dir, 'tests', 'nixl', 'nixl_agents.py')
    problems = []
    with tempfile.TemporaryDirectory(prefix='xtel-nixl-log-') as logs:
        log_path = os.path.join(logs, 'served.log')
        with open(log_path, 'w+') as log:
            problems += served_values(args, python, driver, log)
            if problems:
                log.seek(0)
                print(log.read())
        absent = os.path.join(logs, 'absent')
        problems += hostile(python, driver, absent,
                            f"OUTPUT_PATH='{absent}' is invalid: expected the path of an "
                            f"existing directory", os.path.join(logs, 'absent.log'))
        problems += hostile(python, driver, logs,
                            "NIXL_TELEMETRY_TIMING_SAMPLE='often' is invalid",
                            os.path.join(logs, 'variable.log'),
                            {'NIXL_TELEMETRY_TIMING_SAMPLE': 'often'})
        problems += name_taken(python, driver, logs)
        # Root writes into any directory whose mode says no; /proc takes no new file from anyone.
        unwritable = '/proc' if os.geteuid() == 0 else os.path.join(logs, 'read-only')
        if unwritable != '/proc':
            os.mkdir(unwritable, 0o555)
        problems += hostile(python, driver, unwritable,
                            f'node exporter off: node file {unwritable}/',
                            os.path.join(logs, 'unwritable.log'))
    for line in problems:
        print(f'FAIL: {line}')
    if problems:
        return 1
    print(f'real NIXL agents: xtel-exporter served {WRITES} WRITEs and {READS} READs of {SIZE} '
          f'bytes exactly; an absent or unwritable output path, a bad variable and a name in use '
          f'each cost one log line an agent and no transfer '
          f'({time.monotonic() - started:.1f} s)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
