// xtel.Telemetry: a pipeline of make_telemetry (xtel/registry/runtime_telemetry.hpp) as Python
// sees it. The record calls hold the GIL: what they call is noexcept, takes no lock and
// allocates nothing (a record into this thread's staging ring, tens of nanoseconds), so
// releasing and taking the GIL again would cost more than the record and let nothing run in
// between. flush() and close() release it: they wait for the flusher, which writes files.
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "bindings.hpp"
#include "peer_attributes.hpp"
#include "transfer_args.hpp"
#include "transfer_table.hpp"
#include "xtel/core/ascii.hpp"
#include "xtel/core/clock.hpp"
#include "xtel/core/config.hpp"
#include "xtel/core/names.hpp"
#include "xtel/registry/runtime_telemetry.hpp"

namespace xtel::python {

namespace {

/// What Python's default exporter is when NIXL_TELEMETRY_EXPORTER is unset: the node file, which
/// xtel-exporter serves for every process of the node (an engine's ranks are processes).
constexpr std::string_view python_default_exporter = "node";

/// Variables the caller gives in place of the environment's: a value, or none for unset.
using variables = std::map<std::string, std::optional<std::string>, std::less<>>;

/// The environment, with NIXL_TELEMETRY_EXPORTER replaced by `exporter` when given and by
/// Python's default when neither is set, NIXL_TELEMETRY_ENABLE by `enable` when given (an
/// instrumentation that records whatever NIXL's own switch says: xtel.instrument.nixl), and
/// any variable `given` names by its value there (a variable of NIXL's own the pipeline must
/// not take, such as NIXL_TELEMETRY_DIR beside NIXL's BUFFER exporter).
config config_of(const std::optional<std::string>& exporter,
                 std::optional<bool> enable,
                 const variables& given) {
    return config::from_env([&](std::string_view name) -> std::optional<std::string> {
        if (const auto it = given.find(name); it != given.end()) {
            return it->second;
        }
        if (name == env::enable && enable) {
            return std::string(*enable ? "y" : "n");
        }
        if (name == env::exporter) {
            if (exporter) {
                return exporter;
            }
            if (auto v = process_env(name)) {
                return v;
            }
            return std::string(python_default_exporter);
        }
        return process_env(name);
    });
}

/// A pointer to the string an optional holds, or null: what request_of takes.
const std::string_view* given(const std::optional<std::string_view>& s) noexcept {
    return s ? &*s : nullptr;
}

class py_telemetry {
  public:
    py_telemetry(std::string name,
                 const std::optional<std::string>& exporter,
                 std::optional<bool> enable,
                 const std::optional<variables>& given)
        : telemetry_(make_telemetry(std::move(name),
                                    config_of(exporter, enable, given.value_or(variables{})))),
          attributes_(telemetry_->labels()) {}

    void record_transfer(std::string_view op,
                         std::string_view peer,
                         std::uint64_t bytes,
                         std::string_view status,
                         std::optional<std::uint64_t> post_us,
                         std::optional<std::uint64_t> xfer_us,
                         std::uint64_t descriptors,
                         std::optional<std::string_view> request_id,
                         std::optional<std::string_view> traceparent,
                         std::optional<std::string_view> backend) {
        runtime_telemetry& t = open();
        const transfer_op o = op_of(op);
        const ending end = ending_of(status);
        const std::string_view id = request_of(given(request_id), given(traceparent));
        record(t, attributes_.of(peer, o, backend.value_or(std::string_view{})), end, bytes,
               post_us, xfer_us, descriptors, id);
    }

    // ---- xtel.instrument.nixl's bookkeeping of an agent's transfers (transfer_table.hpp) ----

    void track_dlist(std::uint64_t handle,
                     std::string peer,
                     std::optional<std::vector<std::uint64_t>> lengths) {
        tracked_.add_dlist(handle, {std::move(peer), std::move(lengths)});
    }
    void forget_dlist(std::uint64_t handle) { tracked_.forget_dlist(handle); }
    /// The agent a prepped list names; None for this one, or a list not known.
    std::optional<std::string> dlist_peer(std::uint64_t handle) const {
        const tracked_dlist* d = tracked_.dlist(handle);
        return d == nullptr || d->peer.empty() ? std::nullopt : std::optional(d->peer);
    }

