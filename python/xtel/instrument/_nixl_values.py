"""What xtel.instrument.nixl reads out of NIXL's calls: each descriptor's length, a call's
argument given either way, the request a transfer serves, an agent's name, an error's kind,
the notifications a poll brought."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

# The kinds xtel records for NIXL's error classes (its binding raises nixl<Kind>Error).
_KINDS = {
    "nixlInvalidParamError": "invalid_argument",
    "nixlBackendError": "backend_error",
    "nixlNotFoundError": "not_found",
    "nixlNotAllowedError": "busy",
    "nixlNotSupportedError": "not_supported",
    "nixlRemoteDisconnectError": "remote_disconnected",
    "nixlCancelledError": "timed_out",
}

# opentelemetry.trace and opentelemetry.context.get_current, when installed (looked up once).
_otel: Any = None
_otel_current: Any = None
_otel_checked = False


def lengths(known: Dict[int, Any], xfer_list: Any) -> Optional[List[int]]:
    """Each descriptor's length in what the engine gave NIXL, or None when it cannot be told."""
    remembered = known.get(id(xfer_list))
    if remembered is not None and remembered[0] is xfer_list:
        return remembered[1]
    kind = type(xfer_list)
    if kind is list or kind is tuple:
        out = []
        for d in xfer_list:
            if isinstance(d, (list, tuple)):
                out.append(int(d[1]))
            elif type(d).__module__.startswith("torch"):
                out.append(int(d.numel() * d.element_size()))
            else:
                return None
        return out
    if kind.__module__ == "numpy" and getattr(xfer_list, "ndim", 0) == 2:
        columns = xfer_list.shape[1]
        if columns == 3:
            return [int(n) for n in xfer_list[:, 1]]
        if columns == 5:  # strided: count blocks of len bytes each
            return [int(r[1]) * int(r[4]) for r in xfer_list]
        return None
    if kind.__module__.startswith("torch"):
        return [int(xfer_list.numel() * xfer_list.element_size())]
    return None


def arg(args: tuple, kwargs: dict, index: int, name: str, default: Any = None) -> Any:
    """A wrapped call's argument `name`, `index` places after self, given either way."""
    if len(args) > index:
        return args[index]
    return kwargs.get(name, default)


def traceparent() -> Optional[str]:
    """The current OpenTelemetry span's context as a W3C traceparent, when one is recording."""
    global _otel, _otel_current, _otel_checked
    if not _otel_checked:
        _otel_checked = True
        try:
            from opentelemetry import context, trace  # type: ignore  # absent, or untyped

            _otel, _otel_current = trace, context.get_current
        except Exception:
            _otel = None
    if _otel is None:
        return None
    # An empty context holds no span: told from the context itself, a third of what asking
    # for its span costs (every transfer() asks).
    current = _otel_current()
    if not current:
        return None
    ctx = _otel.get_current_span(current).get_span_context()
    if not ctx.is_valid:
        return None
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


def request_of(notif: Any) -> Optional[str]:
    if not notif:
        return None
    if isinstance(notif, (bytes, bytearray)):
        return bytes(notif).decode("utf-8", "replace")
    return str(notif)


def name(value: Any) -> str:
    """An agent's name as NIXL's Python hands it (add_remote_agent returns bytes)."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


def failed_kind(exc: BaseException) -> str:
    return _KINDS.get(type(exc).__name__, "error")


def notifs_added(before: Dict[str, List[Any]], after: Dict[str, List[Any]]
                 ) -> List[Tuple[str, Any]]:
    """(sender, message) of every notification in `after` that `before` did not hold.

    NIXL's update_notifs and check_remote_xfer_done replace the agent's map (``notifs``) with
    a new one, whose lists hold the messages already there (the same objects) followed by the
    new ones: a message is new when it is not one of `before`'s, by identity (`before` keeps
    them alive, so no id is reused meanwhile); equal messages stay apart."""
    added: List[Tuple[str, Any]] = []
    for sender, messages in after.items():
        old = before.get(sender)
        if not messages:
            continue
        if not old:
            added += [(sender, m) for m in messages]
        elif len(messages) > len(old) or messages[-1] is not old[-1]:
            seen = {id(m) for m in old}
            added += [(sender, m) for m in messages if id(m) not in seen]
    return added


