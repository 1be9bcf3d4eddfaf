"""Applied when an interpreter starts, by the package's ``xtel-instrument.pth``, only when
``XTEL_INSTRUMENT`` is set: ``XTEL_INSTRUMENT=nixl`` instruments NIXL as soon as a program
imports it (:mod:`xtel.instrument.nixl`), with no change to the program. A value naming no
library this package knows is logged once and ignored. Nothing here may fail the program's
start: any error is logged and the program runs uninstrumented.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import logging
import os
import sys
from typing import Any, Optional, Sequence

from . import KNOWN

_log = logging.getLogger("xtel.instrument")

# The modules that define NIXL's nixl_agent: nixl._api is one of them, by NIXL's wheel for the
# machine's CUDA (or ROCm), put in place by the package nixl.
_NIXL_API_MODULES = ("nixl_cu12._api", "nixl_cu13._api", "nixl_rocm._api")


class _PatchAfterExec(importlib.abc.Loader):
    """Runs a module as its own loader does, then instruments its nixl_agent."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self._loader = loader

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._loader.exec_module(module)
        try:
            from . import nixl

            nixl.enable(getattr(module, "nixl_agent"))
        except Exception as e:  # the program goes on uninstrumented
            _log.warning("xtel.instrument: instrumenting %s failed (%s: %s)", module.__name__,
                         type(e).__name__, e)


class _NixlFinder(importlib.abc.MetaPathFinder):
    """Finds NIXL's API modules as the other finders would, with the loader above."""

    def find_spec(self, fullname: str, path: Optional[Sequence[str]],
                  target: Any = None) -> Any:
        if fullname not in _NIXL_API_MODULES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _PatchAfterExec(spec.loader)
        return spec


def apply(value: Optional[str] = None) -> None:
    """Instruments what `value` (XTEL_INSTRUMENT's, comma-separated) names."""
    value = os.environ.get("XTEL_INSTRUMENT", "") if value is None else value
    names = [n.strip() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in KNOWN]
    if unknown:
        _log.warning("xtel.instrument: XTEL_INSTRUMENT='%s' names %s, which this package does "
                     "not instrument (it knows: %s); ignored", value, ", ".join(unknown),
                     ", ".join(KNOWN))
    if "nixl" in names:
        loaded = [sys.modules[m] for m in _NIXL_API_MODULES if m in sys.modules]
        if loaded:
            from . import nixl

            for module in loaded:
                nixl.enable(getattr(module, "nixl_agent"))
        else:
            sys.meta_path.insert(0, _NixlFinder())


try:
    apply()
except Exception as _e:  # never the program's start
    _log.warning("xtel.instrument: XTEL_INSTRUMENT could not be applied (%s: %s)",
                 type(_e).__name__, _e)
