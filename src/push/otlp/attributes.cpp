#include "push/otlp/attributes.hpp"

#include <unistd.h>

#include <charconv>
#include <optional>
#include <string>

#include "xtel/metrics/exposition.hpp"

namespace xtel::push::detail {

namespace {

namespace pb = xtel::otlp;

/// `s` as a non-negative integer that fits int64, or nullopt.
std::optional<std::int64_t> as_int(std::string_view s) {
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size() || v < 0) {
        return std::nullopt;
    }
    return v;
}

/// The attributes every resource has: who serves it, where, and OTEL_RESOURCE_ATTRIBUTES' (less
/// the keys xtel sets from facts).
void put_common(otlp_attributes& attrs,
                const otlp_resource& common,
                const std::span<const metrics::label>* agent) {
    std::string service = agent != nullptr ? common.service_name : "xtel-exporter";
    std::string instance;
    if (agent != nullptr) {
        for (const metrics::label& l : *agent) {
            if (l.name == "agent_name") {
                instance = common.host_name + ":" + l.value;
            }
        }
    } else {
        instance = common.host_name + ":xtel-exporter";
    }
    put(attrs, "service.name", service);
    put(attrs, "service.instance.id", instance);
    put(attrs, "host.name", common.host_name);
    for (const metrics::label& l : common.attributes) {
        if (l.name != "service.name" && l.name != "service.instance.id" && l.name != "host.name" &&
            l.name != "process.pid") {
            put(attrs, l.name, l.value);
        }
    }
}

/// An agent's labels, the known ones under OpenTelemetry's or xtel's attribute names and as
/// integers where they are numbers.
void put_agent_labels(otlp_attributes& attrs, std::span<const metrics::label> agent) {
    for (const metrics::label& l : agent) {
        if (l.name == "pid") {
            if (const auto v = as_int(l.value)) {
                put(attrs, "process.pid", *v);
                continue;
            }
        } else if (l.name == "agent_name") {
            put(attrs, "xtel.agent.name", l.value);
            continue;
        } else if (l.name == "rank" || l.name == "local_rank") {
            if (const auto v = as_int(l.value)) {
                put(attrs, "xtel." + l.name, *v);
                continue;
            }
        }
        put(attrs, l.name, l.value);
    }
}

}  // namespace

void put(otlp_attributes& out, std::string_view key, std::string_view value) {
    pb::KeyValue& kv = *out.Add();
    kv.set_key(std::string(key));
    kv.mutable_value()->set_string_value(metrics::to_valid_utf8(value));
}

void put(otlp_attributes& out, std::string_view key, std::int64_t value) {
    pb::KeyValue& kv = *out.Add();
    kv.set_key(std::string(key));
    kv.mutable_value()->set_int_value(value);
}

void fill_resource(pb::Resource& r, const otlp_resource& common, const metrics::snapshot* agent) {
    if (agent != nullptr) {
        fill_agent_resource(r, common, agent->labels);
        return;
    }
    auto& attrs = *r.mutable_attributes();
    put_common(attrs, common, nullptr);
    put(attrs, "process.pid", static_cast<std::int64_t>(::getpid()));
}

void fill_agent_resource(pb::Resource& r,
                         const otlp_resource& common,
                         std::span<const metrics::label> agent_labels) {
    auto& attrs = *r.mutable_attributes();
    put_common(attrs, common, &agent_labels);
    put_agent_labels(attrs, agent_labels);
}

}  // namespace xtel::push::detail
