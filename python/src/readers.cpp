// The readers: a flight recorder's events and a node file's metrics, through the library's own
// readers (xtel/exporters/flight_recorder.hpp, xtel/node/file.hpp with the snapshot codec), as
// plain Python objects. Each call opens, copies what is there now, and closes.
#include <nanobind/nanobind.h>
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <Python.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "xtel/core/error.hpp"
#include "xtel/exporters/flight_recorder.hpp"
#include "xtel/metrics/snapshot_codec.hpp"
#include "xtel/node/file.hpp"

namespace xtel::python {

namespace {

struct py_event {
    std::uint64_t timestamp_us = 0;
    std::string category;
    nb::str name;
    std::uint64_t value = 0;
    std::string kind;
};

struct py_recording {
    std::string agent_name;
    std::uint32_t writer_pid = 0;
    std::uint64_t capacity = 0;
    std::uint64_t written = 0;
    std::uint64_t missed = 0;
    bool closed = false;
    std::vector<py_event> events;
};

struct py_series {
    std::map<std::string, std::string> labels;
    std::uint64_t value = 0;
    std::vector<std::uint64_t> buckets;
    std::uint64_t sum = 0;
    std::uint64_t count = 0;
};

struct py_family {
    std::string name, help, type, unit;
    std::vector<std::string> label_names;
    int decimals = 0;
    std::vector<double> bounds;
    std::vector<py_series> series;
};

struct py_node_file {
    std::string agent_name;
    std::uint32_t writer_pid = 0;
    std::uint64_t published = 0;
    std::map<std::string, std::string> labels;
    std::vector<py_family> families;
};

constexpr std::string_view kind_name(value_kind k) noexcept {
    switch (k) {
        case value_kind::counter:
            return "counter";
        case value_kind::gauge:
            return "gauge";
        case value_kind::sample:
            break;
    }
    return "sample";
}

/// An event name's bytes as text; a byte that is not UTF-8 as \xNN, as the readers print it.
nb::str name_of(const event& e) {
    const std::string_view n = e.name_view();
    return nb::steal<nb::str>(
        PyUnicode_DecodeUTF8(n.data(), static_cast<Py_ssize_t>(n.size()), "backslashreplace"));
}

py_recording read_flight_recorder(const std::filesystem::path& path) {
    flight_recorder::reader r(path);
    py_recording out;
    (void)r.poll([&](const event& e) {
        out.events.push_back({e.timestamp_us, std::string(to_string(e.cat)), name_of(e), e.value,
                              std::string(kind_name(e.kind))});
    });
    out.agent_name = r.agent_name();
    out.writer_pid = r.writer_pid();
    out.capacity = r.capacity();
    out.written = r.position();
    out.missed = r.missed();
    out.closed = r.writer_closed();
    return out;
}

py_family family_of(const metrics::family_snapshot& f) {
    py_family out{f.spec.name,
                  f.spec.help,
                  std::string(to_string(f.spec.type)),
                  f.spec.unit,
                  f.spec.label_names,
                  f.spec.decimals,
                  f.spec.bounds,
                  {}};
    for (const metrics::series& s : f.series) {
        py_series p{{}, s.value, s.buckets, s.sum, s.count};
        for (std::size_t i = 0; i < s.label_values.size() && i < f.spec.label_names.size(); ++i) {
            p.labels.emplace(f.spec.label_names[i], s.label_values[i]);
        }
        out.series.push_back(std::move(p));
    }
    return out;
}

py_node_file read_node_file(const std::filesystem::path& path) {
    node::file::reader r(path);
    const auto pub = r.read_latest();
    if (!pub) {
        throw format_error(file_fault::unreadable,
                           path.string() +
                               ": its writer published again during each of 64 "
                               "reads; read it again");
    }
    py_node_file out{r.agent_name(), r.writer_pid(), pub->number, {}, {}};
    if (pub->number == 0) {
        return out;
    }
    const metrics::snapshot s = metrics::decode_snapshot(pub->payload);
    for (const metrics::label& l : s.labels) {
        out.labels.emplace(l.name, l.value);
    }
    for (const metrics::family_snapshot& f : s.families) {
        out.families.push_back(family_of(f));
    }
    return out;
}

void bind_records(nb::module_& m) {
    nb::class_<py_event>(m, "Event", "One event of a flight recorder.")
        .def_ro("timestamp_us", &py_event::timestamp_us, "Microseconds since the Unix epoch.")
        .def_ro("category", &py_event::category, "Upper case, as NIXL prints it: 'TRANSFER', ...")
        .def_ro("name", &py_event::name, "Its name; a byte that is not UTF-8 as \\xNN.")
        .def_ro("value", &py_event::value, "Its value.")
        .def_ro("kind", &py_event::kind, "'counter', 'gauge' or 'sample'.");
    nb::class_<py_recording>(m, "FlightRecording", "What a flight recorder file held when read.")
        .def_ro("agent_name", &py_recording::agent_name, "The writer's agent name.")
        .def_ro("writer_pid", &py_recording::writer_pid, "The writer's process id.")
        .def_ro("capacity", &py_recording::capacity, "Slots of its ring.")
        .def_ro("written", &py_recording::written, "Events the writer had published.")
        .def_ro("missed", &py_recording::missed, "Events overwritten before they were read.")
        .def_ro("closed", &py_recording::closed, "Whether the writer had closed the file.")
        .def_ro("events", &py_recording::events, "The events still in the ring, oldest first.");
}

void bind_metrics(nb::module_& m) {
    nb::class_<py_series>(m, "Series", "One series of a family, as the store keeps it.")
        .def_ro("labels", &py_series::labels, "Its labels, by the family's label names.")
        .def_ro("value", &py_series::value,
                "A counter's or gauge's value in units of 10**-decimals (the family's).")
        .def_ro("buckets", &py_series::buckets,
                "A histogram's observations per bound, NOT cumulative (+Inf: count).")
        .def_ro("sum", &py_series::sum, "A histogram's sum, in units of 10**-decimals.")
        .def_ro("count", &py_series::count, "A histogram's observations.");
    nb::class_<py_family>(m, "Family", "One metric family of a node file.")
        .def_ro("name", &py_family::name, "Its name, as /metrics shows it.")
        .def_ro("help", &py_family::help, "Its HELP text.")
        .def_ro("type", &py_family::type, "'counter', 'gauge', 'histogram' or 'summary'.")
        .def_ro("unit", &py_family::unit, "Its unit ('bytes', 'seconds'), or ''.")
        .def_ro("label_names", &py_family::label_names, "Its own label names.")
        .def_ro("decimals", &py_family::decimals, "Values are kept in units of 10**-decimals.")
        .def_ro("bounds", &py_family::bounds, "A histogram's bucket bounds (kept units).")
        .def_ro("series", &py_family::series, "Its series, in the order they were made.");
    nb::class_<py_node_file>(m, "NodeFile", "The latest snapshot a node file held when read.")
        .def_ro("agent_name", &py_node_file::agent_name, "The writer's agent name.")
        .def_ro("writer_pid", &py_node_file::writer_pid, "The writer's process id.")
        .def_ro("published", &py_node_file::published,
                "Which publication this is (1 the first; 0: none yet, no families).")
        .def_ro("labels", &py_node_file::labels, "Labels every series carries (agent_name).")
        .def_ro("families", &py_node_file::families, "Its families, sorted by name.");
}

}  // namespace

void bind_readers(nb::module_& m) {
    bind_records(m);
    bind_metrics(m);
    m.def("read_flight_recorder", &read_flight_recorder, nb::arg("path"),
          "The events a flight recorder (the buffer exporter's file) holds now, read by xtel's\n"
          "C++ reader: never a torn event (one the writer overwrote while it was read counts as\n"
          "missed). Raises FormatError for a file that is not one.");
    m.def("read_node_file", &read_node_file, nb::arg("path"),
          "The latest metrics a node file (the node exporter's <name>.metrics) holds, decoded by\n"
          "xtel's C++ decoder, the one xtel-exporter serves them with. Raises FormatError for a\n"
          "file that is not one or a payload that does not decode.");
}

}  // namespace xtel::python
