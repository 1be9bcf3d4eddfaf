"""Instrumentation of the libraries engines move data with, without a change to the engine.

:mod:`xtel.instrument.nixl` records every transfer a Python program makes through NIXL's
``nixl_agent``. It is turned on by ``XTEL_INSTRUMENT=nixl`` in the environment (the package's
``.pth`` hook applies it when NIXL is imported) or by ``xtel.instrument.nixl.enable()``.
"""

#: The libraries XTEL_INSTRUMENT may name.
KNOWN = ("nixl",)
