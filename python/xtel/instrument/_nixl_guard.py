"""What xtel.instrument.nixl's wrappers share: an error inside them logged once per place and
counted (:func:`errors`, and the agent's ``xtel_instrument_errors`` counter), and the agent's
state as the wrappers keep it on NIXL's agent object.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Optional

_log = logging.getLogger("xtel.instrument.nixl")
_lock = threading.Lock()
_errors = 0
_logged: set = set()


def errors() -> int:
    """Errors inside the instrumentation so far (each logged the first time at its place)."""
    return _errors


def _first_time(where: str) -> bool:
    """True the first time `where` is asked: what logs once per place."""
    with _lock:
        first = where not in _logged
        _logged.add(where)
    return first


def _failed(where: str, exc: BaseException, agent: Optional[Any] = None) -> None:
    global _errors
    with _lock:
        _errors += 1
    if _first_time(where):
        _log.warning("xtel.instrument.nixl: %s failed (%s: %s); NIXL's call was not changed. "
                     "Further failures there are counted, not logged", where,
                     type(exc).__name__, exc)
    if agent is not None and agent.telemetry is not None:
        try:
            agent.telemetry.event("custom", "xtel_instrument_errors", 1, "counter")
        except Exception:
            pass


def _log_once(where: str, message: str, *args: Any) -> None:
    if _first_time(where):
        _log.warning(message, *args)


def state(self: Any) -> Optional[Any]:
    """The instrumentation's state of NIXL agent `self` (its _Agent), or None."""
    return getattr(self, "_xtel_agent", None)
