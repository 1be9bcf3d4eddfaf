#include "xtel/metrics/attributes.hpp"

#include "core/cuda_runtime.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "xtel/core/ascii.hpp"
#include "xtel/metrics/exposition_rules.hpp"

namespace xtel::metrics {

namespace {

std::string known_keys() {
    std::string out;
    for (const auto& k : transfer_raw_keys) {
        out += fmt::format("{}{} ({})", out.empty() ? "" : ", ", k.key, to_string(k.type));
    }
    return out;
}

}  // namespace

std::string to_label(const attribute_value& v) {
    switch (type_of(v)) {
        case attribute_type::string:
            return std::get<std::string>(v);
        case attribute_type::boolean:
            return std::get<bool>(v) ? "true" : "false";
        case attribute_type::integer:
            return std::to_string(std::get<std::int64_t>(v));
        case attribute_type::list:
            return fmt::format("{}", fmt::join(std::get<std::vector<std::string>>(v), ","));
    }
    return {};
}

void raw_record::set(std::string_view key, attribute_value value) {
    for (auto& [k, v] : entries_) {
        if (k == key) {
            v = std::move(value);
            return;
        }
    }
    entries_.emplace_back(std::string(key), std::move(value));
}

const attribute_value* raw_record::find(std::string_view key) const noexcept {
    for (const auto& [k, v] : entries_) {
        if (k == key) {
            return &v;
        }
    }
    return nullptr;
}

attribute_registry::attribute_registry(std::vector<attribute> entries) {
    for (auto& a : entries) {
        add(std::move(a));
    }
}

attribute_registry& attribute_registry::add(attribute a) {
    if (!is_label_name(a.name)) {
        throw metrics_error(fmt::format(
            "attribute name '{}' is invalid: expected a label name, [a-zA-Z_][a-zA-Z0-9_]* not "
            "starting with \"__\"",
            a.name));
    }
    for (const auto& e : entries_) {
        if (e.name == a.name) {
            throw metrics_error(fmt::format(
                "attribute name '{}' is already in the registry (raw key '{}'): each name labels "
                "one attribute",
                a.name, e.raw_key));
        }
    }
    if (a.raw_key.empty()) {
        throw metrics_error(
            fmt::format("attribute '{}' has an empty raw key: expected the key of the raw "
                        "record it is read from",
                        a.name));
    }
    if (type_of(a.default_value) != a.type) {
        throw metrics_error(fmt::format(
            "attribute '{}' is of type {} but its default '{}' is a {}: expected a default of "
            "the attribute's type",
            a.name, to_string(a.type), to_label(a.default_value),
            to_string(type_of(a.default_value))));
    }
    const auto pos =
        std::upper_bound(entries_.begin(), entries_.end(), a.order,
                         [](int order, const attribute& e) { return order < e.order; });
    entries_.insert(pos, std::move(a));
    return *this;
}

std::vector<std::string> attribute_registry::names() const {
    std::vector<std::string> out;
    out.reserve(entries_.size());
    for (const auto& e : entries_) {
        out.push_back(e.name);
    }
    return out;
}

attribute_registry default_attributes() {
    const auto str = [](std::string_view name, int order) {
        return attribute{std::string(name), std::string(name), attribute_type::string,
                         std::string("unknown"), order};
    };
    return attribute_registry({
        str("backend", 10),
        str("operation", 20),
        str("direction", 30),
        str("local_memory", 40),
        str("remote_memory", 50),
        str("remote_agent", 60),
        str("status", 70),
        str("gpu", 80),
    });
}

std::string sanitize_field_value(std::string_view value) {
    std::string out(value);
    for (char& c : out) {
        c = ascii::lower(c);
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) {
            c = '_';
        }
    }
    return out;
}

std::string gpu_identifier(std::span<const std::string> device_names) {
    std::map<std::string, std::size_t> counts;  // sorted by name
    for (const auto& d : device_names) {
        ++counts[sanitize_field_value(d)];
    }
    std::string out;
    for (const auto& [name, n] : counts) {
        out += fmt::format("{}{}x_{}", out.empty() ? "" : "_", n, name);
    }
    return out;
}

const std::string& local_gpu_identifier() {
    static const std::string id = [] {
        const auto names = xtel::detail::cuda::device_names();
        return gpu_identifier(names);
    }();
    return id;
}

telemetry_data extract_telemetry_data(const raw_record& raw, const attribute_registry& registry) {
    telemetry_data out;
    out.fields.reserve(registry.size());
    for (const attribute& a : registry.entries()) {
        const attribute_value* v = raw.find(a.raw_key);
        const bool usable =
            v != nullptr && type_of(*v) == a.type &&
            !(a.type == attribute_type::string && std::get<std::string>(*v).empty());
        field f;
        f.name = a.name;
        // Values are kept as given: a label value may hold any UTF-8 (escaping is the
        // renderer's job), and sanitizing would merge peers such as decode-7 and decode_7.
        f.value = usable ? *v : a.default_value;
        f.label = to_label(f.value);
        out.fields.push_back(std::move(f));
    }
    return out;
}

raw_record transfer_raw_record(const transfer_attributes& attrs,
                               direction dir,
                               const label_table& labels,
                               const context& ctx) {
    raw_record r;
    const std::size_t issued = labels.size();
    // Strings as readers show them (bytes that are not UTF-8 as U+FFFD): two peers whose names
    // differ only there would otherwise be two series every reader shows as one, and a node
    // file with a series twice is refused whole.
    const auto label = [&](std::string_view key, label_id id) {
        if (id != label_table::unknown && id < issued) {
            std::string name = labels.name(id);
            r.set(key, is_utf8(name) ? std::move(name) : shown_value(name));
        }
    };
    label("backend", attrs.backend);
    r.set("operation", std::string(to_string(attrs.op)));
    r.set("direction", std::string(dir == direction::tx ? "tx" : "rx"));
    r.set("local_memory", std::string(to_string(attrs.local_memory)));
    r.set("remote_memory", std::string(to_string(attrs.remote_memory)));
    label("remote_agent", attrs.remote_agent);
    r.set("status", std::string(to_string(attrs.status)));
    r.set("success", attrs.status == transfer_status::success);
    label("gpu", attrs.gpu);
    if (!ctx.agent_name.empty()) {
        r.set("agent_name", ctx.agent_name);
    }
    if (!ctx.hostname.empty()) {
        r.set("hostname", is_utf8(ctx.hostname) ? ctx.hostname : shown_value(ctx.hostname));
    }
    return r;
}

void check_transfer_keys(const attribute_registry& registry) {
    for (const attribute& a : registry.entries()) {
        const auto it = std::find_if(std::begin(transfer_raw_keys), std::end(transfer_raw_keys),
                                     [&](const raw_key& k) { return k.key == a.raw_key; });
        if (it == std::end(transfer_raw_keys)) {
            throw metrics_error(fmt::format(
                "attribute '{}' reads raw key '{}', which transfer records do not provide: "
                "expected one of {}",
                a.name, a.raw_key, known_keys()));
        }
        if (it->type != a.type) {
            throw metrics_error(fmt::format(
                "attribute '{}' is of type {} but raw key '{}' holds a {}: expected one of {}",
                a.name, to_string(a.type), a.raw_key, to_string(it->type), known_keys()));
        }
    }
}

}  // namespace xtel::metrics
