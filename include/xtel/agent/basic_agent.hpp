#pragma once
/// The transfer agent for one telemetry pipeline: registers memory, exchanges metadata with
/// other agents, and moves data between them over UCX, recording the built-in events where
/// they happen. Its record calls are inline and non-virtual; `agent` (xtel/agent/agent.hpp) is the
/// run-time facade over it that make_agent hands out.
///
/// Include this header for typed access to a pipeline (`basic_agent<buffer_telemetry>` and
/// its `telemetry()`); a program that only makes agents needs xtel/agent/agent.hpp alone.

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "xtel/agent/agent.hpp"
#include "xtel/agent/device.hpp"
#include "xtel/agent/recorded_transfer.hpp"
#include "xtel/agent/ucx_backend.hpp"
#include "xtel/core/clock.hpp"
#include "xtel/core/config.hpp"
#include "xtel/core/names.hpp"
#include "xtel/core/status.hpp"
#include "xtel/core/telemetry.hpp"
#include "xtel/core/transfer.hpp"
#include "xtel/core/transfer_record.hpp"
#include "xtel/core/tsc_clock.hpp"
#include "xtel/exporters/pipelines.hpp"
#include "xtel/registry/pipeline_choice.hpp"

namespace xtel {

/// The agent for one telemetry pipeline. `basic_agent<telemetry<>>` records nothing and reads
/// no clock for telemetry; `basic_agent<buffer_telemetry>` and the other precompiled ones are
/// instantiated once in src/agent/pipelines.cpp.
template <class Telemetry>
class basic_agent final : public agent {
  public:
    /// Starts UCX and the pipeline; throws config_error for a bad name or configuration and
    /// agent_error when UCX does not start.
    basic_agent(std::string name, const config& cfg, agent_options opts = {})
        : name_(detail::checked_agent_name(std::move(name))),
          telemetry_(cfg, name_, opts.telemetry),
          started_(record_start()),
          backend_(name_, detail::backend_options{opts.transfer_timeout}, sink()),
          base_attrs_(base_attributes()),
          sample_every_(std::max<std::uint32_t>(cfg.timing_sample, 1)),
          countdown_(1),
          fresh_(sample_every_) {}

    /// Closes connections and deregisters what is left (recorded), then records agent_stop;
    /// the pipeline flushes everything on its way out.
    ~basic_agent() override {
        report_all_unreported();
        const std::uint64_t left = backend_.registered_bytes();
        backend_.shutdown();
        if constexpr (Telemetry::enabled) {
            if (left > 0) {
                deregistered_ += left;
                telemetry_.set(category::memory, names::agent_memory_registered, 0);
                telemetry_.set(category::memory, names::agent_memory_deregistered, deregistered_);
            }
        }
        telemetry_.record(category::system, names::agent_stop,
                          static_cast<std::uint64_t>(::getpid()), value_kind::sample);
    }

    basic_agent(const basic_agent&) = delete;
    basic_agent& operator=(const basic_agent&) = delete;

    const std::string& name() const noexcept override { return name_; }

    status register_memory(const descriptor& region) override {
        return note_memory(backend_.register_memory(region), 0);
    }

    status allocate_memory(std::uint64_t bytes, descriptor& out) override {
        return note_memory(backend_.allocate_memory(bytes, out), 0);
    }

    status deregister_memory(const descriptor& region) override {
        return note_memory(backend_.deregister_memory(region), region.length);
    }

    status export_metadata(std::vector<std::byte>& blob) const override {
        // const: an error here cannot be recorded, and none is expected but a format limit.
        return backend_.export_metadata(blob);
    }

    status load_remote_metadata(std::span<const std::byte> blob,
                                std::string& remote_name) override {
        return noted(backend_.load_remote_metadata(blob, remote_name));
    }

    status disconnect(std::string_view remote_agent) override {
        return noted(backend_.disconnect(remote_agent));
    }

    status remote_regions(std::string_view remote_agent,
                          std::vector<descriptor>& out) const override {
        return backend_.remote_regions(remote_agent, out);
    }

    status create_transfer(transfer_op op,
                           std::span<const descriptor> local,
                           std::span<const descriptor> remote,
                           std::string_view remote_agent,
                           transfer_handle& out,
                           const transfer_tags& tags = {}) override {
        transfer_attributes attrs;
        std::string_view request_id;
        if constexpr (Telemetry::takes_transfers) {
            attrs = detail::created_transfer_attributes(base_attrs_, telemetry_.labels(), op, local,
                                                        remote, remote_agent);
            request_id = tags.request_id;  // only exporters of transfer records show it
        }
        return noted(backend_.create_transfer(op, local, remote, remote_agent, attrs, request_id,
                                              out, tags));
    }

