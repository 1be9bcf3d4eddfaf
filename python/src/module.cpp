// xtel._xtel, the extension module under the package xtel (python/xtel/__init__.py re-exports
// it): the version, the exceptions, and the bindings of bindings.hpp.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <Python.h>

#include <exception>
#include <string>

#include "bindings.hpp"
#include "xtel/core/error.hpp"
#include "xtel/core/version.hpp"
#include "xtel/metrics/snapshot_codec.hpp"

namespace xtel::python {

namespace {

/// The exception types, made once by the module (owned by it as attributes).
struct exception_types {
    PyObject* error = nullptr;
    PyObject* config = nullptr;
    PyObject* exporter = nullptr;
    PyObject* format = nullptr;
};
exception_types types;

/// A new exception type `name` deriving from `bases`, set on the module. Named as the module's
/// own, which nanobind's stubgen writes into the stub; the package names it xtel's
/// (python/xtel/__init__.py).
PyObject* add_exception(nb::module_& m, const char* name, const char* doc, nb::tuple bases) {
    const std::string qualified = std::string("_xtel.") + name;
    PyObject* t = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases.ptr(), nullptr);
    if (t == nullptr) {
        throw nb::python_error();
    }
    m.attr(name) = nb::handle(t);
    return t;
}

void add_exceptions(nb::module_& m) {
    const nb::handle base(PyExc_Exception), value(PyExc_ValueError), os(PyExc_OSError);
    types.error =
        add_exception(m, "Error", "Base of every exception xtel raises.", nb::make_tuple(base));
    types.config = add_exception(
        m, "ConfigError",
        "A malformed NIXL_TELEMETRY_* value: the message names the variable, quotes the value\n"
        "and says what is accepted (the C++ config_error's message).",
        nb::make_tuple(nb::handle(types.error), value));
    types.exporter = add_exception(m, "ExporterError",
                                   "An exporter could not be set up: a file, a port, a plugin.",
                                   nb::make_tuple(nb::handle(types.error), os));
    types.format = add_exception(
        m, "FormatError",
        "A file that is not one this build can read (a flight recorder, a node file), or one\n"
        "damaged while it was read; the message names the file and says why.",
        nb::make_tuple(nb::handle(types.error), value));
    nb::register_exception_translator([](const std::exception_ptr& p, void*) {
        try {
            std::rethrow_exception(p);
        } catch (const config_error& e) {
            PyErr_SetString(types.config, e.what());
        } catch (const exporter_error& e) {
            PyErr_SetString(types.exporter, e.what());
        } catch (const format_error& e) {
            PyErr_SetString(types.format, e.what());
        } catch (const metrics::snapshot_decode_error& e) {
            PyErr_SetString(types.format, e.what());
        } catch (const error& e) {
            PyErr_SetString(types.error, e.what());
        }
    });
}

}  // namespace

}  // namespace xtel::python

NB_MODULE(_xtel, m) {
    namespace py = xtel::python;
    m.doc() = "xtel's C++ core: telemetry pipelines, their record calls, and the readers.";
    m.attr("__version__") = std::string(xtel::version());
    m.def(
        "version", [] { return std::string(xtel::version()); },
        "The version of xtel's C++ core, as its programs print it for --version.");
    py::add_exceptions(m);
    py::bind_telemetry(m);
    py::bind_readers(m);
}
