#pragma once
// A span stage with a span ring of its own, run as the back end runs its span stage for a node
// exporter (xtel/core/back_end.hpp): a round's records sampled, the spans kept written into the
// ring in one write, and the stage told whether they were. For the tests of what the stage
// decides and what a span says, read back from a real ring with the real reader.

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

#include "xtel/core/label_table.hpp"
#include "xtel/core/rank.hpp"
#include "xtel/core/transfer_record.hpp"
#include "xtel/trace/sampler.hpp"
#include "xtel/trace/span_ring.hpp"
#include "xtel/trace/span_stage.hpp"

namespace xtel_test {

class span_recorder {
  public:
    /// Throws what span_ring::writer throws (a live writer of the same name in `dir`).
    span_recorder(const std::filesystem::path& dir,
                  const std::string& agent_name,
                  const xtel::process_rank& rank,
                  const xtel::trace::sampler_settings& settings,
                  std::uint64_t now_us,
                  std::uint32_t slot_count)
        : stage_(agent_name, rank, settings, now_us), ring_(dir, agent_name, slot_count) {}

    void record(std::span<const xtel::transfer_record> transfers,
                const xtel::label_table& labels,
                std::uint64_t now_us) {
        stage_.sample(transfers, labels, now_us);
        if (!stage_.spans().empty()) {
            stage_.taken(ring_.write(stage_.spans()));
        }
    }

    const xtel::trace::span_counts& counts() const noexcept { return stage_.counts(); }
    std::span<const xtel::transfer_trace> traces() const noexcept { return stage_.traces(); }
    bool failed() const noexcept { return ring_.failed(); }

  private:
    xtel::trace::span_stage stage_;
    xtel::trace::span_ring::writer ring_;
};

}  // namespace xtel_test