    status post(transfer_handle h) noexcept override {
        if constexpr (Telemetry::enabled) {
            if (--countdown_ == 0) [[unlikely]] {
                return post_timed(h);
            }
        }
        return post_counted(h);  // both returns are prvalues: the status is built in place
    }

    status poll(transfer_handle h) noexcept override {
        detail::transfer_outcome outcome;
        status st = backend_.poll(h, outcome);
        if constexpr (Telemetry::enabled) {
            // Failures and the rest of the flags reached note_outcome through the sink.
            note_flushes();
            if (outcome.state != nullptr && st.ok() && outcome.state->timed) {
                record_timed(*outcome.state, clock_.now(), h);
            }
        }
        return st;
    }

    status release(transfer_handle h) override {
        if constexpr (Telemetry::enabled) {
            if (detail::transfer_state* r = backend_.state(h); r != nullptr && r->unreported > 0) {
                if (!report_counts(*r, clock_.wall_us(clock_.now()))) [[unlikely]] {
                    telemetry_.flush();  // its ring full: drained, there is room
                    (void)report_counts(*r, clock_.wall_us(clock_.now()));
                }
            }
        }
        return noted(backend_.release(h));
    }

    unsigned progress() noexcept override {
        if constexpr (Telemetry::enabled) {
            note_flushes();
        }
        return backend_.progress();
    }

    status send_notification(std::string_view remote_agent, std::string_view message) override {
        return noted(backend_.send_notification(remote_agent, message));
    }

    status get_notifications(std::vector<notification>& out) override {
        return noted(backend_.get_notifications(out));
    }

    notification_counts notifications() const noexcept override { return backend_.notifications(); }

    /// The backend, for tests that send what no agent would (a malformed notification).
    detail::ucx_backend& backend() noexcept { return backend_; }

    /// Records the completions not yet recorded, then hands everything to the exporters.
    void flush_telemetry() override {
        report_all_unreported();
        telemetry_.flush();
    }
    telemetry_stats stats() const override { return telemetry_.stats(); }
    bool telemetry_enabled() const noexcept override { return Telemetry::enabled; }

    /// The pipeline, for what the facade does not cover (an exporter's own accessors).
    Telemetry& telemetry() noexcept { return telemetry_; }
    /// Agents loaded and usable now.
    std::size_t connections() const noexcept { return backend_.connections(); }

  private:
    /// Nothing to read (or calibrate) when telemetry is off.
    struct no_clock {
        std::uint64_t now() noexcept { return 0; }
        std::uint64_t micros(std::uint64_t, std::uint64_t) const noexcept { return 0; }
        std::uint64_t wall_us(std::uint64_t) noexcept { return 0; }
    };

    /// agent_start comes first, before the backend's own start-up events.
    bool record_start() noexcept {
        telemetry_.record(category::system, names::agent_start,
                          static_cast<std::uint64_t>(::getpid()), value_kind::sample);
        return true;
    }

    detail::event_sink sink() noexcept {
        if constexpr (Telemetry::enabled) {
            return {this, &basic_agent::record_from_backend, &basic_agent::outcome_from_backend,
                    Telemetry::takes_transfers ? &basic_agent::notified_from_backend : nullptr};
        } else {
            return {};
        }
    }

    static void outcome_from_backend(void* self,
                                     const detail::transfer_outcome& outcome,
                                     const status& st,
                                     transfer_handle h) noexcept {
        static_cast<basic_agent*>(self)->note_outcome(outcome, st, h);
    }

    static void notified_from_backend(void* self, const notification& n) noexcept {
        static_cast<basic_agent*>(self)->note_notified(n);
    }

    /// A transfer another agent made into (or from) this one's memory, from its notification:
    /// staged as a record of its own, marked notified, with the initiator as its remote agent
    /// and the initiator's trace as a request id (detail::notified_request_id), so that the
    /// target's span joins the initiator's trace. Off the per-transfer path: the target's
    /// progress, once per notification.
    void note_notified(const notification& n) noexcept {
        if constexpr (Telemetry::takes_transfers) {
            const transfer_attributes attrs =
                detail::notified_transfer_attributes(base_attrs_, telemetry_.labels(), n);
            char id[max_request_id];
            const std::string_view request_id = detail::notified_request_id(n, id);
            telemetry_.record_notified(clock_.wall_us(clock_.now()), n.bytes, attrs, request_id);
        }
    }

    static void record_from_backend(void* self,
                                    category cat,
                                    const event_name& name,
                                    std::uint64_t value,
                                    value_kind kind) noexcept {
        static_cast<basic_agent*>(self)->telemetry_.record(cat, name, value, kind);
    }

