#include "xtel/core/telemetry.hpp"

#include <fmt/format.h>

#include "core/log.hpp"

namespace xtel::detail {

void report_export_failure(std::string_view agent,
                           std::string_view exporter_name,
                           std::string_view what,
                           std::uint64_t failures) noexcept {
    // The first failure is logged; later ones only counted, so a broken exporter cannot flood
    // the log once per flush.
    if (failures == 1) {
        log(log_level::error,
            "agent '{}': exporter '{}' failed: {} (further failures are counted, not logged; "
            "transfers are not affected)",
            agent, exporter_name, what);
    }
}

}  // namespace xtel::detail
