#!/usr/bin/env python3
"""Prints the events of an xtel flight recorder file as the NIXL documents show them.

The reader is the module xtel.telemetry_reader of the Python package (python/xtel/; installed,
``python -m xtel.telemetry_reader``). This script runs that module from a checkout, standard
library only and without the package installed, so that there is one copy of the reader: it
prints the same bytes as the C++ telemetry_reader for every file.
"""

import importlib.util
import os
import sys

_MODULE = os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..", "python", "xtel",
                       "telemetry_reader.py")


def _load():
    spec = importlib.util.spec_from_file_location("telemetry_reader", _MODULE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Loaded as a module (bench/python_reader_speed.py calls main), it is the reader's module.
_reader = _load()
main = _reader.main
run = _reader.run

if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
