// The pushers of a build without xtel's push clients (XTEL_PUSH off): --remote-write is refused
// by the options, OTLP here, and nothing is ever due.
#include "pushers.hpp"

#include "xtel/core/error.hpp"
#include "xtel/push/otlp_environment.hpp"

namespace xtel::xtel_exporter {

struct pushers::state {};

std::optional<push::otlp_options> pushers::otlp_settings(const options& o) {
    for (const std::string_view var : push::otel_env::endpoints) {
        if (o.otlp.endpoint || process_env(var)) {
            throw usage_error(
                "OTLP is not in this build of xtel-exporter: it was built with XTEL_PUSH=OFF "
                "(protobuf and libcurl are needed for it)");
        }
    }
    return std::nullopt;
}

std::optional<push::otlp_trace_options> pushers::trace_settings(const options& /*o*/) {
    for (const std::string_view var : {push::otel_env::endpoint, push::otel_env::traces_endpoint}) {
        if (process_env(var)) {
            throw usage_error(
                "OTLP is not in this build of xtel-exporter: it was built with XTEL_PUSH=OFF "
                "(protobuf and libcurl are needed for it)");
        }
    }
    return std::nullopt;
}

pushers::pushers(const options& /*o*/,
                 node::scanner& /*files*/,
                 std::optional<push::otlp_options> /*otlp*/,
                 std::optional<push::otlp_trace_options> /*traces*/) {}

pushers::~pushers() = default;

std::vector<push_health> pushers::health() const {
    return {};
}

std::function<metrics::snapshot()> pushers::span_health() const {
    return {};
}

void pushers::label(const options& /*o*/, const host_port& /*bound*/) {}

std::optional<pushers::clock_type::time_point> pushers::due() const noexcept {
    return std::nullopt;
}

void pushers::push_if_due(node_metrics& /*source*/, clock_type::time_point /*now*/) {}

}  // namespace xtel::xtel_exporter
