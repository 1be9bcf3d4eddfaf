#pragma once
// The pieces of the extension module xtel._xtel, each binding one part of the public API
// (module.cpp puts them together). A user of the library: public headers only, as the tools.

#include <nanobind/nanobind.h>

namespace xtel::python {

namespace nb = nanobind;

/// xtel.Telemetry: a pipeline of make_telemetry and its record calls (telemetry.cpp).
void bind_telemetry(nb::module_& m);

/// xtel.read_flight_recorder and xtel.read_node_file, and what they return (readers.cpp).
void bind_readers(nb::module_& m);

}  // namespace xtel::python