    /// make_prepped_xfer made `handle`: `op` from the prepped lists `local` and `remote`,
    /// their descriptors at `indices` (remote_agent and bytes as those lists tell).
    void track_made(std::uint64_t handle,
                    std::string_view op,
                    std::uint64_t local,
                    std::uint64_t remote,
                    nb::handle indices,
                    nb::handle notif) {
        const tracked_dlist* l = tracked_.dlist(local);
        const tracked_dlist* r = tracked_.dlist(remote);
        std::uint64_t descriptors = 0;
        std::uint64_t bytes = 0;
        if (l != nullptr && l->lengths) {
            bytes = bytes_at(*l->lengths, indices, descriptors);
        } else {
            descriptors = static_cast<std::uint64_t>(nb::len(indices));
        }
        const std::string_view peer = r != nullptr && !r->peer.empty() ? r->peer : "unknown";
        track_made_as(handle, op, peer, bytes, descriptors, notif);
    }

    /// initialize_xfer made `handle`, whose peer and bytes the wrapper read.
    void track_made_as(std::uint64_t handle,
                       std::string_view op,
                       std::string_view peer,
                       std::uint64_t bytes,
                       std::uint64_t descriptors,
                       nb::handle notif) {
        open();  // attributes_ are the open pipeline's
        const transfer_attributes attrs = attributes_.of(peer, op_ignoring_case(op), {});
        tracked_transfer& t = tracked_.add(handle);
        t.attrs = attrs;
        t.bytes = bytes;
        t.descriptors = descriptors;
        set_request_of(t.id, notif);
    }

    /// transfer(`handle`) was called at `started_ns` (perf_counter_ns) and returned now: the
    /// post timed, the request taken from `traceparent` (the caller's span) or else from
    /// `notif` when it gives one; recorded now when `ended` says how it already ended. False
    /// for a handle the table does not know.
    bool track_posted(std::uint64_t handle,
                      std::uint64_t started_ns,
                      nb::handle notif,
                      std::optional<std::string_view> traceparent,
                      std::optional<std::string_view> ended) {
        tracked_transfer* t = tracked_.find(handle);
        if (t == nullptr) {
            return false;
        }
        const std::uint64_t now = clock::monotonic_ns();
        t->started_ns = started_ns;
        t->post_us = now > started_ns ? (now - started_ns) / 1000 : 0;
        if (traceparent) {
            t->id.set(*traceparent, true);
        } else if (!notif.is_none()) {
            kept_id given;
            set_request_of(given, notif);
            if (!given.empty()) {
                t->id = given;
            }
        }
        t->pending = true;
        if (ended) {
            record_tracked(*t, ending_of(*ended), now, {});
        }
        return true;
    }

    /// Whether `handle` was posted and waits to be recorded.
    bool track_pending(std::uint64_t handle) noexcept {
        const tracked_transfer* t = tracked_.find(handle);
        return t != nullptr && t->pending;
    }

    /// `handle` ended with `status` (a poll said DONE or ERR): recorded if it was pending, with
    /// NIXL's own figures (get_xfer_telemetry) in place of the table's where given.
    void track_ended(std::uint64_t handle,
                     std::string_view status,
                     std::optional<std::uint64_t> post_us,
                     std::optional<std::uint64_t> xfer_us,
                     std::optional<std::uint64_t> bytes,
                     std::optional<std::uint64_t> descriptors) {
        tracked_transfer* t = tracked_.find(handle);
        if (t == nullptr || !t->pending) {
            return;
        }
        if (bytes && *bytes != 0) {
            t->bytes = *bytes;
            t->descriptors = descriptors.value_or(t->descriptors);
        }
        record_tracked(*t, ending_of(status), clock::monotonic_ns(), {post_us, xfer_us});
    }

    void track_released(std::uint64_t handle) noexcept { tracked_.release(handle); }

    void record_notified(std::string_view op,
                         std::string_view peer,
                         std::uint64_t bytes,
                         std::optional<std::string_view> request_id,
                         std::optional<std::string_view> traceparent,
                         std::optional<std::string_view> backend) {
        runtime_telemetry& t = open();
        const transfer_op o = op_of(op);
        const std::string_view id = request_of(given(request_id), given(traceparent));
        const transfer_attributes attrs =
            attributes_.of(peer, o, backend.value_or(std::string_view{}));
        t.record_notified(clock::now_us(), bytes, attrs, id);
    }

