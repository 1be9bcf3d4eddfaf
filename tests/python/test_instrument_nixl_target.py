"""xtel.instrument.nixl on the target's side, without NIXL: a class with NIXL's agent's methods,
whose notifications the test hands in, so that each way of polling them (and the bookkeeping
failing) is checked call by call; the real NIXL's flow is test_instrument_nixl.py's."""
import logging

import pytest

import xtel.instrument.nixl as instrument


class fake_nixl_agent:
    """NIXL's nixl_agent as far as the target's side goes: `arriving` is what NIXL has received
    and not handed out yet; the three polls hand it out as NIXL's do (update_notifs and
    check_remote_xfer_done into a new map of new lists, keeping the messages already there)."""

    def __init__(self, agent_name, config=None):
        self.notifs = {}
        self.arriving = {}

    def _take(self):
        got, self.arriving = self.arriving, {}
        return got

    def _merge(self):
        merged = {k: list(v) for k, v in self.notifs.items()}
        for sender, messages in self._take().items():
            merged.setdefault(sender, []).extend(messages)
        self.notifs = merged

    def get_new_notifs(self, backends=[]):
        return self._take()

    def update_notifs(self, backends=[]):
        self._merge()
        return self.notifs

    def check_remote_xfer_done(self, remote_agent_name, lookup_tag, backends=[],
                               tag_is_prefix=True):
        self._merge()
        for m in self.notifs.get(remote_agent_name, []):
            if m.startswith(lookup_tag):
                self.notifs[remote_agent_name].remove(m)
                return True
        return False

    # The initiator's methods, which these tests do not call.
    def get_xfer_descs(self, *a, **k): pass
    def prep_xfer_dlist(self, *a, **k): pass
    def make_prepped_xfer(self, *a, **k): pass
    def initialize_xfer(self, *a, **k): pass
    def transfer(self, *a, **k): pass
    def check_xfer_state(self, handle): pass
    def release_xfer_handle(self, *a, **k): pass
    def release_dlist_handle(self, *a, **k): pass


class recorder:
    """Takes the place of an agent's pipeline: each notification its _notified calls hand it (a
    poll's map, or a list of (sender, message)), as a tuple of what it records. How the real
    pipeline reads names and messages is test_transfer_table.py's."""

    def __init__(self, fail=False):
        self.notified, self.events, self.fail = [], [], fail

    def _notified(self, op, notifs):
        if self.fail:
            raise RuntimeError('the pipeline failed')
        pairs = ([(s, m) for s, messages in notifs.items() for m in messages]
                 if isinstance(notifs, dict) else list(notifs))
        self.notified += [(op, s.decode() if isinstance(s, bytes) else s, 0,
                           m.decode() if isinstance(m, bytes) else m) for s, m in pairs]

    def event(self, *args):
        self.events.append(args)


@pytest.fixture
def target(telemetry_dir, monkeypatch):
    """A wrapped agent named prefill-0 whose pipeline is a recorder."""
    monkeypatch.delenv(instrument.NOTIFIED_OP_VARIABLE, raising=False)
    assert instrument.enable(fake_nixl_agent)
    agent = fake_nixl_agent('prefill-0')
    agent._xtel_agent.telemetry = recorder()
    return agent


def test_get_new_notifs_records_every_message_it_returns_by_its_sender(target):
    target.arriving = {'decode-0': [b'req-1', b'req-2'], 'decode-1': [b'req-1']}
    got = target.arriving
    assert target.get_new_notifs() is got
    assert target._xtel_agent.telemetry.notified == [
        ('read', 'decode-0', 0, 'req-1'), ('read', 'decode-0', 0, 'req-2'),
        ('read', 'decode-1', 0, 'req-1')]
    assert target.get_new_notifs() == {}
    assert len(target._xtel_agent.telemetry.notified) == 3


def test_update_notifs_records_what_the_map_gained_not_what_it_held(target):
    target.arriving = {'decode-0': [b'req-1']}
    target.update_notifs()
    # An equal message again: another object, as NIXL makes one for each message it receives.
    target.arriving = {'decode-0': [bytes(bytearray(b'req-1'))], 'decode-1': [b'w-0']}
    assert target.update_notifs() == {'decode-0': [b'req-1', b'req-1'], 'decode-1': [b'w-0']}
    target.update_notifs()
    assert target._xtel_agent.telemetry.notified == [
        ('read', 'decode-0', 0, 'req-1'), ('read', 'decode-0', 0, 'req-1'),
        ('read', 'decode-1', 0, 'w-0')]


def test_check_remote_xfer_done_records_the_message_it_took_away_in_the_same_call(target,
                                                                                 monkeypatch):
    monkeypatch.setenv(instrument.NOTIFIED_OP_VARIABLE, 'write')
    target._xtel_agent.notified_op = instrument._notified_op()
    target.arriving = {'decode-0': [b'room-7:done']}
    # Arrived and found in one call: NIXL says only True, so it is recorded under the tag.
    assert target.check_remote_xfer_done('decode-0', b'room-7') is True
    assert target.notifs == {'decode-0': []}
    target.arriving = {'decode-0': [b'room-8:done', b'room-9:done']}
    assert target.check_remote_xfer_done('decode-0', b'room-9') is True  # one kept for later
    assert target.check_remote_xfer_done('decode-0', b'room-8') is True  # arrived before
    assert target.check_remote_xfer_done('decode-0', b'room-8') is False
    assert target._xtel_agent.telemetry.notified == [
        ('write', 'decode-0', 0, 'room-7'), ('write', 'decode-0', 0, 'room-8:done'),
        ('write', 'decode-0', 0, 'room-9')]


def test_a_failure_inside_is_logged_once_counted_and_the_engine_gets_nixls_answer(target,
                                                                                 caplog):
    target._xtel_agent.telemetry = recorder(fail=True)
    before = instrument.errors()
    with caplog.at_level(logging.WARNING, logger='xtel.instrument.nixl'):
        for i in range(3):
            target.arriving = {'decode-0': [f'req-{i}'.encode()]}
            got = target.arriving
            assert target.get_new_notifs() is got
    assert instrument.errors() - before == 3
    assert caplog.text.count('get_new_notifs failed (RuntimeError: the pipeline failed)') == 1
    assert target._xtel_agent.telemetry.events == [
        ('custom', 'xtel_instrument_errors', 1, 'counter')] * 3
