"""The package's stub as a type checker reads it: a program that uses the API as documented
passes mypy --strict, and one that passes a wrong type is refused by name."""
import subprocess
import sys

GOOD = '''
import xtel

def record(t: xtel.Telemetry) -> int:
    t.record_transfer("write", "p1", 4096, status="ok", post_us=2, xfer_us=30, descriptors=4,
                      request_id=None, traceparent=None, backend="UCX")
    t.record_notified("write", "p0", 1)
    t.event("custom", "x", 1, "counter")
    t.flush()
    return t.stats().events_exported

with xtel.Telemetry("typed", exporter="node") as t:
    n: int = record(t)
f: xtel.NodeFile = xtel.read_node_file("typed.metrics")
values: list[int] = [s.value for fam in f.families for s in fam.series]
events: list[xtel.Event] = xtel.read_flight_recorder("typed").events
version: str = xtel.__version__
error: type[ValueError] = xtel.ConfigError
'''

BAD = '''
import xtel

xtel.Telemetry("typed").record_transfer("write", 7, 4096)
'''


def mypy(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return subprocess.run([sys.executable, '-m', 'mypy', '--strict', '--no-incremental',
                           str(path)], capture_output=True, text=True, cwd=tmp_path)


def test_a_program_using_the_api_as_documented_passes_mypy_strict(tmp_path):
    r = mypy(tmp_path, 'good.py', GOOD)
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy_refuses_a_peer_that_is_not_a_string_by_the_stub(tmp_path):
    r = mypy(tmp_path, 'bad.py', BAD)
    assert r.returncode == 1
    assert ('Argument 2 to "record_transfer" of "Telemetry" has incompatible type "int"; '
            'expected "str"') in r.stdout
