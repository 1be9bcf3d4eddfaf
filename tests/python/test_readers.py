"""The readers: xtel.telemetry_reader (the reader script, now the package's module) prints the
bytes the C++ telemetry_reader prints, and xtel.read_flight_recorder gives the events both
print."""
import json
import os
import subprocess
import sys

import pytest

import xtel

MODES = [[], ['--json'], ['--summary'], ['--summary', '--json'], ['--header'],
         ['--category', 'transfer', '--category', 'custom'], ['--name', 'agent_*_bytes', '--json']]


@pytest.fixture
def recorder(telemetry_dir, monkeypatch):
    """A closed flight recorder of known events: its path."""
    monkeypatch.setenv('NIXL_TELEMETRY_BUFFER_SIZE', '64')
    with xtel.Telemetry('py-recorder', exporter='buffer') as t:
        for i in range(5):
            t.record_transfer('write', 'p1', 4096 * (i + 1), post_us=2, xfer_us=30 + i)
        t.event('custom', 'engine_retries', 3, 'counter')
        t.event('memory', 'agent_memory_registered', 1 << 20, 'gauge')
    return telemetry_dir / 'py-recorder'


def output(argv):
    r = subprocess.run(argv, capture_output=True)
    return r.returncode, r.stdout, r.stderr


@pytest.mark.parametrize('mode', MODES, ids=lambda m: ' '.join(m) or 'text')
def test_the_package_reader_prints_the_bytes_the_cpp_reader_prints(recorder, mode):
    cpp = output([os.environ['XTEL_TELEMETRY_READER'], *mode, str(recorder)])
    python = output([sys.executable, '-m', 'xtel.telemetry_reader', *mode, str(recorder)])
    assert cpp[0] == 0 and cpp[1]
    assert python == cpp


def test_the_example_script_prints_what_the_package_module_prints(recorder):
    script = os.path.join(os.environ['XTEL_SOURCE_DIR'], 'examples', 'python',
                          'telemetry_reader.py')
    assert output([sys.executable, script, '--json', str(recorder)]) == \
        output([sys.executable, '-m', 'xtel.telemetry_reader', '--json', str(recorder)])


def test_both_readers_refuse_a_file_that_is_no_recorder_with_one_line_and_status_2(tmp_path):
    bad = tmp_path / 'bad'
    bad.write_bytes(b'not a recorder' * 20)
    python = output([sys.executable, '-m', 'xtel.telemetry_reader', str(bad)])
    cpp = output([os.environ['XTEL_TELEMETRY_READER'], str(bad)])
    assert python[0] == cpp[0] == 2
    assert python[2] == cpp[2] and python[2].count(b'\n') == 1
    with pytest.raises(xtel.FormatError, match=str(bad)):
        xtel.read_flight_recorder(bad)


def test_read_flight_recorder_gives_the_events_the_readers_print(recorder):
    r = xtel.read_flight_recorder(recorder)
    assert r.agent_name == 'py-recorder' and r.capacity == 64 and r.closed
    assert r.missed == 0 and r.written == len(r.events)
    printed = [json.loads(line) for line in subprocess.run(
        [sys.executable, '-m', 'xtel.telemetry_reader', '--json', str(recorder)],
        capture_output=True, text=True, check=True).stdout.splitlines()]
    assert len(printed) == len(r.events)
    for e, p in zip(r.events, printed):
        assert (e.name, e.value, e.category) == (p['event'], p['value'], p['category'])
    tx = [e.value for e in r.events if e.name == 'agent_tx_bytes']
    assert tx == [4096, 8192, 12288, 16384, 20480]
    assert [e.value for e in r.events if e.name == 'agent_xfer_time'] == [30, 31, 32, 33, 34]
    retries = [e for e in r.events if e.name == 'engine_retries']
    assert [(e.category, e.kind, e.value) for e in retries] == [('CUSTOM', 'counter', 3)]


def test_read_node_file_refuses_a_file_that_is_no_node_file(tmp_path):
    bad = tmp_path / 'x.metrics'
    bad.write_bytes(b'\0' * 4096)
    with pytest.raises(xtel.FormatError, match=str(bad)):
        xtel.read_node_file(bad)
