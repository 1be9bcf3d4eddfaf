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


# At most this many descriptor lists are remembered per agent (get_xfer_descs's, by id): a
# list the engine drops is never seen again. The transfers and prepped lists are the
# pipeline's table's (python/src/transfer_table.hpp), bounded there.
_MAX_REMEMBERED = 65536


def enabled() -> bool:
    """True once :func:`enable` has wrapped NIXL's agent class."""
    return bool(_enabled_classes)


def _switch_on(value: Optional[str]) -> bool:
    return (value or "").strip().lower() in ("y", "yes", "1", "on", "true")


class _Agent:
    """One NIXL agent's pipeline, and the descriptor lists its transfers are made of.

    What is known of each transfer handle, from make to release, is kept by the pipeline
    itself (its ``_track_*`` calls): an engine makes every transfer through four wrapped calls,
    and each Python step inside them cost the transfer 70 to 250 ns once NIXL's own call had run
    (bench/python_instrument_nixl.py); one call into the table is one step."""

    __slots__ = ("telemetry", "nixl_timing", "notified_op", "descs")

    def __init__(self, telemetry: Optional[xtel.Telemetry], nixl_timing: bool) -> None:
        self.telemetry = telemetry
        self.nixl_timing = nixl_timing
        self.notified_op = _target.notified_op() if telemetry is not None else "read"
        # id(nixlXferDList) -> (the list, kept alive while remembered; its lengths)
        self.descs: Dict[int, Tuple[Any, List[int]]] = {}


def _remember(table: Dict[int, Any], key: int, value: Any) -> None:
    if len(table) >= _MAX_REMEMBERED and key not in table:
        del table[next(iter(table))]  # the oldest
    table[key] = value


# ---- the wrappers: NIXL's call first, unchanged; the bookkeeping after it, guarded ----------

_originals: Dict[type, Dict[str, Any]] = {}

# What a wrapper's optional parameter is when its caller left it out: NIXL's call then gets it
# left out too.
_UNSET: Any = object()


def _original(self: Any, name: str) -> Any:
    """NIXL's own method `name` of the wrapped class `self` is (or derives from)."""
    for cls in type(self).__mro__:
        originals = _originals.get(cls)
        if originals is not None:
            return originals[name]
    raise LookupError(f"{type(self).__qualname__} is not a class xtel.instrument.nixl wrapped")


_state = _guard.state
_traceparent = _values.traceparent


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
                agent.telemetry._track_dlist(handle._handle, "" if local else peer, lengths)
            except Exception as e:
                _failed("prep_xfer_dlist", e, agent)
        return handle
    return prep_xfer_dlist


_MAKE_PREPPED = ("self", "operation", "local_xfer_side", "local_indices", "remote_xfer_side",
                 "remote_indices", "notif_msg", "backends", "skip_desc_merge")


def _wrap_make_prepped_xfer(orig: Any) -> Any:
    def made(agent: Any, handle: Any, op: Any, local_side: Any, indices: Any, remote_side: Any,
             notif: Any) -> None:
        try:
            agent.telemetry._track_made(handle._handle, op, local_side._handle,
                                        remote_side._handle, indices, notif)
        except Exception as e:
            _failed("make_prepped_xfer", e, agent)

    # With NIXL's own signature, the wrapper takes it as NIXL does (no packing of *args and
    # **kwargs), and passes on only what its caller gave.
    if _positional(orig, _MAKE_PREPPED, optional=3):
        def make_prepped_xfer(self: Any, operation: Any, local_xfer_side: Any,
                              local_indices: Any, remote_xfer_side: Any, remote_indices: Any,
                              notif_msg: Any = _UNSET, backends: Any = _UNSET,
                              skip_desc_merge: Any = _UNSET) -> Any:
            args = (operation, local_xfer_side, local_indices, remote_xfer_side, remote_indices)
            try:
                if backends is _UNSET and skip_desc_merge is _UNSET:
                    handle = (orig(self, *args) if notif_msg is _UNSET else
                              orig(self, *args, notif_msg))
                else:
                    given = {k: v for k, v in (("notif_msg", notif_msg), ("backends", backends),
                                               ("skip_desc_merge", skip_desc_merge))
                             if v is not _UNSET}
                    handle = orig(self, *args, **given)
            except Exception as e:
                agent = getattr(self, "_xtel_agent", None)
                if agent is not None and agent.telemetry is not None:
                    _creation_failed(agent, args, {} if notif_msg is _UNSET else
                                     {"notif_msg": notif_msg}, e, prepped=True)
                raise
            agent = getattr(self, "_xtel_agent", None)
            if agent is not None and agent.telemetry is not None:
                # made(), inline: a call less on every transfer (about 80 ns).
                try:
                    agent.telemetry._track_made(handle._handle, operation,
                                                local_xfer_side._handle,
                                                remote_xfer_side._handle, local_indices,
                                                None if notif_msg is _UNSET else notif_msg)
                except Exception as e:
                    _failed("make_prepped_xfer", e, agent)
            return handle
        return make_prepped_xfer

    def make_prepped_xfer_any(self: Any, *args: Any, **kwargs: Any) -> Any:
        agent = getattr(self, "_xtel_agent", None)
        try:
            handle = orig(self, *args, **kwargs)
        except Exception as e:
            if agent is not None and agent.telemetry is not None:
                _creation_failed(agent, args, kwargs, e, prepped=True)
            raise
        if agent is not None and agent.telemetry is not None:
            made(agent, handle, _values.arg(args, kwargs, 0, "operation"),
                 _values.arg(args, kwargs, 1, "local_xfer_side"),
                 _values.arg(args, kwargs, 2, "local_indices"),
                 _values.arg(args, kwargs, 3, "remote_xfer_side"),
                 _values.arg(args, kwargs, 5, "notif_msg"))
        return handle
    return make_prepped_xfer_any


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
                nbytes = sum(lengths) if lengths is not None else 0
                descs = len(lengths) if lengths is not None else int(local.descCount())
                agent.telemetry._track_made_as(
                    handle._handle, op, _values.name(_values.arg(args, kwargs, 3, "remote_agent")),
                    nbytes, descs, _values.arg(args, kwargs, 4, "notif_msg"))
            except Exception as e:
                _failed("initialize_xfer", e, agent)
        return handle
    return initialize_xfer