    // Timing samples. Reading the clock around every post, and staging a record for every
    // completion, costs more than 1% of a 4 KiB shared-memory write (about 85 ns); counting a
    // completion in its transfer's slot costs almost nothing. So one post in sample_every_ is
    // timed, and after each flush (noticed at the next timed post, or poll, or progress) the
    // next sample_every_ posts are all timed: an agent that posts fewer than that between two
    // flushes has every transfer timed. A timed completion records itself together with the
    // untimed completions of the same transfer before it (requests = their number). Untimed
    // completions left over are recorded, as counts, once a flush has been noticed, at
    // release, at flush_telemetry and at destruction. Bytes and requests stay exact; times are
    // a sample. sample_every_ = 1 times and records every transfer.

    /// The post that the countdown picked: timed, then the countdown starts again (at 1 while
    /// the posts after a flush are being timed).
    [[gnu::noinline]] status post_timed(transfer_handle h) noexcept {
        note_flushes();
        if (fresh_ > 0) {
            --fresh_;
        }
        countdown_ = fresh_ > 0 ? 1 : sample_every_;
        detail::transfer_outcome outcome;
        const std::uint64_t start = clock_.now();
        status st = backend_.post(h, outcome);
        const std::uint64_t end = clock_.now();
        if (outcome.state != nullptr && !st.is_error()) {  // failures went to note_outcome
            detail::transfer_state& r = *outcome.state;
            r.timed = true;
            r.post_start = start;
            r.post_end = end;
            if (st.ok()) {
                record_timed(r, end, h);
            }
        }
        return st;
    }

    /// A post that is not timed: no clock, and a completion is counted in the transfer's slot
    /// by the backend, which hands anything flagged to note_outcome. Nothing after the call.
    [[gnu::always_inline]] status post_counted(transfer_handle h) noexcept {
        detail::transfer_outcome outcome;
        return backend_.post(h, outcome);
    }

    /// What post or poll flagged, from the backend's sink: a failure (its record and its ERROR
    /// event), an error found first, or a transfer whose completions start to wait for
    /// recording (listed).
    void note_outcome(const detail::transfer_outcome& outcome,
                      const status& st,
                      transfer_handle h) noexcept {
        using flag = detail::transfer_outcome::flag;
        if ((outcome.flags & flag::failed) != 0 && outcome.state != nullptr) {
            record_failure(*outcome.state, st.code(), clock_.now(), h);
        }
        if ((outcome.flags & flag::new_error) != 0) {
            record_error(st.code());
        }
        if ((outcome.flags & flag::first_unreported) != 0 && outcome.state != nullptr) {
            list_unreported(*outcome.state, h);
        }
    }

    /// After a flush: records what is left uncounted and times the next posts again. One load
    /// of a line the flusher writes once per flush.
    void note_flushes() noexcept {
        const std::uint64_t f = telemetry_.flushes();
        if (f != flushes_seen_) [[unlikely]] {
            flushes_seen_ = f;
            fresh_ = sample_every_;
            countdown_ = 1;
            report_unreported();
        }
    }

    /// A timed completion (`done` is the completion reading the caller just took): one staged
    /// record, with the durations from the post's own readings, that also carries the
    /// transfer's untimed completions before it (the backend counted this one too).
    /// A record the ring has no room for loses its times only: its completions stay counted
    /// in the slot, listed, and are recorded as counts once a flush has made room.
    void record_timed(detail::transfer_state& r, std::uint64_t done, transfer_handle h) noexcept {
        const std::uint64_t n = r.unreported;
        r.unreported = 0;
        if (!telemetry_.record_transfer(
                r.dir, clock_.wall_us(done), r.bytes * n, n,
                clock_.micros(r.post_start, r.post_end), clock_.micros(r.post_start, done), r.attrs,
                r.tagged ? backend_.request_id(h) : std::string_view{}, r.shape)) [[unlikely]] {
            r.unreported = n;
            list_unreported(r, h);
        }
    }

    /// Puts a transfer whose completions wait for recording on the list report_unreported
    /// goes through, once.
    void list_unreported(detail::transfer_state& r, transfer_handle h) noexcept {
        if (r.listed) {
            return;
        }
        try {
            unreported_.push_back(h);
            r.listed = true;
        } catch (...) {
            report_counts(r, clock_.wall_us(clock_.now()));  // no memory: record it now
        }
    }

    /// Records a transfer's untimed completions as counts; false (the completions kept) when
    /// the ring has no room.
    bool report_counts(detail::transfer_state& r, std::uint64_t wall_us) noexcept {
        if (!telemetry_.record_transfer_counts(r.dir, wall_us, r.bytes * r.unreported, r.unreported,
                                               r.attrs, {}, r.shape)) {
            return false;
        }
        r.unreported = 0;
        return true;
    }