    /// Each notification of `notifs`, a poll's answer ({sender: [message, ...]}, NIXL's
    /// get_new_notifs), or each (sender, message) pair of a list, recorded as a transfer the
    /// sender made `op` this agent's memory, its request the message: what the target's side
    /// of xtel.instrument.nixl records, in one call a poll.
    void notified(std::string_view op, nb::handle notifs) {
        runtime_telemetry& t = open();
        const transfer_op o = op_of(op);
        const auto one = [&](nb::handle sender, nb::handle message) {
            const std::string peer = text_of(sender);
            kept_id id;
            set_request_of(id, message);
            const std::string_view kept = id.view();
            t.record_notified(clock::now_us(), 0, attributes_.of(peer, o, {}),
                              request_of(kept.empty() ? nullptr : &kept, nullptr));
        };
        if (PyDict_Check(notifs.ptr())) {
            for (const auto& [sender, messages] : nb::borrow<nb::dict>(notifs)) {
                for (nb::handle m : messages) {
                    one(sender, m);
                }
            }
            return;
        }
        for (nb::handle pair : notifs) {
            one(pair[0], pair[1]);
        }
    }

    void event(std::string_view cat,
               std::string_view name,
               std::uint64_t value,
               std::string_view kind) {
        runtime_telemetry& t = open();
        t.record(category_of(cat), event_name(name), value, kind_of(kind));
    }

    /// Called with the GIL held; releases it while the flusher works. The pipeline is held by
    /// a copy of its pointer meanwhile, so that a close() from another thread then (which the
    /// released GIL lets in) leaves it alive until this flush is done.
    void flush() {
        const std::shared_ptr<runtime_telemetry> t = telemetry_;
        if (t) {
            nb::gil_scoped_release release;
            t->flush();
        }
    }

    /// Stops the pipeline: its last flush, its files closed; again: nothing. The pointer is
    /// taken with the GIL held, so that no record call finds a pipeline half destroyed, and the
    /// pipeline destroyed with the GIL released (or by the flush() still using it, when it ends).
    void close() {
        std::shared_ptr<runtime_telemetry> t = std::move(telemetry_);
        nb::gil_scoped_release release;
        t.reset();
    }

    bool closed() const noexcept { return telemetry_ == nullptr; }
    bool enabled() const noexcept { return telemetry_ && telemetry_->enabled(); }
    std::string name() const { return telemetry_ ? telemetry_->name() : std::string(); }
    telemetry_stats stats() const { return telemetry_ ? telemetry_->stats() : telemetry_stats{}; }

  private:
    /// NIXL's own post and transfer times of a transfer, when it captured them.
    struct nixl_times {
        std::optional<std::uint64_t> post_us, xfer_us;
    };

    static transfer_op op_ignoring_case(std::string_view op) {
        if (ascii::equals_ignoring_case(op, "read")) {
            return transfer_op::read;
        }
        return ascii::equals_ignoring_case(op, "write") ? transfer_op::write : op_of(op);
    }

    /// A tracked transfer, ended now (`now_ns`) with `end`, recorded once.
    void record_tracked(tracked_transfer& t,
                        const ending& end,
                        std::uint64_t now_ns,
                        const nixl_times& nixl) {
        t.pending = false;
        runtime_telemetry& r = open();
        const std::string_view kept = t.id.view();
        const std::string_view id = t.id.traceparent() ? request_of(nullptr, &kept)
                                    : kept.empty()     ? std::string_view{}
                                                       : request_of(&kept, nullptr);
        const bool posted = t.started_ns != 0;
        std::optional<std::uint64_t> post_us = nixl.post_us, xfer_us = nixl.xfer_us;
        if (!post_us && posted) {
            post_us = t.post_us;
        }
        if (!xfer_us && posted) {
            xfer_us = now_ns > t.started_ns ? (now_ns - t.started_ns) / 1000 : 0;
        }
        record(r, t.attrs, end, t.bytes, post_us, xfer_us, t.descriptors, id);
    }

    /// One transfer into `t`, as the C++ agent records one: its record and, for a failure, one
    /// ERROR event of its kind.
    static void record(runtime_telemetry& t,
                       transfer_attributes attrs,
                       const ending& end,
                       std::uint64_t bytes,
                       std::optional<std::uint64_t> post_us,
                       std::optional<std::uint64_t> xfer_us,
                       std::uint64_t descriptors,
                       std::string_view id) {
        attrs.status = end.status;
        const direction dir = attrs.op == transfer_op::read ? direction::rx : direction::tx;
        const transfer_shape shape{descriptors_of(descriptors), 0};
        const std::uint64_t now = clock::now_us();
        if (xfer_us || post_us) {
            t.record_transfer(dir, now, bytes, 1, post_us.value_or(0), xfer_us.value_or(0), attrs,
                              id, shape);
        } else {
            t.record_transfer_counts(dir, now, bytes, 1, attrs, id, shape);
        }
        if (end.code != status_code::ok) {
            // As the agent records a failed transfer: its record, and one ERROR event.
            t.add(category::error, names::agent_error(end.code), 1);
        }
    }

