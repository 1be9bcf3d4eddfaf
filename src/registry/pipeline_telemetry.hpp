#pragma once
// The pipeline behind runtime_telemetry (xtel/registry/runtime_telemetry.hpp): one final class
// per precompiled pipeline, each of whose overrides is the pipeline's own inline call, so that a
// record through the interface costs one virtual call and nothing more. make_telemetry
// (make_telemetry.cpp) makes them.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "xtel/core/telemetry.hpp"
#include "xtel/registry/runtime_telemetry.hpp"

namespace xtel::detail {

template <class Telemetry>
class pipeline_telemetry final : public runtime_telemetry {
  public:
    pipeline_telemetry(const config& cfg, std::string name, const telemetry_options& opts)
        : telemetry_(cfg, std::move(name), opts) {}

    const std::string& name() const noexcept override { return telemetry_.agent_name(); }
    bool enabled() const noexcept override { return Telemetry::enabled; }
    label_table& labels() noexcept override { return telemetry_.labels(); }
    void flush() override { telemetry_.flush(); }
    telemetry_stats stats() const override { return telemetry_.stats(); }

  private:
    void do_record(category cat,
                   const event_name& name,
                   std::uint64_t value,
                   value_kind kind) noexcept override {
        telemetry_.record(cat, name, value, kind);
    }
    void do_record_at(std::uint64_t timestamp_us,
                      category cat,
                      const event_name& name,
                      std::uint64_t value,
                      value_kind kind) noexcept override {
        telemetry_.record_at(timestamp_us, cat, name, value, kind);
    }
    void do_record_transfer(direction dir,
                            std::uint64_t timestamp_us,
                            std::uint64_t bytes,
                            std::uint64_t requests,
                            std::uint64_t post_us,
                            std::uint64_t xfer_us,
                            const transfer_attributes& attrs,
                            std::string_view request_id,
                            transfer_shape shape) noexcept override {
        telemetry_.record_transfer(dir, timestamp_us, bytes, requests, post_us, xfer_us, attrs,
                                   request_id, shape);
    }
    void do_record_transfer_counts(direction dir,
                                   std::uint64_t timestamp_us,
                                   std::uint64_t bytes,
                                   std::uint64_t requests,
                                   const transfer_attributes& attrs,
                                   std::string_view request_id,
                                   transfer_shape shape) noexcept override {
        telemetry_.record_transfer_counts(dir, timestamp_us, bytes, requests, attrs, request_id,
                                          shape);
    }
    void do_record_notified(std::uint64_t timestamp_us,
                            std::uint64_t bytes,
                            const transfer_attributes& attrs,
                            std::string_view request_id) noexcept override {
        telemetry_.record_notified(timestamp_us, bytes, attrs, request_id);
    }

    Telemetry telemetry_;
};

}  // namespace xtel::detail
