#include "node/remote_write.hpp"

#include <curl/curl.h>
#include <fmt/format.h>
#include <snappy.h>

#include <algorithm>
#include <charconv>
#include <random>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/log.hpp"
#include "exporters/prometheus/prometheus_text.hpp"
#include "prometheus_remote_write.pb.h"

namespace xtel::node {

namespace {

using metrics::metric_type;

/// v / 10^decimals as the double nearest the exact quotient, the value a scraper reads from the
/// text the exposition shows ("0.000450"), also past 2^53 where v itself is not a double.
double scaled(std::uint64_t v, std::uint8_t decimals) {
    if (decimals == 0) {
        return static_cast<double>(v);
    }
    std::string text;
    detail::append_scaled(text, v, decimals);
    double out = 0;
    std::from_chars(text.data(), text.data() + text.size(), out);
    return out;
}

/// Builds one series' labels, sorted by name as remote write requires.
class series_builder {
  public:
    series_builder(prompb::WriteRequest& request,
                   std::int64_t timestamp_ms,
                   std::span<const metrics::label> external)
        : request_(request), timestamp_ms_(timestamp_ms), external_(external) {}

    /// The labels every series of `f` in snapshot `snap` has, but __name__ and le, sorted once
    /// for all the lines of the series.
    void start(const metrics::snapshot& snap,
               const metrics::family_snapshot& f,
               const metrics::series& s) {
        base_.clear();
        for (const metrics::label& l : snap.labels) {
            base_.emplace_back(l.name, detail::to_valid_utf8(l.value));
        }
        const auto& names = f.spec.label_names;
        for (std::size_t i = 0; i < names.size() && i < s.label_values.size(); ++i) {
            base_.emplace_back(names[i], detail::to_valid_utf8(s.label_values[i]));
        }
        const std::size_t own = base_.size();
        for (const metrics::label& l : external_) {
            const auto mine = base_.begin() + static_cast<std::ptrdiff_t>(own);
            if (std::none_of(base_.begin(), mine,
                             [&](const auto& b) { return b.first == l.name; })) {
                base_.emplace_back(l.name, l.value);
            }
        }
        std::sort(base_.begin(), base_.end(),
                  [](const auto& a, const auto& b) { return a.first < b.first; });
    }

    /// Adds the series `name` (with `le` when not empty) with one sample.
    void add(const std::string& name, const std::string& le, double value) {
        prompb::TimeSeries& ts = *request_.add_timeseries();
        // base_ is sorted: __name__ and le go in where they sort, in one pass.
        bool name_added = false;
        bool le_added = le.empty();
        const auto put = [&ts](const std::string& n, const std::string& v) {
            prompb::Label& l = *ts.add_labels();
            l.set_name(n);
            l.set_value(v);
        };
        for (const auto& [n, v] : base_) {
            if (!name_added && std::string_view("__name__") < n) {
                put("__name__", name);
                name_added = true;
            }
            if (!le_added && std::string_view("le") < n) {
                put("le", le);
                le_added = true;
            }
            put(n, v);
        }
        if (!name_added) {
            put("__name__", name);
        }
        if (!le_added) {
            put("le", le);
        }
        prompb::Sample& sample = *ts.add_samples();
        sample.set_value(value);
        sample.set_timestamp(timestamp_ms_);
    }

  private:
    prompb::WriteRequest& request_;
    std::int64_t timestamp_ms_;
    std::span<const metrics::label> external_;
    std::vector<std::pair<std::string, std::string>> base_;
};

void add_family(series_builder& out,
                const metrics::snapshot& snap,
                const metrics::family_snapshot& f) {
    const auto& spec = f.spec;
    std::vector<std::string> le;
    if (spec.type == metric_type::histogram) {
        for (const double b : spec.bounds) {
            le.push_back(detail::format_bound(b, spec.decimals));
        }
    }
    const std::string none;
    for (const metrics::series& s : f.series) {
        out.start(snap, f, s);
        switch (spec.type) {
            case metric_type::counter:
            case metric_type::gauge:
                out.add(spec.name, none, scaled(s.value, spec.decimals));
                break;
            case metric_type::histogram: {
                const std::string bucket = spec.name + "_bucket";
                std::uint64_t cumulative = 0;
                for (std::size_t i = 0; i < le.size() && i < s.buckets.size(); ++i) {
                    cumulative += s.buckets[i];
                    out.add(bucket, le[i], static_cast<double>(cumulative));
                }
                out.add(bucket, "+Inf", static_cast<double>(s.count));
                [[fallthrough]];
            }
            case metric_type::summary:
                out.add(spec.name + "_sum", none, scaled(s.sum, spec.decimals));
                out.add(spec.name + "_count", none, static_cast<double>(s.count));
                break;
        }
    }
}

}  // namespace

std::string encode_write_request(
    std::span<const std::shared_ptr<const metrics::snapshot>> snapshots,
    std::int64_t timestamp_ms,
    std::span<const metrics::label> external_labels) {
    prompb::WriteRequest request;
    series_builder out(request, timestamp_ms, external_labels);
    // A name is one family of one type: the first snapshot's that has it, as a scrape shows.
    std::unordered_map<std::string_view, metric_type> types;
    for (const auto& snap : snapshots) {
        for (const metrics::family_snapshot& f : snap->families) {
            const auto [at, added] = types.emplace(f.spec.name, f.spec.type);
            if (added || at->second == f.spec.type) {
                add_family(out, *snap, f);
            }
        }
    }
    const std::string serialized = request.SerializeAsString();
    std::string compressed;
    snappy::Compress(serialized.data(), serialized.size(), &compressed);
    return compressed;
}

namespace {

enum class outcome { sent, retry, rejected, stopped };

/// One POST's result: what to do with the body, and why in words when not sent.
struct attempt {
    outcome result;
    std::string reason;
};

void init_curl_once() {
    static const CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);
    if (rc != CURLE_OK) {
        throw remote_write_error(
            fmt::format("remote write: curl_global_init failed: {}", curl_easy_strerror(rc)));
    }
}

std::size_t keep_answer(char* data, std::size_t size, std::size_t n, void* out) {
    auto& answer = *static_cast<std::string*>(out);
    const std::size_t bytes = size * n;
    constexpr std::size_t kept = 512;  // enough for the receiver's reason
    answer.append(data, std::min(bytes, kept - std::min(kept, answer.size())));
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

/// The handle every POST of one writer reuses (so its connection is kept alive).
void configure(curl_handle& h,
               const std::string& url,
               const remote_write_options& o,
               std::string& answer,
               const std::atomic<bool>& stopping) {
    for (const char* header : {"Content-Encoding: snappy", "Content-Type: application/x-protobuf",
                               "X-Prometheus-Remote-Write-Version: 0.1.0"}) {
        h.headers = curl_slist_append(h.headers, header);
    }
    CURL* c = h.easy;
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h.headers);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "xtel-exporter/" XTEL_VERSION_STRING);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(o.timeout.count()));
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(o.timeout.count()));
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, keep_answer);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &answer);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, abort_when_stopping);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, const_cast<std::atomic<bool>*>(&stopping));
}

