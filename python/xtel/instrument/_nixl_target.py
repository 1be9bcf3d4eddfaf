"""xtel.instrument.nixl's target side: each notification a NIXL agent polls is one
``record_notified``, its sender the remote agent and its message the request (the package's
docs/python.md, "Both sides of a request"). Its wrappers are installed by
:func:`xtel.instrument.nixl.enable` beside the initiator's, and follow the same rule: NIXL's
call unchanged, the bookkeeping guarded, an error logged once and counted.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, List

from . import _nixl_values as _values
from ._nixl_guard import _failed, _log_once, state

#: The operation a notified transfer is recorded as: NIXL's notification says neither the
#: operation nor the bytes, and a target cannot tell them from it.
NOTIFIED_OP_VARIABLE = "XTEL_INSTRUMENT_NOTIFIED_OP"


def notified_op() -> str:
    value = os.environ.get(NOTIFIED_OP_VARIABLE, "").strip().lower()
    if value in ("read", "write"):
        return value
    if value:
        _log_once("notified-op", "xtel.instrument.nixl: %s='%s' is invalid: expected read or "
                  "write; notifications are recorded as reads", NOTIFIED_OP_VARIABLE,
                  os.environ.get(NOTIFIED_OP_VARIABLE))
    return "read"


def _notified(agent: Any, added: Any) -> None:
    """Each (sender, message) of `added` recorded as a transfer `sender` made into (or from) this
    agent's memory, its request the message: the trace the sender's span is in when it tagged
    the transfer by the same message (docs/python.md, "Both sides of a request")."""
    if added:
        agent.telemetry._notified(agent.notified_op, added)


def wrap_get_new_notifs(orig: Any) -> Any:
    def get_new_notifs(self: Any, *args: Any, **kwargs: Any) -> Any:
        got = orig(self, *args, **kwargs)
        if got:
            agent = state(self)
            if agent is not None and agent.telemetry is not None:
                try:  # NIXL's map as it is, in one call: each notification a record
                    agent.telemetry._notified(agent.notified_op, got)
                except Exception as e:
                    _failed("get_new_notifs", e, agent)
        return got
    return get_new_notifs


def _snapshot(self: Any) -> Dict[str, List[Any]]:
    """The agent's map of notifications not yet handled, as it is now (NIXL's, copied)."""
    notifs = getattr(self, "notifs", None)
    return {k: list(v) for k, v in notifs.items()} if notifs else {}


def _around_replacing_poll(where: str, orig: Any,
                           after: Callable[..., None]) -> Any:
    """A wrapper of `orig`, a poll that replaces the agent's map of notifications: the map
    copied before NIXL's call, and `after(agent, before, now, args, kwargs, answer)` once it
    returned (`now`: the map NIXL left), each guarded; NIXL's answer returned as it is."""
    def poll(self: Any, *args: Any, **kwargs: Any) -> Any:
        agent = state(self)
        before = None
        if agent is not None and agent.telemetry is not None:
            try:
                before = _snapshot(self)
            except Exception as e:
                _failed(where, e, agent)
        answer = orig(self, *args, **kwargs)
        if before is not None:
            try:
                after(agent, before, self.notifs, args, kwargs, answer)
            except Exception as e:
                _failed(where, e, agent)
        return answer
    return poll


def wrap_update_notifs(orig: Any) -> Any:
    def added(agent: Any, before: Dict[str, List[Any]], now: Dict[str, List[Any]],
              args: tuple, kwargs: dict, answer: Any) -> None:
        _notified(agent, _values.notifs_added(before, now))
    return _around_replacing_poll("update_notifs", orig, added)


def wrap_check_remote_xfer_done(orig: Any) -> Any:
    return _around_replacing_poll("check_remote_xfer_done", orig, _remote_done)


def _remote_done(agent: Any, before: Dict[str, List[Any]],
                 after: Dict[str, List[Any]], args: tuple, kwargs: dict, found: Any) -> None:
    """The notifications check_remote_xfer_done brought recorded, the one it took away too."""
    added = _values.notifs_added(before, after)
    if found is True:
        sender = _values.arg(args, kwargs, 0, "remote_agent_name")
        arrived = len(after.get(sender, ())) + 1 - len(before.get(sender, ()))
        if sum(1 for s, _ in added if s == sender) < arrived:
            # The message found arrived in this very call and NIXL removed it: NIXL answers only
            # whether one was found, so it is recorded under the tag it was looked up by.
            added.append((sender, _values.arg(args, kwargs, 1, "lookup_tag")))
    _notified(agent, added)
