#pragma once
/// The buffer exporter: the shared-memory flight recorder as a pipeline policy.

#include <filesystem>
#include <span>
#include <string_view>

#include "xtel/exporter.hpp"
#include "xtel/flight_recorder.hpp"

namespace xtel {

class buffer_exporter {
public:
    static constexpr std::string_view name = "buffer";

    /// Creates `<NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH or /dev/shm>/<agent name>`.
    explicit buffer_exporter(const exporter_context& ctx);

    void export_batch(std::span<const event> batch) noexcept { writer_.append(batch); }

    const std::filesystem::path& path() const noexcept { return writer_.path(); }

private:
    flight_recorder::writer writer_;
};

}  // namespace xtel
