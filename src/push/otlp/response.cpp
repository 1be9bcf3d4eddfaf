#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "otlp_metrics.pb.h"
#include "xtel/push/otlp.hpp"

namespace xtel::push {

namespace {

/// The most of a receiver's error message that is kept.
constexpr std::size_t max_message = 512;

/// The value after `"key":` in a JSON text, as written by a receiver: a number or a string
/// (the first 512 bytes, escapes kept as written); nullopt when the key is not there.
std::optional<std::string> json_field(std::string_view body, std::string_view key) {
    const std::string quoted = fmt::format("\"{}\"", key);
    const std::size_t at = body.find(quoted);
    if (at == std::string_view::npos) {
        return std::nullopt;
    }
    std::size_t i = at + quoted.size();
    const auto skip_space = [&] {
        while (i < body.size() &&
               (body[i] == ' ' || body[i] == '\t' || body[i] == '\n' || body[i] == '\r')) {
            ++i;
        }
    };
    skip_space();
    if (i >= body.size() || body[i] != ':') {
        return std::nullopt;
    }
    ++i;
    skip_space();
    if (i >= body.size()) {
        return std::nullopt;
    }
    if (body[i] == '"') {
        std::string out;
        for (++i; i < body.size() && body[i] != '"' && out.size() < max_message; ++i) {
            if (body[i] == '\\' && i + 1 < body.size()) {
                out += body[i++];
            }
            out += body[i];
        }
        return out;
    }
    std::size_t end = i;
    while (end < body.size() && end - i < 32 &&
           (std::isdigit(static_cast<unsigned char>(body[end])) != 0 || body[end] == '-')) {
        ++end;
    }
    return std::string(body.substr(i, end - i));
}

}  // namespace

std::optional<otlp_partial_success> parse_otlp_response(std::string_view body,
                                                        std::string_view content_type) {
    otlp_partial_success out;
    if (content_type.starts_with("application/json")) {
        if (body.find("\"partialSuccess\"") == std::string_view::npos) {
            return std::nullopt;
        }
        // The traces' answer names the count rejectedSpans; binary, both are field 1, int64.
        auto n = json_field(body, "rejectedDataPoints");
        if (!n) {
            n = json_field(body, "rejectedSpans");
        }
        if (n) {
            std::from_chars(n->data(), n->data() + n->size(), out.rejected_data_points);
        }
        if (auto m = json_field(body, "errorMessage")) {
            out.error_message = std::move(*m);
        }
    } else {
        xtel::otlp::ExportMetricsServiceResponse r;
        if (body.empty() || !r.ParseFromArray(body.data(), static_cast<int>(body.size())) ||
            !r.has_partial_success()) {
            return std::nullopt;
        }
        out.rejected_data_points = r.partial_success().rejected_data_points();
        out.error_message = r.partial_success().error_message();
    }
    if (out.rejected_data_points == 0 && out.error_message.empty()) {
        return std::nullopt;
    }
    // The receiver's words go into a log line: cut short, and no control characters that
    // could forge another line or move a terminal's cursor.
    if (out.error_message.size() > max_message) {
        out.error_message.resize(max_message);
    }
    for (char& c : out.error_message) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
            c = '?';
        }
    }
    return out;
}

}  // namespace xtel::push
