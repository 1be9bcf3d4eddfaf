"""xtel: telemetry for data-transfer engines, from Python (docs/python.md).

A pipeline configured by the NIXL_TELEMETRY_* variables (:class:`Telemetry`), its record calls
(transfers, notified transfers, events), and the readers of xtel's files
(:func:`read_flight_recorder`, :func:`read_node_file`), all xtel's C++ core bound with
nanobind. The wheel also carries xtel-exporter and xtel (``xtel top``, ``xtel nixl install``)
as programs, and xtel's NIXL plug-in (:func:`nixl_plugin_path`).
"""

import os as _os

from ._xtel import (
    ConfigError,
    Error,
    Event,
    ExporterError,
    Family,
    FlightRecording,
    FormatError,
    NodeFile,
    Series,
    Stats,
    Telemetry,
    read_flight_recorder,
    read_node_file,
    version,
)

#: The version of xtel's C++ core (include/xtel/core/version.hpp), as `xtel --version` prints it.
__version__: str = version()

# The module's types are the package's: tracebacks and reprs say xtel.ConfigError.
for _t in (ConfigError, Error, Event, ExporterError, Family, FlightRecording, FormatError,
           NodeFile, Series, Stats, Telemetry):
    _t.__module__ = __name__
del _t

__all__ = [
    "ConfigError",
    "Error",
    "Event",
    "ExporterError",
    "Family",
    "FlightRecording",
    "FormatError",
    "NodeFile",
    "Series",
    "Stats",
    "Telemetry",
    "__version__",
    "nixl_plugin_path",
    "read_flight_recorder",
    "read_node_file",
    "version",
]


def nixl_plugin_path() -> str:
    """The path of xtel's NIXL plug-in (libtelemetry_exporter_xtel.so) inside this package:
    what ``xtel nixl install`` links into NIXL's plug-in directory."""
    return _os.path.join(_os.path.dirname(__file__), "libtelemetry_exporter_xtel.so")
