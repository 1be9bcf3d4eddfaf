#include "xtel/push/http_pusher.hpp"

#include <curl/curl.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <ctime>
#include <random>
#include <utility>

#include "core/log.hpp"
#include "xtel/core/ascii.hpp"
#include "xtel/core/parse.hpp"
#include "xtel/core/version.hpp"

namespace xtel::push {

namespace {

enum class outcome { sent, retry, rejected, stopped };

/// One POST's result: what to do with the body, why in words when not sent, and how long the
/// receiver asked to wait before the next try.
struct attempt {
    outcome result;
    std::string reason;
    std::optional<std::chrono::seconds> retry_after;
};

void init_curl_once() {
    static const CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);
    if (rc != CURLE_OK) {
        throw push_error(fmt::format("curl_global_init failed: {}", curl_easy_strerror(rc)));
    }
}

/// What one answer brought: its body (the first `kept` bytes) and its Retry-After.
struct answer {
    static constexpr std::size_t kept = 64 * 1024;
    std::string body;
    std::string retry_after;

    void clear() {
        body.clear();
        retry_after.clear();
    }
};

std::size_t keep_body(char* data, std::size_t size, std::size_t n, void* out) {
    auto& a = *static_cast<answer*>(out);
    const std::size_t bytes = size * n;
    a.body.append(data, std::min(bytes, answer::kept - std::min(answer::kept, a.body.size())));
    return bytes;
}

std::size_t keep_header(char* data, std::size_t size, std::size_t n, void* out) {
    auto& a = *static_cast<answer*>(out);
    const std::size_t bytes = size * n;
    constexpr std::string_view name = "retry-after:";
    const std::string_view line(data, bytes);
    if (line.size() > name.size() &&
        ascii::equals_ignoring_case(line.substr(0, name.size()), name)) {
        std::string_view v = line.substr(name.size());
        while (!v.empty() && std::isspace(static_cast<unsigned char>(v.front())) != 0) {
            v.remove_prefix(1);
        }
        while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back())) != 0) {
            v.remove_suffix(1);
        }
        a.retry_after.assign(v.substr(0, 64));
    }
    return bytes;
}

int abort_when_stopping(void* stopping, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    return static_cast<const std::atomic<bool>*>(stopping)->load() ? 1 : 0;
}

struct curl_handle {
    CURL* easy = curl_easy_init();
    curl_slist* headers = nullptr;
    ~curl_handle() {
        curl_slist_free_all(headers);
        curl_easy_cleanup(easy);
    }
};

/// The handle every POST of one sender reuses (so its connection is kept alive).
void configure(curl_handle& h,
               const std::string& url,
               const push_options& o,
               answer& a,
               const std::atomic<bool>& stopping) {
    for (const std::string& header : o.headers) {
        h.headers = curl_slist_append(h.headers, header.c_str());
    }
    // libcurl would otherwise send "Expect: 100-continue" with large bodies and wait for an
    // answer to it that not every receiver sends.
    h.headers = curl_slist_append(h.headers, "Expect:");
    CURL* c = h.easy;
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h.headers);
    static const std::string user_agent = "xtel-exporter/" + std::string(version());
    curl_easy_setopt(c, CURLOPT_USERAGENT, user_agent.c_str());
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(o.timeout.count()));
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(o.timeout.count()));
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, keep_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &a);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, keep_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &a);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, abort_when_stopping);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, const_cast<std::atomic<bool>*>(&stopping));
}

bool default_retryable(long status) {
    return status == 429 || status >= 500;
}

/// A receiver's text for the log: at most 200 bytes, control characters as '?'.
std::string printable(std::string_view s) {
    return parse::printable(s, parse::shown::replaced, 200);
}

