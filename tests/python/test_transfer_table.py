"""The table xtel.instrument.nixl keeps each NIXL agent's transfers in, between make and
release (python/src/transfer_table.hpp), driven as the wrappers drive it: what it records,
exactly, in the node file, and when it records nothing."""
import time

import numpy as np
import pytest

import xtel
from test_telemetry import by

LOCAL, REMOTE, UNNAMED = 11, 12, 13  # prepped lists' handles
LENGTHS = [4096, 8192, 100, 7]


def table(name):
    t = xtel.Telemetry(name)
    t._track_dlist(LOCAL, '', LENGTHS)
    t._track_dlist(REMOTE, 'decode-1', None)
    t._track_dlist(UNNAMED, '', None)
    return t


def made_and_done(t, handle, indices, op='WRITE', remote=REMOTE, notif=b'req-1'):
    t._track_made(handle, op, LOCAL, remote, indices, notif)
    assert t._track_posted(handle, time.perf_counter_ns(), None, None, None)
    assert t._track_pending(handle)
    t._track_ended(handle, 'ok')
    t._track_released(handle)


def node_file(t, telemetry_dir):
    t.flush()
    return xtel.read_node_file(telemetry_dir / f'{t.name}.metrics')


def test_a_transfer_moves_the_bytes_of_its_descriptors_at_the_indices_given(telemetry_dir):
    with table('tt-bytes') as t:
        made_and_done(t, 1, [0, 2])                        # a list: 4196
        made_and_done(t, 2, (1, 1, 3))                     # a tuple: 16391
        made_and_done(t, 3, np.array([3, 0], np.int64))    # numpy's: 4103
        made_and_done(t, 4, [np.int64(1)], op='read')      # numpy's ints in a list: 8192
        f = node_file(t, telemetry_dir)
    assert by(f, 'xtel_transfer_bytes_total', remote_agent='decode-1', direction='tx',
              operation='write') == 4196 + 16391 + 4103
    assert by(f, 'xtel_transfer_bytes_total', remote_agent='decode-1', direction='rx',
              operation='read') == 8192
    assert by(f, 'xtel_transfer_requests_total', remote_agent='decode-1') == 4
    assert by(f, 'xtel_transfer_duration_seconds', remote_agent='decode-1') == 4


def test_a_list_of_unknown_lengths_or_no_peer_gives_zero_bytes_and_unknown(telemetry_dir):
    with table('tt-unknown') as t:
        t._track_made(1, 'WRITE', UNNAMED, UNNAMED, [0, 1, 2], b'')
        t._track_posted(1, time.perf_counter_ns(), None, None, 'ok')  # DONE at once
        f = node_file(t, telemetry_dir)
    assert by(f, 'xtel_transfer_requests_total', remote_agent='unknown') == 1
    assert by(f, 'xtel_transfer_bytes_total', remote_agent='unknown') == 0


def test_an_index_outside_the_list_is_refused_and_nothing_is_kept(telemetry_dir):
    with table('tt-index') as t:
        with pytest.raises(IndexError):
            t._track_made(1, 'WRITE', LOCAL, REMOTE, [0, 4], b'')
        with pytest.raises(IndexError):
            t._track_made(2, 'WRITE', LOCAL, REMOTE, [-1], b'')
        assert not t._track_posted(1, time.perf_counter_ns(), None, None, 'ok')
        assert not t._track_posted(2, time.perf_counter_ns(), None, None, 'ok')
        f = node_file(t, telemetry_dir)
    assert by(f, 'xtel_transfer_requests_total') == 0


def test_a_transfer_is_recorded_once_and_only_after_its_post(telemetry_dir):
    with table('tt-once') as t:
        t._track_made(1, 'WRITE', LOCAL, REMOTE, [0], b'')
        assert not t._track_pending(1)
        t._track_ended(1, 'ok')            # never posted: nothing
        t._track_posted(1, time.perf_counter_ns(), None, None, None)
        t._track_ended(1, 'ok')
        t._track_ended(1, 'ok')            # a second DONE poll: nothing more
        assert not t._track_pending(1)
        t._track_posted(1, time.perf_counter_ns(), None, None, None)  # reposted
        t._track_ended(1, 'error')
        t._track_released(1)
        t._track_ended(1, 'ok')            # released: forgotten
        assert not t._track_posted(1, time.perf_counter_ns(), None, None, 'ok')
        f = node_file(t, telemetry_dir)
    assert by(f, 'xtel_transfer_requests_total', remote_agent='decode-1') == 2
    assert by(f, 'xtel_transfer_requests_total', remote_agent='decode-1', status='success') == 1
    assert by(f, 'xtel_transfer_bytes_total', remote_agent='decode-1', status='success') == 4096


def test_nixl_s_own_figures_replace_the_table_s(telemetry_dir):
    with table('tt-nixl') as t:
        t._track_made(1, 'WRITE', LOCAL, REMOTE, [0], b'')
        t._track_posted(1, time.perf_counter_ns(), None, None, None)
        t._track_ended(1, 'ok', 5, 2_000_000, 65536, 16)  # post 5 us, 2 s, 64 KiB
        f = node_file(t, telemetry_dir)
    assert by(f, 'xtel_transfer_bytes_total', remote_agent='decode-1') == 65536
    slow = [s for fam in f.families if fam.name == 'xtel_transfer_duration_seconds'
            for s in fam.series if s.labels.get('remote_agent') == 'decode-1']
    assert sum(s.count for s in slow) == 1
    assert sum(s.sum for s in slow) == 2_000_000  # the node file keeps microseconds


def test_a_closed_pipeline_refuses_the_table_s_calls_as_its_record_calls():
    t = table('tt-closed')
    t.close()
    with pytest.raises(ValueError, match='closed'):
        t._track_made(1, 'WRITE', LOCAL, REMOTE, [0], b'')


def test_a_poll_s_notifications_are_each_one_notified_transfer_of_its_sender(telemetry_dir):
    with xtel.Telemetry('tt-notified') as t:
        # get_new_notifs's map: names as str or bytes, several messages a sender
        t._notified('read', {'decode-0': [b'req-1', b'req-2'], b'decode-1': [b'req-\xff']})
        # update_notifs's and check_remote_xfer_done's pairs
        t._notified('read', [('decode-0', b'req-3'), ('decode-2', 'room-7')])
        t._notified('read', {})
        with pytest.raises(ValueError):
            t._notified('sideways', {'decode-0': [b'x']})
        f = node_file(t, telemetry_dir)
    assert by(f, 'xtel_notified_transfers_total', remote_agent='decode-0') == 3
    assert by(f, 'xtel_notified_transfers_total', remote_agent='decode-1') == 1
    assert by(f, 'xtel_notified_transfers_total', remote_agent='decode-2') == 1
    assert by(f, 'xtel_notified_transfers_total') == 5
    assert by(f, 'xtel_transfer_requests_total') == 0  # never this agent's own


def test_a_sender_s_name_reads_as_python_decodes_it(telemetry_dir):
    from xtel.instrument import _nixl_values as values
    names = [b'decode-\xff\xfe', b'd-\xe2\x82', 'caf\u00e9', bytearray(b'abc'), 17]
    with xtel.Telemetry('tt-names') as t:
        t._notified('read', [(n, b'') for n in names])
        f = node_file(t, telemetry_dir)
    for n in names:
        assert by(f, 'xtel_notified_transfers_total', remote_agent=values.name(n)) == 1, n
