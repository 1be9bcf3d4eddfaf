"""Every transfer a Python engine makes through NIXL, recorded by xtel, without a change to it.

:func:`enable` wraps methods of NIXL's ``nixl_agent`` class (``nixl._api``, the class vLLM's
NixlConnector and SGLang's disaggregation use). Each NIXL agent made from then on gets an xtel
pipeline of its own name (``xtel.Telemetry(agent_name, exporter="node", enable=True)``: a node
file beside every other agent's, which xtel-exporter serves), and every transfer it initiates
becomes one ``record_transfer`` when it completes or fails:

- the operation (WRITE, READ) and the remote agent: the ``remote_agent`` label;
- its bytes and descriptors: from the descriptor lists the engine gave ``get_xfer_descs``,
  ``prep_xfer_dlist``, ``make_prepped_xfer`` and ``initialize_xfer``, or NIXL's own
  ``get_xfer_telemetry`` when NIXL's telemetry is on;
- its post time (the ``transfer()`` call) and transfer time (post to the completion
  ``transfer()`` or ``check_xfer_state()`` reported): NIXL's ``get_xfer_telemetry`` when NIXL's
  telemetry is on, this module's clock otherwise;
- its status: ``ok``, the kind of the NIXL error it raised, or ``error`` for an ``ERR`` state;
- its request: the W3C traceparent of the OpenTelemetry span current at ``transfer()`` (when
  ``opentelemetry-api`` is installed and a span is recording), else the transfer's notification
  message, so that its span (failed, slow or sampled: NIXL_TELEMETRY_TRACE_*) joins the
  request's trace.

What the engine sees never changes: every wrapped call calls NIXL's with the same arguments and
returns its value or raises its exception, the same object. The bookkeeping runs after NIXL's
call (and before it a copy of the map of unhandled notifications, for the two polls that replace
it), inside ``try``: an error in it is logged once (per place) and counted
(:func:`errors`, and the agent's ``xtel_instrument_errors`` counter), and the engine's call
goes on. ``get_xfer_telemetry`` is called only when NIXL's telemetry is on, guarded: NIXL raises
from it when its telemetry is off (dynamo #12952), and the engine's own calls of it are
NIXL's, unchanged.

With NIXL's xtel plug-in loaded too (``NIXL_TELEMETRY_ENABLE`` on and
``NIXL_TELEMETRY_EXPORTER=xtel``), the plug-in already writes the agent's node file: this module
then records nothing for the agent, so that an agent is one node file and nothing is counted
twice (logged once). The plug-in's series carry no peer; to have peers, leave the plug-in out.

On the target's side (``_nixl_target``), each notification the agent polls is one
``record_notified``: its sender the remote agent, its message the request, the operation
``XTEL_INSTRUMENT_NOTIFIED_OP`` (read by default) and the bytes 0, which NIXL does not say.
"""

from __future__ import annotations

import inspect
import os
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

import xtel

from . import _nixl_guard as _guard
from . import _nixl_values as _values
from ._nixl_guard import _failed, _log_once, errors

__all__ = ["enable", "enabled", "errors"]


#: The xtel exporter each agent's pipeline uses; "node" when unset.
EXPORTER_VARIABLE = "XTEL_INSTRUMENT_EXPORTER"

_lock = threading.Lock()
_enabled_classes: List[type] = []


# At most this many descriptor lists and transfers are remembered per agent: a handle the
# engine releases through its own release() (not the agent's) is never seen again.
_MAX_REMEMBERED = 65536


def enabled() -> bool:
    """True once :func:`enable` has wrapped NIXL's agent class."""
    return bool(_enabled_classes)


def _switch_on(value: Optional[str]) -> bool:
    return (value or "").strip().lower() in ("y", "yes", "1", "on", "true")


class _Transfer:
    """What is known of one transfer handle: what it moves, and its post in progress."""

    __slots__ = ("op", "peer", "nbytes", "descs", "notif", "started", "post_us", "pending",
                 "traceparent")

    def __init__(self, op: str, peer: str, nbytes: Optional[int], descs: int,
                 notif: Any) -> None:
        self.reset(op, peer, nbytes, descs, notif)

    def reset(self, op: str, peer: str, nbytes: Optional[int], descs: int, notif: Any) -> None:
        self.op = op
        self.peer = peer
        self.nbytes = nbytes
        self.descs = descs
        self.notif = notif
        self.started = 0
        self.post_us = 0
        self.pending = False
        self.traceparent: Optional[str] = None


