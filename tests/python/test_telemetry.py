"""xtel.Telemetry: what its record calls put in the node file and on xtel-exporter's /metrics,
the variables it honours, and what it refuses."""
import os

import pytest

import xtel
from conftest import exporter, scrape


def series(node_file, family):
    """{frozenset(labels.items()): value} of one family of a node file."""
    for f in node_file.families:
        if f.name == family:
            return {frozenset(s.labels.items()): (s.count if f.type == 'histogram' else s.value)
                    for s in f.series}
    return {}


def by(node_file, family, **labels):
    """The sum of a family's values over the series that carry `labels`."""
    return sum(v for k, v in series(node_file, family).items()
               if all((n, labels[n]) in k for n in labels))


def record_known_transfers(t):
    """Three writes of 4096 bytes to p1 (timed), one failed read of 512 bytes from p2."""
    for _ in range(3):
        t.record_transfer('write', 'p1', 4096, post_us=3, xfer_us=40, backend='UCX')
    t.record_transfer('read', 'p2', 512, status='remote_disconnected', backend='UCX')


def test_the_node_file_holds_exact_bytes_and_requests_per_peer_and_the_failure(telemetry_dir):
    with xtel.Telemetry('py-engine') as t:
        assert t.enabled and t.name == 'py-engine'
        record_known_transfers(t)
        t.flush()
        f = xtel.read_node_file(telemetry_dir / 'py-engine.metrics')
    assert f.agent_name == 'py-engine' and f.labels == {'agent_name': 'py-engine'}
    assert f.writer_pid == os.getpid()
    assert by(f, 'xtel_transfer_bytes_total', remote_agent='p1', status='success',
              operation='write', direction='tx', backend='UCX') == 3 * 4096
    assert by(f, 'xtel_transfer_requests_total', remote_agent='p1', status='success') == 3
    assert by(f, 'xtel_transfer_bytes_total', remote_agent='p2',
              status='remote_disconnected', operation='read', direction='rx') == 512
    assert by(f, 'xtel_transfer_requests_total', remote_agent='p2') == 1
    assert by(f, 'xtel_transfer_requests_total', remote_agent='p2', status='success') == 0
    # As the agent counts a failure: one ERROR event of its kind, none of the others.
    assert by(f, 'xtel_errors_total', kind='remote_disconnected') == 1
    assert by(f, 'xtel_errors_total') == 1
    # Only the timed writes are in the latency histogram.
    assert by(f, 'xtel_transfer_duration_seconds', remote_agent='p1', operation='write') == 3
    assert by(f, 'xtel_transfer_duration_seconds', remote_agent='p2') == 0


def test_xtel_exporter_serves_the_same_exact_values_from_the_wheel(telemetry_dir):
    with xtel.Telemetry('py-served') as t:
        record_known_transfers(t)
        t.flush()
        with exporter(telemetry_dir) as url:
            got = scrape(url)
    mine = {k: v for k, v in got.items() if 'agent_name="py-served"' in k}

    def value(family, *labels):
        matches = [float(v) for k, v in mine.items()
                   if k.startswith(family + '{') and all(l in k for l in labels)]
        return sum(matches)

    assert value('xtel_transfer_bytes_total', 'remote_agent="p1"', 'status="success"') == 12288
    assert value('xtel_transfer_requests_total', 'remote_agent="p1"') == 3
    assert value('xtel_transfer_bytes_total', 'remote_agent="p2"',
                 'status="remote_disconnected"') == 512
    assert value('xtel_transfer_requests_total', 'remote_agent="p2"') == 1
    assert value('xtel_errors_total', 'kind="remote_disconnected"') == 1
    assert value('xtel_errors_total', 'kind="timed_out"') == 0


def test_a_notified_transfer_counts_on_the_target_and_never_as_its_own(telemetry_dir):
    with xtel.Telemetry('py-target') as t:
        t.record_notified('write', 'initiator-0', 65536)
        t.record_notified('write', 'initiator-0', 1024,
                          traceparent='00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01')
        t.flush()
        f = xtel.read_node_file(telemetry_dir / 'py-target.metrics')
    assert by(f, 'xtel_notified_transfers_total', remote_agent='initiator-0',
              operation='write') == 2
    assert by(f, 'xtel_notified_bytes_total', remote_agent='initiator-0') == 65536 + 1024
    assert by(f, 'xtel_transfer_bytes_total') == 0


def test_an_event_of_each_kind_lands_in_its_family(telemetry_dir):
    with xtel.Telemetry('py-events') as t:
        t.event('custom', 'engine_retries', 2, 'counter')
        t.event('CUSTOM', 'engine_retries', 3, kind='counter')
        t.event('custom', 'engine_queue_depth', 7, 'gauge')
        t.flush()
        f = xtel.read_node_file(telemetry_dir / 'py-events.metrics')
    assert by(f, 'engine_retries_total') == 5
    assert by(f, 'engine_queue_depth') == 7