attempt post(curl_handle& h, const std::string& body, answer& a, const push_options& o) {
    a.clear();
    curl_easy_setopt(h.easy, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(h.easy, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    const CURLcode rc = curl_easy_perform(h.easy);
    if (rc == CURLE_ABORTED_BY_CALLBACK) {
        return {outcome::stopped, {}, {}};
    }
    if (rc != CURLE_OK) {
        return {outcome::retry, curl_easy_strerror(rc), {}};
    }
    long status = 0;
    curl_easy_getinfo(h.easy, CURLINFO_RESPONSE_CODE, &status);
    if (status >= 200 && status < 300) {
        if (o.on_success) {
            const char* type = nullptr;
            curl_easy_getinfo(h.easy, CURLINFO_CONTENT_TYPE, &type);
            o.on_success(a.body, type != nullptr ? std::string_view(type) : std::string_view());
        }
        return {outcome::sent, {}, {}};
    }
    std::string reason = fmt::format("HTTP {}: {}", status, printable(a.body));
    const bool retry = o.retryable ? o.retryable(status) : default_retryable(status);
    if (retry) {
        return {outcome::retry, std::move(reason),
                parse_retry_after(a.retry_after, static_cast<std::int64_t>(std::time(nullptr)))};
    }
    return {outcome::rejected, std::move(reason), {}};
}

}  // namespace

std::optional<std::chrono::seconds> parse_retry_after(std::string_view value, std::int64_t now) {
    if (value.empty()) {
        return std::nullopt;
    }
    if (std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        std::int64_t s = 0;
        const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), s);
        if (ec == std::errc::result_out_of_range) {
            return std::chrono::seconds(INT32_MAX);
        }
        return ec == std::errc() && end == value.data() + value.size()
                   ? std::optional(std::chrono::seconds(s))
                   : std::nullopt;
    }
    const std::string text(value);
    const time_t at = curl_getdate(text.c_str(), nullptr);
    if (at == -1) {
        return std::nullopt;
    }
    return std::chrono::seconds(std::max<std::int64_t>(0, static_cast<std::int64_t>(at) - now));
}

http_pusher::http_pusher(std::string url, push_options o)
    : url_(std::move(url)), options_(std::move(o)) {
    if (!url_.starts_with("http://") && !url_.starts_with("https://")) {
        throw push_error(
            fmt::format("{}: url \"{}\" is not an http:// or https:// URL", options_.what, url_));
    }
    if (options_.queue_capacity == 0) {
        throw push_error(
            fmt::format("{}: queue_capacity 0; at least 1 body must fit", options_.what));
    }
    init_curl_once();
    thread_ = std::thread([this] { run(); });
}

http_pusher::~http_pusher() {
    {
        const std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
}

void http_pusher::push(std::string body) {
    {
        const std::lock_guard lock(mutex_);
        if (queue_.size() >= options_.queue_capacity) {
            queue_.pop_front();
            dropped_.fetch_add(1, std::memory_order_relaxed);
        }
        queue_.push_back({next_id_++, std::make_shared<const std::string>(std::move(body))});
    }
    wake_.notify_all();
}

std::size_t http_pusher::queued() const {
    const std::lock_guard lock(mutex_);
    return queue_.size();
}

bool http_pusher::sleep_for(std::chrono::milliseconds d) {
    std::unique_lock lock(mutex_);
    return !wake_.wait_for(lock, d, [this] { return stopping_.load(); });
}

void http_pusher::run() {
    curl_handle h;
    if (h.easy == nullptr) {
        detail::log(log_level::error, "{} to {}: curl_easy_init failed; not sending", options_.what,
                    url_);
        return;
    }
    answer a;
    configure(h, url_, options_, a, stopping_);
    constexpr std::chrono::milliseconds first_backoff{100};
    std::chrono::milliseconds backoff = first_backoff;
    std::minstd_rand random(std::random_device{}());
    bool failing = false;
    while (true) {
        item next;
        {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [this] { return stopping_.load() || !queue_.empty(); });
            if (stopping_) {
                return;
            }
            next = queue_.front();
        }
        const attempt result = post(h, *next.body, a, options_);
        if (result.result == outcome::stopped) {
            return;
        }
        if (result.result == outcome::retry) {
            failed_attempts_.fetch_add(1, std::memory_order_relaxed);
            if (!failing) {
                detail::log(log_level::warning, "{} to {} failed ({}); retrying", options_.what,
                            url_, result.reason);
                failing = true;
            }
            // Half the backoff, plus up to as much again at random: senders that failed
            // together do not retry together.
            const auto half = backoff.count() / 2;
            auto wait = std::chrono::milliseconds(
                half + std::uniform_int_distribution<std::int64_t>(0, half)(random));
            backoff = std::min(backoff * 2, std::max(options_.max_backoff, first_backoff));
            if (result.retry_after) {
                wait = std::max(wait, std::min<std::chrono::milliseconds>(
                                          *result.retry_after, options_.max_retry_after));
            }
            if (!sleep_for(wait)) {
                return;
            }
            continue;
        }
        backoff = first_backoff;
        if (result.result == outcome::sent) {
            sent_.fetch_add(1, std::memory_order_relaxed);
            if (failing) {
                detail::log(log_level::info, "{} to {} works again", options_.what, url_);
                failing = false;
            }
        } else {
            rejected_.fetch_add(1, std::memory_order_relaxed);
            detail::log(log_level::warning, "{} to {}: body rejected, dropped ({})", options_.what,
                        url_, result.reason);
        }
        const std::lock_guard lock(mutex_);
        if (!queue_.empty() && queue_.front().id == next.id) {
            queue_.pop_front();
        }
    }
}

}  // namespace xtel::push