class _Agent:
    """One NIXL agent's pipeline and what its transfers are made of."""

    __slots__ = ("telemetry", "nixl_timing", "notified_op", "descs", "dlists", "transfers",
                 "spare")

    def __init__(self, telemetry: Optional[xtel.Telemetry], nixl_timing: bool) -> None:
        self.telemetry = telemetry
        self.nixl_timing = nixl_timing
        self.notified_op = _target.notified_op() if telemetry is not None else "read"
        # id(nixlXferDList) -> (the list, kept alive while remembered; its lengths)
        self.descs: Dict[int, Tuple[Any, List[int]]] = {}
        # prepped dlist handle -> (the remote agent, or None for local; its lengths)
        self.dlists: Dict[int, Tuple[Optional[str], Optional[List[int]]]] = {}
        self.transfers: Dict[int, _Transfer] = {}
        # Released transfers' records, made again for the next ones: a transfer allocates no
        # record of its own once the agent has run a while.
        self.spare: List[_Transfer] = []

    def new_transfer(self, op: str, peer: str, nbytes: Optional[int], descs: int,
                     notif: Any) -> _Transfer:
        if self.spare:
            t = self.spare.pop()
            t.reset(op, peer, nbytes, descs, notif)
            return t
        return _Transfer(op, peer, nbytes, descs, notif)


def _remember(table: Dict[int, Any], key: int, value: Any) -> None:
    if len(table) >= _MAX_REMEMBERED and key not in table:
        del table[next(iter(table))]  # the oldest
    table[key] = value


def _record(agent: _Agent, t: _Transfer, status: str, now_ns: int,
            nixl_agent: Any = None, handle: Any = None) -> None:
    """The transfer `t`, ended now with `status`, recorded in the agent's pipeline."""
    tel = agent.telemetry
    if tel is None:
        return
    t.pending = False
    nbytes, descs = t.nbytes, t.descs
    # A transfer never posted (NIXL refused to make it) has no times.
    post_us = t.post_us if t.started else None
    xfer_us = (now_ns - t.started) // 1000 if t.started else None
    if agent.nixl_timing and handle is not None and status == "ok":
        try:
            nt = _original(nixl_agent, "get_xfer_telemetry")(nixl_agent, handle)
            if nt.totalBytes:
                nbytes, descs = int(nt.totalBytes), int(nt.descCount)
            post_us, xfer_us = int(nt.postDuration), int(nt.xferDuration)
        except Exception:  # NIXL raises when it captured nothing: this module's clock, then
            pass
    request = None if t.traceparent else _values.request_of(t.notif)
    tel.record_transfer(t.op, t.peer, nbytes or 0, status=status, post_us=post_us,
                        xfer_us=xfer_us, descriptors=max(1, descs), request_id=request,
                        traceparent=t.traceparent)


# ---- the wrappers: NIXL's call first, unchanged; the bookkeeping after it, guarded ----------

_originals: Dict[type, Dict[str, Any]] = {}


def _original(self: Any, name: str) -> Any:
    """NIXL's own method `name` of the wrapped class `self` is (or derives from)."""
    for cls in type(self).__mro__:
        originals = _originals.get(cls)
        if originals is not None:
            return originals[name]
    raise LookupError(f"{type(self).__qualname__} is not a class xtel.instrument.nixl wrapped")


_state = _guard.state


def _wrap_init(orig: Any) -> Any:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        orig(self, *args, **kwargs)
        try:
            name = _values.arg(args, kwargs, 0, "agent_name")
            self._xtel_agent = _agent_for(_values.name(name))
        except Exception as e:
            _failed("making the agent's pipeline", e)
    return __init__


