#pragma once
// What every OTLP/HTTP signal xtel-exporter sends (metrics, traces) asks of its http_pusher: the
// encoding's Content-Type, gzip, the user's headers, the specification's retryable answers, and
// a partial success's rejected items counted and logged.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "xtel/push/http_pusher.hpp"
#include "xtel/push/otlp.hpp"

namespace xtel::push::detail {

/// gzip level 1, as the scrapes': a body is compressed once and sent once.
inline constexpr int gzip_level = 1;

struct sender_settings {
    std::string what;  ///< for the log: "OTLP", "OTLP traces"
    std::string url;
    otlp_encoding encoding = otlp_encoding::protobuf;
    bool gzip = false;
    std::vector<std::pair<std::string, std::string>> headers;
    std::size_t queue_capacity = 64;
    std::chrono::milliseconds timeout{10'000};
    /// What a partial success rejects, for the log: "points", "spans".
    std::string_view items;
};

/// What `o` (otlp_options, otlp_trace_options) says of its sending, as `what` in the log.
template <class Options>
sender_settings settings_of(const Options& o, std::string what, std::string_view items) {
    return {.what = std::move(what),
            .url = o.url,
            .encoding = o.encoding,
            .gzip = o.gzip,
            .headers = o.headers,
            .queue_capacity = o.queue_capacity,
            .timeout = o.timeout,
            .items = items};
}

/// The http_pusher's options for `s`; a partial success adds its rejected items to `rejected`.
push_options sender_options(const sender_settings& s,
                            std::shared_ptr<std::atomic<std::uint64_t>> rejected);

/// `body`, gzipped when `gzip`.
std::string compressed(std::string body, bool gzip);

}  // namespace xtel::push::detail