def _creation_failed(agent: _Agent, args: tuple, kwargs: dict, exc: BaseException,
                     prepped: bool) -> None:
    """A transfer NIXL refused to make: recorded failed, by its kind, with what is known."""
    tel = agent.telemetry
    if tel is None:
        return
    try:
        op = str(_values.arg(args, kwargs, 0, "operation")).lower()
        if prepped:
            remote = _values.arg(args, kwargs, 3, "remote_xfer_side")
            peer = tel._dlist_peer(remote._handle) or "unknown"
            notif = _values.arg(args, kwargs, 5, "notif_msg")
        else:
            peer = _values.name(_values.arg(args, kwargs, 3, "remote_agent"))
            notif = _values.arg(args, kwargs, 4, "notif_msg")
        # Its request as a posted transfer's: its span joins the request's trace.
        traceparent = _values.traceparent()
        tel.record_transfer(op, peer, 0, status=_values.failed_kind(exc),
                            request_id=None if traceparent else _values.request_of(notif),
                            traceparent=traceparent)
    except Exception as e:
        _failed("recording a refused transfer", e, agent)


def _wrap_transfer(orig: Any) -> Any:
    # With NIXL's own signature (self, handle, notif_msg=b''), the wrapper takes it as NIXL
    # does: no packing of *args and **kwargs, and the handle at hand.
    if _positional(orig, ("self", "handle", "notif_msg"), optional=1):
        def transfer(self: Any, handle: Any, notif_msg: Any = _UNSET) -> Any:
            started = time.perf_counter_ns()
            try:
                state = (orig(self, handle) if notif_msg is _UNSET else
                         orig(self, handle, notif_msg))
            except Exception as e:
                _post_failed(self, handle, notif_msg, started, e)
                raise
            agent = getattr(self, "_xtel_agent", None)
            if agent is not None and agent.telemetry is not None:
                if agent.nixl_timing:
                    _post_ended(self, agent, handle, notif_msg, started, state)
                else:  # _post_ended's common case, inline: a call less on every transfer
                    try:
                        agent.telemetry._track_posted(
                            handle._handle, started, None if notif_msg is _UNSET else notif_msg,
                            _traceparent(), None if state == "PROC" else
                            "ok" if state == "DONE" else "error" if state == "ERR" else None)
                    except Exception as e:
                        _failed("transfer", e, agent)
            return state
        return transfer

    def transfer_any(self: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter_ns()
        handle = _values.arg(args, kwargs, 0, "handle")
        notif = _values.arg(args, kwargs, 1, "notif_msg", _UNSET)
        try:
            state = orig(self, *args, **kwargs)
        except Exception as e:
            _post_failed(self, handle, notif, started, e)
            raise
        agent = getattr(self, "_xtel_agent", None)
        if agent is not None and agent.telemetry is not None:
            _post_ended(self, agent, handle, notif, started, state)
        return state
    return transfer_any


def _post_failed(self: Any, handle: Any, notif: Any, started: int, exc: BaseException) -> None:
    agent = getattr(self, "_xtel_agent", None)
    if agent is not None and agent.telemetry is not None:
        _post_ended(self, agent, handle, notif, started, None, _values.failed_kind(exc))


def _post_ended(self: Any, agent: _Agent, handle: Any, notif: Any, started: int,
                state: Optional[str], failed: Optional[str] = None) -> None:
    """After transfer(): the post timed; recorded now when it already ended (DONE, ERR, or
    raised `failed`)."""
    try:
        status = failed or ("ok" if state == "DONE" else "error" if state == "ERR" else None)
        tel = agent.telemetry
        if not agent.nixl_timing:
            tel._track_posted(handle._handle, started, None if notif is _UNSET else notif,
                              _values.traceparent(), status)
        elif (tel._track_posted(handle._handle, started, None if notif is _UNSET else notif,
                                _values.traceparent(), None) and status is not None):
            _ended_with_nixl_times(self, agent, handle, status)
    except Exception as e:
        _failed("transfer", e, agent)


def _ended_with_nixl_times(self: Any, agent: _Agent, handle: Any, status: str) -> None:
    """A pending transfer recorded with NIXL's own figures of it (get_xfer_telemetry, NIXL's
    telemetry being on), or the table's where NIXL captured none."""
    tel = agent.telemetry
    key = handle._handle
    if not tel._track_pending(key):
        return
    if status == "ok":
        try:
            nt = _original(self, "get_xfer_telemetry")(self, handle)
            figures = (int(nt.postDuration), int(nt.xferDuration), int(nt.totalBytes),
                       int(nt.descCount))
        except Exception:  # NIXL raises when it captured nothing: this module's clock, then
            figures = None
        if figures is not None:
            tel._track_ended(key, status, *figures)
            return
    tel._track_ended(key, status)


def _wrap_check_xfer_state(orig: Any) -> Any:
    # Polled in a loop by engines, many times a transfer: the poll that says PROC costs one call
    # more and one comparison. With NIXL's own signature (self, handle) the call passes its one
    # argument as it is, without packing (about half the cost of *args, **kwargs).
    if _positional(orig, ("self", "handle")):
        def check_xfer_state(self: Any, handle: Any) -> Any:
            state = orig(self, handle)
            if state != "PROC":
                agent = getattr(self, "_xtel_agent", None)
                if agent is not None and agent.telemetry is not None and not agent.nixl_timing:
                    try:  # _check_ended's common case, inline: a call less on every transfer
                        agent.telemetry._track_ended(handle._handle,
                                                     "ok" if state == "DONE" else "error")
                    except Exception as e:
                        _failed("check_xfer_state", e, agent)
                else:
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
    agent = getattr(self, "_xtel_agent", None)
    if agent is not None and agent.telemetry is not None:
        try:
            status = "ok" if state == "DONE" else "error"
            if agent.nixl_timing:
                _ended_with_nixl_times(self, agent, handle, status)
            else:
                agent.telemetry._track_ended(handle._handle, status)
        except Exception as e:
            _failed("check_xfer_state", e, agent)


def _positional(fn: Any, names: Tuple[str, ...], optional: int = 0) -> bool:
    """True when `fn` takes exactly the parameters `names`, positional or keyword, the last
    `optional` of them with defaults and the others without."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    required = len(names) - optional
    return (tuple(p.name for p in params) == names and
            all(p.kind is p.POSITIONAL_OR_KEYWORD and (p.default is p.empty) == (i < required)
                for i, p in enumerate(params)))


def _wrap_release_xfer_handle(orig: Any) -> Any:
    def released(self: Any, handle: Any) -> None:
        agent = getattr(self, "_xtel_agent", None)
        if agent is not None and agent.telemetry is not None:
            try:
                agent.telemetry._track_released(handle._handle)
            except Exception as e:
                _failed("release_xfer_handle", e, agent)

    if _positional(orig, ("self", "handle")):
        def release_xfer_handle(self: Any, handle: Any) -> Any:
            result = orig(self, handle)
            agent = getattr(self, "_xtel_agent", None)
            if agent is not None and agent.telemetry is not None:
                try:  # released(), inline: a call less on every transfer
                    agent.telemetry._track_released(handle._handle)
                except Exception as e:
                    _failed("release_xfer_handle", e, agent)
            return result
        return release_xfer_handle

    def release_xfer_handle_any(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = orig(self, *args, **kwargs)
        released(self, _values.arg(args, kwargs, 0, "handle"))
        return result
    return release_xfer_handle_any


def _wrap_release_dlist_handle(orig: Any) -> Any:
    def release_dlist_handle(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = orig(self, *args, **kwargs)
        agent = _state(self)
        if agent is not None and agent.telemetry is not None:
            try:
                agent.telemetry._forget_dlist(_values.arg(args, kwargs, 0, "handle")._handle)
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
