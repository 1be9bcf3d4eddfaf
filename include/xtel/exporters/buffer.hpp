#pragma once
/// The buffer exporter: the shared-memory flight recorder as a pipeline policy.

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "xtel/core/exporter.hpp"
#include "xtel/exporters/buffer_settings.hpp"
#include "xtel/exporters/flight_recorder.hpp"

namespace xtel {

class buffer_exporter {
  public:
    static constexpr std::string_view name = "buffer";
    /// What it reads from the environment (and how it takes NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH).
    using settings = buffer_settings;

    /// Creates `<buffer_settings::from_env(ctx.cfg).directory>/<agent name>`.
    ///
    /// Throws config_error for what the configuration decides: an agent name that is not a file
    /// name, an output path that is not an existing directory. What the host decides at run
    /// time does not stop the agent: a directory it may not write, a full file system, a
    /// symbolic link or another user's file at its path (never followed, never replaced), a
    /// live writer of the same agent name (in this process or another), no file descriptor
    /// left. Then the exporter logs one error, disables itself and counts the events it is
    /// handed; the agent's transfers go on. The same holds when the file is truncated, deleted
    /// or replaced while the agent runs.
    explicit buffer_exporter(const exporter_context& ctx);

    /// Stages the batch; the round's events reach the file at on_flush_end, so that a round of
    /// more events than the recorder holds writes only the ones it keeps.
    void export_batch(std::span<const event> batch) noexcept {
        if (writer_ && writer_->stage(batch)) [[likely]] {
            return;
        }
        lost_.fetch_add(batch.size(), std::memory_order_relaxed);
    }

    /// Writes and publishes the round's events (one commit per flush round).
    void on_flush_end() noexcept {
        if (!writer_) {
            return;
        }
        const std::uint64_t staged = writer_->staged();
        if (!writer_->commit()) [[unlikely]] {
            lost_.fetch_add(staged, std::memory_order_relaxed);
        }
    }

    /// Where the flight recorder is, or would be when disabled.
    const std::filesystem::path& path() const noexcept { return path_; }

    // The members below are safe to call from any thread while the flusher runs.

    /// True when the file could not be created, or was later truncated, deleted or replaced
    /// under the writer: nothing is recorded from then on.
    bool disabled() const noexcept { return !writer_ || writer_->failed(); }
    /// Events handed to the exporter while disabled.
    std::uint64_t events_lost() const noexcept { return lost_.load(std::memory_order_relaxed); }
    /// Why it is disabled (the error it logged); empty when it is not.
    const std::string& error() const noexcept { return writer_ ? writer_->failure() : error_; }

  private:
    std::filesystem::path path_;
    std::string error_;
    std::optional<flight_recorder::writer> writer_;
    std::atomic<std::uint64_t> lost_{0};
};

}  // namespace xtel