    runtime_telemetry& open() {
        if (!telemetry_) {
            throw nb::value_error("the Telemetry is closed: it records nothing after close()");
        }
        return *telemetry_;
    }

    // Shared with a flush() in progress only (above). Record calls use it with the GIL held.
    std::shared_ptr<runtime_telemetry> telemetry_;
    peer_attributes attributes_;
    transfer_table tracked_;
};

constexpr const char* telemetry_doc =
    "A telemetry pipeline for an engine with its own transport, configured as xtel's C++\n"
    "make_telemetry is: by the NIXL_TELEMETRY_* variables (docs/configuration.md). Telemetry is\n"
    "on only when NIXL_TELEMETRY_ENABLE says so. When NIXL_TELEMETRY_EXPORTER is unset, Python's\n"
    "default exporter is 'node' (the node file xtel-exporter serves), not the C++ default\n"
    "'buffer'; `exporter` given replaces the variable, `enable` given (True or False)\n"
    "replaces NIXL_TELEMETRY_ENABLE, and `variables` ({name: value, or None for unset})\n"
    "replaces the variables it names (`exporter` and `enable` give way to it).\n\n"
    "A context manager: leaving the block closes it (a last flush; its files closed).\n"
    "Raises ConfigError for a malformed variable or exporter set (the message names the\n"
    "variable, the value and what is accepted), ExporterError for a file or port an exporter\n"
    "cannot have.";

constexpr const char* record_transfer_doc =
    "Records one transfer this process initiated: `op` 'write' (bytes sent) or 'read' (bytes\n"
    "brought in), to or from the agent `peer` (the remote_agent label), `bytes` long.\n\n"
    "status: 'ok', or how it failed: an error kind (invalid_argument, not_found, busy,\n"
    "not_supported, bad_metadata, remote_disconnected, timed_out, backend_error) or 'error'\n"
    "(no known kind). A failure is recorded as the C++ agent records one: under its kind in\n"
    "the transfer families' status label, one count of xtel_errors_total{kind}, and no bytes\n"
    "in the NIXL set's byte counters.\n"
    "post_us, xfer_us: the post call's time and post to completion, in microseconds; with\n"
    "neither the transfer is counted (bytes, requests) but not timed.\n"
    "descriptors: how many descriptors it moved (its span says so).\n"
    "request_id or traceparent (W3C, '00-<trace>-<span>-<flags>'), not both: the request the\n"
    "transfer serves, which its span (failed, slow or sampled) and latency exemplars carry.\n"
    "backend: the backend label (NIXL's UCX, ...); 'unknown' when not given.\n\n"
    "Holds the GIL for the record itself (noexcept, no lock, no allocation in C++; the peer's\n"
    "label is cached per (peer, op, backend)). Raises ValueError for an argument none of\n"
    "those accepted, and after close().";

constexpr const char* record_notified_doc =
    "Records a transfer another agent (`peer`, its initiator) made into ('write') or from\n"
    "('read') this process's memory, as the notification the target polls tells it: counted in\n"
    "xtel_notified_transfers_total and xtel_notified_bytes_total, never in this process's own\n"
    "transfer families, and the target's span of the initiator's trace when `traceparent`\n"
    "(or `request_id`) carries it.";

constexpr const char* private_doc =
    "xtel.instrument.nixl's bookkeeping of a NIXL agent's transfers (python/src/"
    "transfer_table.hpp): not part of the API.";

}  // namespace

void bind_telemetry(nb::module_& m) {
    nb::class_<telemetry_stats>(m, "Stats", "What a pipeline has done so far.")
        .def_ro("events_exported", &telemetry_stats::events_exported,
                "Events handed to the exporters.")
        .def_ro("records_dropped", &telemetry_stats::records_dropped,
                "Records lost to full staging rings.")
        .def_ro("export_errors", &telemetry_stats::export_errors, "Exporter calls that threw.")
        .def_ro("exporters_disabled", &telemetry_stats::exporters_disabled,
                "Exporters that turned themselves off.")
        .def_ro("events_lost", &telemetry_stats::events_lost,
                "Events the exporters were handed and could not write.");

    nb::class_<py_telemetry>(m, "Telemetry", telemetry_doc)
        .def(nb::init<std::string, const std::optional<std::string>&, std::optional<bool>,
                      const std::optional<variables>&>(),
             nb::arg("name"), nb::kw_only(), nb::arg("exporter") = nb::none(),
             nb::arg("enable") = nb::none(), nb::arg("variables") = nb::none())
        .def("record_transfer", &py_telemetry::record_transfer, nb::arg("op"), nb::arg("peer"),
             nb::arg("bytes"), nb::kw_only(), nb::arg("status") = "ok",
             nb::arg("post_us") = nb::none(), nb::arg("xfer_us") = nb::none(),
             nb::arg("descriptors") = 1, nb::arg("request_id") = nb::none(),
             nb::arg("traceparent") = nb::none(), nb::arg("backend") = nb::none(),
             record_transfer_doc)
        .def("record_notified", &py_telemetry::record_notified, nb::arg("op"), nb::arg("peer"),
             nb::arg("bytes"), nb::kw_only(), nb::arg("request_id") = nb::none(),
             nb::arg("traceparent") = nb::none(), nb::arg("backend") = nb::none(),
             record_notified_doc)
        .def("_notified", &py_telemetry::notified, nb::arg("op"), nb::arg("notifs"), private_doc)
        .def("_track_dlist", &py_telemetry::track_dlist, nb::arg("handle"), nb::arg("peer"),
             nb::arg("lengths").none(), private_doc)
        .def("_forget_dlist", &py_telemetry::forget_dlist, nb::arg("handle"), private_doc)
        .def("_dlist_peer", &py_telemetry::dlist_peer, nb::arg("handle"), private_doc)
        .def("_track_made", &py_telemetry::track_made, nb::arg("handle"), nb::arg("op"),
             nb::arg("local"), nb::arg("remote"), nb::arg("indices"), nb::arg("notif").none(),
             private_doc)
        .def("_track_made_as", &py_telemetry::track_made_as, nb::arg("handle"), nb::arg("op"),
             nb::arg("peer"), nb::arg("bytes"), nb::arg("descriptors"), nb::arg("notif").none(),
             private_doc)
        .def("_track_posted", &py_telemetry::track_posted, nb::arg("handle"), nb::arg("started_ns"),
             nb::arg("notif").none(), nb::arg("traceparent").none(), nb::arg("ended").none(),
             private_doc)
        .def("_track_pending", &py_telemetry::track_pending, nb::arg("handle"), private_doc)
        .def("_track_ended", &py_telemetry::track_ended, nb::arg("handle"), nb::arg("status"),
             nb::arg("post_us").none() = nb::none(), nb::arg("xfer_us").none() = nb::none(),
             nb::arg("bytes").none() = nb::none(), nb::arg("descriptors").none() = nb::none(),
             private_doc)
        .def("_track_released", &py_telemetry::track_released, nb::arg("handle"), private_doc)
        .def(
            "event", &py_telemetry::event, nb::arg("category"), nb::arg("name"), nb::arg("value"),
            nb::arg("kind") = "sample",
            "Records one event stamped now: `category` (transfer, memory, ..., custom; any case),\n"
            "`name` (at most 37 bytes kept), `value`, and how the value is meant: 'sample' (a\n"
            "measurement), 'counter' (an increment) or 'gauge' (the current level).")
        .def(
            "flush", &py_telemetry::flush,
            "Hands everything recorded so far to the exporters now (their files written), instead\n"
            "of at the next interval. Releases the GIL while it waits.")
        .def(
            "close", &py_telemetry::close,
            "Stops the pipeline: a last flush, its files closed. Releases the GIL while it waits;\n"
            "closing again does nothing.")
        .def("stats", &py_telemetry::stats, "What the pipeline has done so far.")
        .def_prop_ro("enabled", &py_telemetry::enabled,
                     "False for telemetry off (and once closed): its record calls do nothing.")
        .def_prop_ro("closed", &py_telemetry::closed, "True once close() was called.")
        .def_prop_ro("name", &py_telemetry::name,
                     "The name it records for: its files' names and the agent_name label.")
        .def(
            "__enter__", [](py_telemetry& self) -> py_telemetry& { return self; },
            nb::rv_policy::reference)
        .def(
            "__exit__",
            [](py_telemetry& self, nb::handle, nb::handle, nb::handle) { self.close(); },
            nb::arg("exc_type").none(), nb::arg("exc").none(), nb::arg("traceback").none());
}

}  // namespace xtel::python
