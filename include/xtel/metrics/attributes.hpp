#pragma once
/// The attribute registry and the utilities around it: naming the GPUs of a
/// machine, and turning a raw record into normalized telemetry data.
///
/// An attribute is one registry entry (name, raw key, type, default, order); adding one is one
/// entry, and every builder that labels series by the registry (comprehensive, time) gains the
/// label. The raw keys a transfer record provides are listed in `transfer_raw_keys`.

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "xtel/core/transfer_record.hpp"
#include "xtel/metrics/types.hpp"

namespace xtel::metrics {

/// The raw keys of a transfer record and its context, with the type each value has.
struct raw_key {
    std::string_view key;
    attribute_type type;
    std::string_view meaning;
};

inline constexpr raw_key transfer_raw_keys[] = {
    {"backend", attribute_type::string, "transport that moved the bytes (ucx)"},
    {"operation", attribute_type::string, "read or write"},
    {"direction", attribute_type::string, "tx or rx, as seen by the recording agent"},
    {"local_memory", attribute_type::string, "dram, vram, block, object, file or unknown"},
    {"remote_memory", attribute_type::string, "dram, vram, block, object, file or unknown"},
    {"remote_agent", attribute_type::string, "the peer's name"},
    {"status", attribute_type::string, "success or error"},
    {"success", attribute_type::boolean, "true when the transfer completed"},
    {"gpu", attribute_type::string, "GPU identifier of the recording host (2x_nvidia_h100)"},
    {"agent_name", attribute_type::string, "the recording agent's name"},
    {"hostname", attribute_type::string, "the recording host's name"},
};

/// The entries that label series, sorted by order (ties keep the order they were added in).
class attribute_registry {
  public:
    attribute_registry() = default;
    /// Adds each entry in turn; throws metrics_error as add() does.
    explicit attribute_registry(std::vector<attribute> entries);

    /// Adds one entry. Throws metrics_error when its name is not a label name
    /// ([a-zA-Z_][a-zA-Z0-9_]*, not starting with "__") or is taken, its raw key is empty, or
    /// its default is of another type.
    attribute_registry& add(attribute a);

    std::span<const attribute> entries() const noexcept { return entries_; }
    std::size_t size() const noexcept { return entries_.size(); }
    /// The label names, in order.
    std::vector<std::string> names() const;

  private:
    std::vector<attribute> entries_;
};

/// backend, operation, direction, local_memory, remote_memory, remote_agent, status, gpu:
/// strings, default "unknown", orders 10 to 80 in steps of 10 (room to slot entries between).
attribute_registry default_attributes();

/// Lower case; every character outside [a-z0-9_] becomes '_' ("NVIDIA H100" -> "nvidia_h100").
std::string sanitize_field_value(std::string_view value);

/// The GPUs of a machine as one value: device names sanitized, counted, sorted by name and
/// joined ("NVIDIA H100", "NVIDIA H100" -> "2x_nvidia_h100"; with an A100 as well,
/// "1x_nvidia_a100_2x_nvidia_h100"). Empty for no devices.
std::string gpu_identifier(std::span<const std::string> device_names);

/// This machine's CUDA devices through gpu_identifier ("2x_nvidia_h100"), computed once per
/// process; empty when xtel was built without CUDA, the CUDA runtime is not there, or no device
/// is present.
const std::string& local_gpu_identifier();

/// Normalized data: for each registry entry, the raw record's value of its raw key, or the
/// default when the key is absent, holds another type, or is an empty string. Values are used as
/// they are: label values may hold any UTF-8, and the renderers escape them.
telemetry_data extract_telemetry_data(const raw_record& raw, const attribute_registry& registry);

/// The raw record of a transfer (see transfer_raw_keys). Ids the table never issued, and the
/// id "unknown", leave their key out, so the registry's default applies.
raw_record transfer_raw_record(const transfer_attributes& attrs,
                               direction dir,
                               const label_table& labels,
                               const context& ctx);

/// Throws metrics_error when an entry reads a raw key that transfer records do not provide,
/// or provide with another type; the message lists the keys there are.
void check_transfer_keys(const attribute_registry& registry);

}  // namespace xtel::metrics
