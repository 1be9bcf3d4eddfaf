#include "push/otlp/sender.hpp"

#include <algorithm>

#include "core/log.hpp"
#include "xtel/http/gzip.hpp"

namespace xtel::push::detail {

push_options sender_options(const sender_settings& s,
                            std::shared_ptr<std::atomic<std::uint64_t>> rejected) {
    push_options p;
    p.what = s.what;
    p.headers.push_back(s.encoding == otlp_encoding::protobuf
                            ? "Content-Type: application/x-protobuf"
                            : "Content-Type: application/json");
    if (s.gzip) {
        p.headers.push_back("Content-Encoding: gzip");
    }
    for (const auto& [name, value] : s.headers) {
        p.headers.push_back(name + ": " + value);
    }
    p.queue_capacity = s.queue_capacity;
    p.timeout = s.timeout;
    // The OTLP/HTTP specification's retryable answers.
    p.retryable = [](long status) {
        return status == 429 || status == 502 || status == 503 || status == 504;
    };
    p.on_success = [rejected = std::move(rejected), what = s.what, url = s.url,
                    items = std::string(s.items)](std::string_view body, std::string_view type) {
        if (const auto partial = parse_otlp_response(body, type)) {
            rejected->fetch_add(static_cast<std::uint64_t>(
                                    std::max<std::int64_t>(0, partial->rejected_data_points)),
                                std::memory_order_relaxed);
            xtel::detail::log(log_level::warning, "{} to {}: the receiver rejected {} {} ({})",
                              what, url, partial->rejected_data_points, items,
                              partial->error_message);
        }
    };
    return p;
}

std::string compressed(std::string body, bool gzip) {
    return gzip ? http::gzip(body, gzip_level) : body;
}

}  // namespace xtel::push::detail
