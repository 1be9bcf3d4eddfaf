"""What the Python package's tests share: a telemetry environment in a folder of its own, the
wheel's programs, and xtel-exporter run as a process on a free port."""
import contextlib
import os
import subprocess
import sys
import time
import urllib.request

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from ports import free_port  # noqa: E402,F401  (tests/: shared with the C++ side's choice)

# Every variable a test's pipeline reads: the test sets the ones it means, the rest unset.
NIXL_VARIABLES = [n for n in os.environ if n.startswith('NIXL_TELEMETRY_')]


def program(name):
    """A program the wheel installed as a script: beside the venv's Python."""
    path = os.path.join(os.path.dirname(sys.executable), name)
    assert os.access(path, os.X_OK), f'the wheel installed no {name} at {path}'
    return path


@pytest.fixture
def telemetry_dir(tmp_path, monkeypatch):
    """A folder of the test's own where the pipeline writes, telemetry on, nothing else set."""
    for name in NIXL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv('NIXL_TELEMETRY_ENABLE', 'y')
    monkeypatch.setenv('NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH', str(tmp_path))
    return tmp_path


@contextlib.contextmanager
def exporter(directory, path=None, env=None):
    """xtel-exporter (the wheel's, or the one at `path`) serving `directory` on a free port,
    with `env` as its environment when given: yields /metrics's URL."""
    port = free_port()
    proc = subprocess.Popen([path or program('xtel-exporter'), '--dir', str(directory),
                             '--listen', f'127.0.0.1:{port}'], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f'http://127.0.0.1:{port}/metrics'
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(url, timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f'xtel-exporter did not serve {url}: '
                                         f'{proc.communicate()[0] if proc.poll() is not None else "timeout"}')
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def scrape(url):
    """/metrics as text, by sample line: {'name{labels}': value}."""
    body = urllib.request.urlopen(url, timeout=5).read().decode()
    samples = {}
    for line in body.splitlines():
        if line and not line.startswith('#'):
            key, _, value = line.rpartition(' ')
            samples[key] = value
    return samples