def _agent_for(name: str) -> _Agent:
    nixl_on = _switch_on(os.environ.get("NIXL_TELEMETRY_ENABLE"))
    if nixl_on and os.environ.get("NIXL_TELEMETRY_EXPORTER", "").strip() == "xtel":
        _log_once("plug-in", "xtel.instrument.nixl: NIXL's xtel plug-in records agent '%s' (and "
                  "every agent of this process) into its node file: the instrumentation records "
                  "nothing for them, so that nothing is counted twice", name)
        return _Agent(None, nixl_on)
    exporter = os.environ.get(EXPORTER_VARIABLE) or "node"
    # NIXL_TELEMETRY_DIR is NIXL's BUFFER exporter's directory in this process, not the node
    # file's (NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH, else /dev/shm).
    return _Agent(xtel.Telemetry(name, exporter=exporter, enable=True,
                                 variables={"NIXL_TELEMETRY_DIR": None}), nixl_on)


def _wrap_get_xfer_descs(orig: Any) -> Any:
    def get_xfer_descs(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = orig(self, *args, **kwargs)
        agent = _state(self)
        if agent is not None and agent.telemetry is not None:
            try:
                lengths = _values.lengths(agent.descs, _values.arg(args, kwargs, 0, "descs"))
                if lengths is not None:
                    _remember(agent.descs, id(result), (result, lengths))
            except Exception as e:
                _failed("get_xfer_descs", e, agent)
        return result
    return get_xfer_descs


def _wrap_prep_xfer_dlist(orig: Any) -> Any:
    def prep_xfer_dlist(self: Any, *args: Any, **kwargs: Any) -> Any:
        handle = orig(self, *args, **kwargs)
        agent = _state(self)
        if agent is not None and agent.telemetry is not None:
            try:
                peer = _values.name(_values.arg(args, kwargs, 0, "agent_name"))
                local = peer in ("NIXL_INIT_AGENT", "")
                lengths = _values.lengths(agent.descs, _values.arg(args, kwargs, 1, "xfer_list"))
                _remember(agent.dlists, handle._handle, (None if local else peer, lengths))
            except Exception as e:
                _failed("prep_xfer_dlist", e, agent)
        return handle
    return prep_xfer_dlist


def _wrap_make_prepped_xfer(orig: Any) -> Any:
    def make_prepped_xfer(self: Any, *args: Any, **kwargs: Any) -> Any:
        agent = _state(self)
        try:
            handle = orig(self, *args, **kwargs)
        except Exception as e:
            if agent is not None and agent.telemetry is not None:
                _creation_failed(agent, args, kwargs, e, prepped=True)
            raise
        if agent is not None and agent.telemetry is not None:
            try:
                op = str(_values.arg(args, kwargs, 0, "operation")).lower()
                local = agent.dlists.get(_values.arg(args, kwargs, 1, "local_xfer_side")._handle)
                indices = _values.arg(args, kwargs, 2, "local_indices")
                remote = agent.dlists.get(_values.arg(args, kwargs, 3, "remote_xfer_side")._handle)
                lengths = local[1] if local else None
                nbytes = sum(lengths[int(i)] for i in indices) if lengths is not None else None
                peer = remote[0] if remote and remote[0] else "unknown"
                _remember(agent.transfers, handle._handle,
                          agent.new_transfer(op, peer, nbytes, len(indices),
                                    _values.arg(args, kwargs, 5, "notif_msg", b"")))
            except Exception as e:
                _failed("make_prepped_xfer", e, agent)
        return handle
    return make_prepped_xfer


def _wrap_initialize_xfer(orig: Any) -> Any:
    def initialize_xfer(self: Any, *args: Any, **kwargs: Any) -> Any:
        agent = _state(self)
        try:
            handle = orig(self, *args, **kwargs)
        except Exception as e:
            if agent is not None and agent.telemetry is not None:
                _creation_failed(agent, args, kwargs, e, prepped=False)
            raise
        if agent is not None and agent.telemetry is not None:
            try:
                op = str(_values.arg(args, kwargs, 0, "operation")).lower()
                local = _values.arg(args, kwargs, 1, "local_descs")
                lengths = _values.lengths(agent.descs, local)
                nbytes = sum(lengths) if lengths is not None else None
                descs = len(lengths) if lengths is not None else int(local.descCount())
                _remember(agent.transfers, handle._handle,
                          agent.new_transfer(op, _values.name(_values.arg(args, kwargs, 3,
                                                                          "remote_agent")),
                                             nbytes, descs,
                                    _values.arg(args, kwargs, 4, "notif_msg", b"")))
            except Exception as e:
                _failed("initialize_xfer", e, agent)
        return handle
    return initialize_xfer


def _creation_failed(agent: _Agent, args: tuple, kwargs: dict, exc: BaseException,
                     prepped: bool) -> None:
    """A transfer NIXL refused to make: recorded failed, by its kind, with what is known."""
    try:
        op = str(_values.arg(args, kwargs, 0, "operation")).lower()
        if prepped:
            remote = agent.dlists.get(_values.arg(args, kwargs, 3, "remote_xfer_side")._handle)
            peer = remote[0] if remote and remote[0] else "unknown"
            notif = _values.arg(args, kwargs, 5, "notif_msg")
        else:
            peer = _values.name(_values.arg(args, kwargs, 3, "remote_agent"))
            notif = _values.arg(args, kwargs, 4, "notif_msg")
        # Its request as a posted transfer's: its span joins the request's trace.
        t = _Transfer(op, peer, 0, 1, notif)
        t.traceparent = _values.traceparent()
        _record(agent, t, _values.failed_kind(exc), time.perf_counter_ns())
    except Exception as e:
        _failed("recording a refused transfer", e, agent)


def _wrap_transfer(orig: Any) -> Any:
    def transfer(self: Any, *args: Any, **kwargs: Any) -> Any:
        agent = _state(self)
        started = time.perf_counter_ns()
        try:
            state = orig(self, *args, **kwargs)
        except Exception as e:
            if agent is not None and agent.telemetry is not None:
                _post_ended(self, agent, args, kwargs, started, _values.failed_kind(e))
            raise
        if agent is not None and agent.telemetry is not None:
            _post_ended(self, agent, args, kwargs, started,
                        "ok" if state == "DONE" else "error" if state == "ERR" else None)
        return state
    return transfer


def _post_ended(self: Any, agent: _Agent, args: tuple, kwargs: dict, started: int,
                status: Optional[str]) -> None:
    """After transfer(): the post timed; recorded now when it already ended (`status`)."""
    try:
        handle = _values.arg(args, kwargs, 0, "handle")
        t = agent.transfers.get(handle._handle)
        if t is None:
            return  # made before the instrumentation, or forgotten: nothing known of it
        now = time.perf_counter_ns()
        t.started = started
        t.post_us = (now - started) // 1000
        notif = _values.arg(args, kwargs, 1, "notif_msg", b"")
        if notif:
            t.notif = notif
        t.traceparent = _values.traceparent()
        t.pending = True
        if status is not None:
            _record(agent, t, status, now, self, handle)
    except Exception as e:
        _failed("transfer", e, agent)


def _wrap_check_xfer_state(orig: Any) -> Any:
    # Polled in a loop by engines, many times a transfer: the poll that says PROC costs one call
    # more and one comparison. With NIXL's own signature (self, handle) the call passes its one
    # argument as it is, without packing (about half the cost of *args, **kwargs).
    if _positional(orig, ("self", "handle")):
        def check_xfer_state(self: Any, handle: Any) -> Any:
            state = orig(self, handle)
            if state != "PROC":
                _check_ended(self, handle, state)
            return state
        return check_xfer_state

    def check_xfer_state_any(self: Any, *args: Any, **kwargs: Any) -> Any:
        state = orig(self, *args, **kwargs)
        if state != "PROC":
            _check_ended(self, _values.arg(args, kwargs, 0, "handle"), state)
        return state
    return check_xfer_state_any


def _check_ended(self: Any, handle: Any, state: str) -> None:
    """check_xfer_state said DONE or ERR: the transfer recorded, if it was pending."""
    agent = _state(self)
    if agent is not None and agent.telemetry is not None:
        try:
            t = agent.transfers.get(handle._handle)
            if t is not None and t.pending:
                _record(agent, t, "ok" if state == "DONE" else "error", time.perf_counter_ns(),
                        self, handle)
        except Exception as e:
            _failed("check_xfer_state", e, agent)


def _positional(fn: Any, names: Tuple[str, ...]) -> bool:
    """True when `fn` takes exactly the parameters `names`, positional or keyword."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    return (tuple(p.name for p in params) == names and
            all(p.kind is p.POSITIONAL_OR_KEYWORD and p.default is p.empty for p in params))


def _wrap_release_xfer_handle(orig: Any) -> Any:
    def release_xfer_handle(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = orig(self, *args, **kwargs)
        agent = _state(self)
        if agent is not None:
            try:
                t = agent.transfers.pop(_values.arg(args, kwargs, 0, "handle")._handle, None)
                if t is not None and len(agent.spare) < 64:
                    agent.spare.append(t)
            except Exception as e:
                _failed("release_xfer_handle", e, agent)
        return result
    return release_xfer_handle


def _wrap_release_dlist_handle(orig: Any) -> Any:
    def release_dlist_handle(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = orig(self, *args, **kwargs)
        agent = _state(self)
        if agent is not None:
            try:
                agent.dlists.pop(_values.arg(args, kwargs, 0, "handle")._handle, None)
            except Exception as e:
                _failed("release_dlist_handle", e, agent)
        return result
    return release_dlist_handle


# ---- the target's side (_nixl_target.py), named here as the tests and docs name it --------

from . import _nixl_target as _target  # noqa: E402

NOTIFIED_OP_VARIABLE = _target.NOTIFIED_OP_VARIABLE
_notified_op = _target.notified_op


_WRAPPERS = {
    "__init__": _wrap_init,
    "get_xfer_descs": _wrap_get_xfer_descs,
    "prep_xfer_dlist": _wrap_prep_xfer_dlist,
    "make_prepped_xfer": _wrap_make_prepped_xfer,
    "initialize_xfer": _wrap_initialize_xfer,
    "transfer": _wrap_transfer,
    "check_xfer_state": _wrap_check_xfer_state,
    "release_xfer_handle": _wrap_release_xfer_handle,
    "release_dlist_handle": _wrap_release_dlist_handle,
    "get_new_notifs": _target.wrap_get_new_notifs,
    "update_notifs": _target.wrap_update_notifs,
    "check_remote_xfer_done": _target.wrap_check_remote_xfer_done,
}


def enable(agent_class: Optional[type] = None) -> bool:
    """Wraps NIXL's agent class (``nixl._api.nixl_agent``, or `agent_class`) so that the agents
    made from then on are recorded. Returns False, having changed nothing, when NIXL cannot be
    imported or its class lacks a method this module wraps (a NIXL it does not know: logged
    once); True once wrapped, and again at every later call."""
    if agent_class is None:
        try:
            from nixl._api import nixl_agent  # type: ignore[import-not-found]
        except Exception as e:
            _log_once("import", "xtel.instrument.nixl: NIXL cannot be imported (%s: %s): "
                      "nothing is instrumented", type(e).__name__, e)
            return False
        agent_class = nixl_agent
    with _lock:
        if agent_class in _enabled_classes:
            return True
        missing = [name for name in _WRAPPERS if not callable(getattr(agent_class, name, None))]
        if not missing:
            originals = {name: getattr(agent_class, name) for name in _WRAPPERS}
            originals["get_xfer_telemetry"] = getattr(agent_class, "get_xfer_telemetry", None)
            _originals[agent_class] = originals
            for name, wrap in _WRAPPERS.items():
                wrapped = wrap(originals[name])
                wrapped.__name__ = name
                wrapped.__qualname__ = f"{agent_class.__qualname__}.{name}"
                wrapped.__doc__ = originals[name].__doc__
                wrapped.__wrapped__ = originals[name]  # type: ignore[attr-defined]
                setattr(agent_class, name, wrapped)
            _enabled_classes.append(agent_class)
            return True
    # Logged outside the lock, as every other once-only line is.
    _log_once("class", "xtel.instrument.nixl: %s has no %s: a NIXL this version does not know; "
              "nothing is instrumented", agent_class.__qualname__, ", ".join(missing))
    return False