    /// Records every listed transfer's untimed completions (released ones were recorded at
    /// release) and takes them off the list, which holds each transfer at most once. Those the
    /// ring has no room for stay listed, for after the next flush; false when some did.
    bool report_unreported() noexcept {
        if constexpr (Telemetry::enabled) {
            if (unreported_.empty()) {
                return true;
            }
            const std::uint64_t now = clock_.wall_us(clock_.now());
            std::size_t kept = 0;
            for (const transfer_handle h : unreported_) {
                detail::transfer_state* r = backend_.state(h);
                if (r == nullptr) {
                    continue;
                }
                if (r->unreported > 0 && !report_counts(*r, now)) {
                    unreported_[kept++] = h;  // still listed
                    continue;
                }
                r->listed = false;
            }
            unreported_.resize(kept);
            return kept == 0;
        }
        return true;
    }

    /// report_unreported(), and once more after a flush has drained the ring if it had no room
    /// for some: before a flush_telemetry or the agent's end, nothing is left unrecorded.
    void report_all_unreported() noexcept {
        if (!report_unreported()) {
            telemetry_.flush();
            report_unreported();
        }
    }

    /// A failed transfer, for exporters that take transfer records (its status is the error
    /// kind, so that a peer's failures say why; the bytes it was to move); it makes no
    /// agent_*_bytes event (telemetry.hpp).
    /// Its request id goes with it, timed or not: a failed transfer becomes a span in its
    /// request's trace (xtel/trace/span_stage.hpp).
    void record_failure(const detail::transfer_state& r,
                        status_code code,
                        std::uint64_t done,
                        transfer_handle h) noexcept {
        if constexpr (Telemetry::takes_transfers) {
            transfer_attributes attrs = r.attrs;
            attrs.status = failed_with(code);
            const std::string_view id = r.tagged ? backend_.request_id(h) : std::string_view{};
            if (r.timed) {
                telemetry_.record_transfer(r.dir, clock_.wall_us(done), r.bytes, 1,
                                           clock_.micros(r.post_start, r.post_end),
                                           clock_.micros(r.post_start, done), attrs, id, r.shape);
            } else {
                telemetry_.record_transfer_counts(r.dir, clock_.wall_us(done), r.bytes, 1, attrs,
                                                  id, r.shape);
            }
        }
    }

    /// What every transfer of this agent shares; interned only when some exporter reads
    /// attributes.
    transfer_attributes base_attributes() {
        if constexpr (Telemetry::takes_transfers) {
            return detail::agent_base_attributes(telemetry_.labels());
        } else {
            return {};
        }
    }

    void record_error(status_code code) noexcept {
        telemetry_.add(category::error, names::agent_error(code), 1);
    }

    status noted(status st) noexcept {
        if constexpr (Telemetry::enabled) {
            if (st.is_error()) {
                record_error(st.code());
            }
        }
        return st;
    }

    /// Memory gauges after a (de)registration: bytes registered now, and bytes deregistered
    /// since the agent started.
    status note_memory(status st, std::uint64_t deregistered) noexcept {
        if constexpr (Telemetry::enabled) {
            if (st.ok()) {
                telemetry_.set(category::memory, names::agent_memory_registered,
                               backend_.registered_bytes());
                if (deregistered > 0) {
                    deregistered_ += deregistered;
                    telemetry_.set(category::memory, names::agent_memory_deregistered,
                                   deregistered_);
                }
            }
        }
        return noted(std::move(st));
    }

    const std::string name_;
    Telemetry telemetry_;  // before backend_: it records the backend's last events
    const bool started_;
    detail::ucx_backend backend_;
    [[no_unique_address]] std::conditional_t<Telemetry::enabled, detail::tsc_clock, no_clock>
        clock_;
    std::uint64_t deregistered_ = 0;
    const transfer_attributes base_attrs_;
    // Timing samples (post_timed).
    const std::uint32_t sample_every_;
    std::uint32_t countdown_;
    std::uint32_t fresh_;
    std::uint64_t flushes_seen_ = 0;
    std::vector<transfer_handle> unreported_;  ///< transfers with unreported completions
};

/// The agent of a mask past pipeline_count (see XTEL_FOR_EACH_PIPELINE_MASK): empty.
template <unsigned Mask>
class basic_agent<basic_telemetry<detail::unused_pipeline<Mask>>> {};

// Every pipeline's agent is compiled once, in src/agent/pipelines.cpp.
#define XTEL_EXTERN_AGENT(mask) extern template class basic_agent<pipeline_t<mask>>;
XTEL_FOR_EACH_PIPELINE_MASK(XTEL_EXTERN_AGENT)
#undef XTEL_EXTERN_AGENT

}  // namespace xtel