attempt post(curl_handle& h, const std::string& body, std::string& answer) {
    answer.clear();
    curl_easy_setopt(h.easy, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(h.easy, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    const CURLcode rc = curl_easy_perform(h.easy);
    if (rc == CURLE_ABORTED_BY_CALLBACK) {
        return {outcome::stopped, {}};
    }
    if (rc != CURLE_OK) {
        return {outcome::retry, curl_easy_strerror(rc)};
    }
    long status = 0;
    curl_easy_getinfo(h.easy, CURLINFO_RESPONSE_CODE, &status);
    if (status >= 200 && status < 300) {
        return {outcome::sent, {}};
    }
    const std::string reason = fmt::format("HTTP {}: {}", status, answer);
    if (status == 429 || status >= 500) {
        return {outcome::retry, reason};
    }
    return {outcome::rejected, reason};
}

}  // namespace

remote_writer::remote_writer(std::string url, remote_write_options o)
    : url_(std::move(url)), options_(o) {
    if (!url_.starts_with("http://") && !url_.starts_with("https://")) {
        throw remote_write_error(
            fmt::format("remote write: url \"{}\" is not an http:// or https:// URL", url_));
    }
    if (options_.queue_capacity == 0) {
        throw remote_write_error("remote write: queue_capacity 0; at least 1 body must fit");
    }
    init_curl_once();
    thread_ = std::thread([this] { run(); });
}

remote_writer::~remote_writer() {
    {
        const std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
}

void remote_writer::push(std::string compressed_body) {
    {
        const std::lock_guard lock(mutex_);
        if (queue_.size() >= options_.queue_capacity) {
            queue_.pop_front();
            dropped_.fetch_add(1, std::memory_order_relaxed);
        }
        queue_.push_back(
            {next_id_++, std::make_shared<const std::string>(std::move(compressed_body))});
    }
    wake_.notify_all();
}

std::size_t remote_writer::queued() const {
    const std::lock_guard lock(mutex_);
    return queue_.size();
}

bool remote_writer::sleep_for(std::chrono::milliseconds d) {
    std::unique_lock lock(mutex_);
    return !wake_.wait_for(lock, d, [this] { return stopping_.load(); });
}

void remote_writer::run() {
    curl_handle h;
    if (h.easy == nullptr) {
        detail::log(log_level::error, "remote write to {}: curl_easy_init failed; not sending",
                    url_);
        return;
    }
    std::string answer;
    configure(h, url_, options_, answer, stopping_);
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
        const attempt a = post(h, *next.body, answer);
        if (a.result == outcome::stopped) {
            return;
        }
        if (a.result == outcome::retry) {
            failed_attempts_.fetch_add(1, std::memory_order_relaxed);
            if (!failing) {
                detail::log(log_level::warning, "remote write to {} failed ({}); retrying", url_,
                            a.reason);
                failing = true;
            }
            // Half the backoff, plus up to as much again at random: writers that failed
            // together do not retry together.
            const auto half = backoff.count() / 2;
            const auto wait = std::chrono::milliseconds(
                half + std::uniform_int_distribution<std::int64_t>(0, half)(random));
            backoff = std::min(backoff * 2, std::max(options_.max_backoff, first_backoff));
            if (!sleep_for(wait)) {
                return;
            }
            continue;
        }
        backoff = first_backoff;
        if (a.result == outcome::sent) {
            sent_.fetch_add(1, std::memory_order_relaxed);
            if (failing) {
                detail::log(log_level::info, "remote write to {} works again", url_);
                failing = false;
            }
        } else {
            rejected_.fetch_add(1, std::memory_order_relaxed);
            detail::log(log_level::warning, "remote write to {}: body rejected, dropped ({})", url_,
                        a.reason);
        }
        const std::lock_guard lock(mutex_);
        if (!queue_.empty() && queue_.front().id == next.id) {
            queue_.pop_front();
        }
    }
}

}  // namespace xtel::node
