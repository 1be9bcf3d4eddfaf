#pragma once
/// The metrics processor's vocabulary: attributes, their values, the normalized data a builder
/// reads, the measurements it accumulates, and the context of the agent.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "xtel/core/error.hpp"

namespace xtel::metrics {

/// A bad attribute, family or builder: the message names the value and what is accepted.
class metrics_error : public error {
  public:
    using error::error;
};

/// How an attribute's value is read and shown; every type is used as it is (a renderer escapes
/// label values).
enum class attribute_type : std::uint8_t { string, boolean, integer, list };

constexpr std::string_view to_string(attribute_type t) noexcept {
    switch (t) {
        case attribute_type::string:
            return "string";
        case attribute_type::boolean:
            return "boolean";
        case attribute_type::integer:
            return "integer";
        case attribute_type::list:
            return "list";
    }
    return "unknown";
}

/// One value of one of the four types; the variant index is the attribute_type.
using attribute_value = std::variant<std::string, bool, std::int64_t, std::vector<std::string>>;

/// The type a value holds.
inline attribute_type type_of(const attribute_value& v) noexcept {
    return static_cast<attribute_type>(v.index());
}

/// A value as a label shows it: strings as they are, `true`/`false`, decimal integers, list
/// items joined with ','.
std::string to_label(const attribute_value& v);

/// One entry of the attribute registry: the label `name`, read from the raw record's
/// `raw_key`, of `type`, `default_value` when the raw record lacks it (or has an empty
/// string), placed by `order` among the labels (smaller first).
struct attribute {
    std::string name;
    std::string raw_key;
    attribute_type type = attribute_type::string;
    attribute_value default_value = std::string("unknown");
    int order = 0;
};

/// A raw record: keys and values as they come from a transfer record and its context, before
/// the registry names and types them. A handful of keys, so a vector.
class raw_record {
  public:
    /// Sets `key`, replacing an earlier value.
    void set(std::string_view key, attribute_value value);
    /// The value of `key`; nullptr when absent.
    const attribute_value* find(std::string_view key) const noexcept;

    const std::vector<std::pair<std::string, attribute_value>>& entries() const noexcept {
        return entries_;
    }

  private:
    std::vector<std::pair<std::string, attribute_value>> entries_;
};

/// One attribute of normalized data: the registry's name, its value, and the
/// value as a label.
struct field {
    std::string name;
    attribute_value value;
    std::string label;
};

/// Normalized data: one field per registry entry, in the registry's order.
struct telemetry_data {
    std::vector<field> fields;

    /// The field named `name`; nullptr when the registry has none.
    const field* find(std::string_view name) const noexcept {
        for (const field& f : fields) {
            if (f.name == name) {
                return &f;
            }
        }
        return nullptr;
    }
};

/// What a group of transfers with the same attributes adds up to. Builders accumulate these
/// sums, which is what counters need.
struct measurements {
    std::uint64_t transfers = 0;
    std::uint64_t requests = 0;
    std::uint64_t bytes = 0;
    std::uint64_t xfer_us = 0;  ///< sum of transfer times, post to completion
    std::uint64_t post_us = 0;  ///< sum of post times
    /// Records whose times were measured: the times above sum over these. An agent that samples
    /// times (config::timing_sample) makes some records without them.
    std::uint64_t timed = 0;

    measurements& operator+=(const measurements& o) noexcept {
        transfers += o.transfers;
        requests += o.requests;
        bytes += o.bytes;
        xfer_us += o.xfer_us;
        post_us += o.post_us;
        timed += o.timed;
        return *this;
    }
    friend bool operator==(const measurements&, const measurements&) = default;
};

/// What is the same for every transfer of an agent.
struct context {
    std::string agent_name;
    std::string hostname;
};

}  // namespace xtel::metrics