def test_the_default_exporter_is_the_node_file_and_exporter_replaces_the_variable(
        telemetry_dir, monkeypatch):
    with xtel.Telemetry('default-node'):
        pass
    assert (telemetry_dir / 'default-node.metrics').is_file()
    assert not (telemetry_dir / 'default-node').exists()  # no flight recorder
    monkeypatch.setenv('NIXL_TELEMETRY_EXPORTER', 'buffer')
    with xtel.Telemetry('from-variable'):
        pass
    assert (telemetry_dir / 'from-variable').is_file()
    with xtel.Telemetry('from-argument', exporter='node'):
        pass
    assert (telemetry_dir / 'from-argument.metrics').is_file()
    assert not (telemetry_dir / 'from-argument').exists()


def test_telemetry_off_records_nothing_and_writes_nothing(telemetry_dir, monkeypatch):
    monkeypatch.setenv('NIXL_TELEMETRY_ENABLE', 'n')
    with xtel.Telemetry('quiet') as t:
        assert not t.enabled
        t.record_transfer('write', 'p1', 4096, xfer_us=5)
        t.flush()
        assert t.stats().events_exported == 0
    assert list(telemetry_dir.iterdir()) == []


def test_a_malformed_variable_raises_config_error_with_the_cpp_message(telemetry_dir,
                                                                       monkeypatch):
    monkeypatch.setenv('NIXL_TELEMETRY_BUFFER_SIZE', 'lots')
    with pytest.raises(xtel.ConfigError) as e:
        xtel.Telemetry('engine')
    assert str(e.value) == ("NIXL_TELEMETRY_BUFFER_SIZE='lots' is invalid: expected a whole "
                            "number from 1 to 16777216")
    assert isinstance(e.value, ValueError) and isinstance(e.value, xtel.Error)
    monkeypatch.delenv('NIXL_TELEMETRY_BUFFER_SIZE')
    with pytest.raises(xtel.ConfigError, match="NIXL_TELEMETRY_EXPORTER='nosuch' is invalid"):
        xtel.Telemetry('engine', exporter='nosuch')
    assert list(telemetry_dir.iterdir()) == []


@pytest.mark.parametrize('call, message', [
    (lambda t: t.record_transfer('send', 'p', 1), "op='send' is invalid: expected 'write' or "
                                                  "'read'"),
    (lambda t: t.record_transfer('write', 'p', 1, status='failed'),
     "status='failed' is invalid: expected 'ok', an error kind ('invalid_argument', "
     "'not_found', 'busy', 'not_supported', 'bad_metadata', 'remote_disconnected', 'timed_out', "
     "'backend_error') or 'error' (a failure of no known kind)"),
    (lambda t: t.record_transfer('write', 'p', 1, traceparent='00-nothex'),
     "traceparent='00-nothex' is invalid"),
    (lambda t: t.record_transfer('write', 'p', 1, request_id='r', traceparent='00-' + 'a' * 32 +
                                 '-' + 'b' * 16 + '-01'),
     'request_id and traceparent are both given'),
    (lambda t: t.event('network', 'x', 1), "category='network' is invalid"),
    (lambda t: t.event('custom', 'x', 1, 'histogram'),
     "kind='histogram' is invalid: expected 'sample', 'counter' or 'gauge'"),
])
def test_an_argument_none_accept_raises_value_error_naming_it(telemetry_dir, call, message):
    with xtel.Telemetry('strict') as t:
        with pytest.raises(ValueError) as e:
            call(t)
        assert str(e.value).startswith(message)
        t.flush()
        assert t.stats().events_exported == 0  # nothing half-recorded


def test_a_closed_pipeline_refuses_records_and_closes_again_quietly(telemetry_dir):
    t = xtel.Telemetry('closing')
    t.close()
    assert t.closed and not t.enabled
    t.close()
    t.flush()
    with pytest.raises(ValueError, match='closed'):
        t.record_transfer('write', 'p1', 1)


def test_threads_recording_while_another_flushes_lose_no_transfer(telemetry_dir):
    import threading
    with xtel.Telemetry('py-threads') as t:
        def record(peer):
            for _ in range(5000):
                t.record_transfer('write', peer, 100)

        threads = [threading.Thread(target=record, args=(f'p{i % 2}',)) for i in range(4)]
        for th in threads:
            th.start()
        while any(th.is_alive() for th in threads):
            t.flush()  # releases the GIL: the recording threads go on meanwhile
        for th in threads:
            th.join()
        t.flush()
        f = xtel.read_node_file(telemetry_dir / 'py-threads.metrics')
        assert t.stats().records_dropped == 0
    assert by(f, 'xtel_transfer_requests_total', remote_agent='p0') == 10000
    assert by(f, 'xtel_transfer_bytes_total', remote_agent='p1') == 10000 * 100
