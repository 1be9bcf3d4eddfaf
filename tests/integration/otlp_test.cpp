// xtel-exporter's OTLP push, with real processes only: xfer_demo agents publish node files
// (NIXL_TELEMETRY_EXPORTER=node), xtel-exporter pushes what it reads, and a receiver decodes it
// with the OpenTelemetry JS project's generated protobuf definitions (tests/otlp/receiver.js),
// not with anything of ours. Every value checked is the exact number of bytes the demos were
// told to write.

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "native_snapshot.hpp"
#include "otlp_receiver.hpp"
#include "prometheus_support.hpp"
#include "xtel/push/otlp.hpp"

namespace otlp_test {

using prom_it::child_process;
using prom_it::spawn_options;
using xtel_test::count_of;
using xtel_test::temp_dir;
using namespace std::chrono_literals;

namespace {

/// One line of the receiver's points.txt: the request's number, the kind, the metric's name
/// and every key=value field.
struct point {
    int seq = 0;
    std::string kind;
    std::string name;
    std::map<std::string, std::string> fields;

    const std::string& at(const std::string& key) const {
        static const std::string none;
        const auto it = fields.find(key);
        return it == fields.end() ? none : it->second;
    }
    std::uint64_t number(const std::string& key) const { return std::stoull(at(key)); }
};

std::vector<std::string> split(std::string_view s, char by) {
    std::vector<std::string> out;
    std::size_t start = 0;
    for (std::size_t at = s.find(by); at != std::string_view::npos; at = s.find(by, start)) {
        out.emplace_back(s.substr(start, at - start));
        start = at + 1;
    }
    out.emplace_back(s.substr(start));
    return out;
}

/// The OTLP receiver of tests/otlp, with the metric points it recorded.
class otlp_receiver : public otlp_it::receiver_process {
  public:
    using receiver_process::receiver_process;

    std::vector<point> points() const {
        std::vector<point> out;
        std::istringstream in(file("points.txt"));
        for (std::string line; std::getline(in, line);) {
            const auto cells = split(line, '\t');
            if (cells.size() < 3) {
                continue;
            }
            point p{std::stoi(cells[0]), cells[1], cells[2], {}};
            for (std::size_t i = 3; i < cells.size(); ++i) {
                const auto eq = cells[i].find('=');
                p.fields[cells[i].substr(0, eq)] =
                    eq == std::string::npos ? std::string() : cells[i].substr(eq + 1);
            }
            out.push_back(std::move(p));
        }
        return out;
    }
};

/// `name`'s points of `metric` for the agent whose xtel.agent.name is `agent`.
std::vector<point> of_agent(const std::vector<point>& all,
                            std::string_view metric,
                            std::string_view agent) {
    std::vector<point> out;
    const std::string mark = fmt::format("xtel.agent.name={}", agent);
    for (const point& p : all) {
        if (p.name == metric && p.at("resource").find(mark) != std::string::npos) {
            out.push_back(p);
        }
    }
    return out;
}

/// `metric`'s points whose resource's attributes contain `part`.
std::vector<point> of_resource(const std::vector<point>& all,
                               std::string_view metric,
                               std::string_view part) {
    std::vector<point> out;
    for (const point& p : all) {
        if (p.name == metric && p.at("resource").find(part) != std::string::npos) {
            out.push_back(p);
        }
    }
    return out;
}

/// The value of the last point of agent_tx_bytes_total the receiver has for `agent`.
std::optional<std::uint64_t> last_tx(const otlp_receiver& r, std::string_view agent) {
    const auto p = of_agent(r.points(), "agent_tx_bytes_total", agent);
    if (p.empty()) {
        return std::nullopt;
    }
    return p.back().number("value");
}

template <class Done>
bool eventually(Done&& done, std::chrono::seconds timeout = 60s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done()) {
        if (std::chrono::steady_clock::now() > deadline) {
            return false;
        }
        std::this_thread::sleep_for(100ms);
    }
    return true;
}

/// xfer_demo publishing node files into `dir`: agents NAME-initiator and NAME-target, the
/// initiator writing `bytes` (once, or passes for `duration_s`), then lingering; with `env` set
/// too.
std::unique_ptr<child_process> start_demo(
    const std::filesystem::path& dir,
    const std::string& name,
    std::uint64_t bytes,
    int duration_s = 0,
    std::vector<std::pair<std::string, std::string>> env = {}) {
    spawn_options o;
    o.argv = {XTEL_XFER_DEMO,
              "--name",
              name,
              "--op",
              "write",
              "--total",
              std::to_string(bytes),
              "--block",
              "65536",
              "--duration",
              std::to_string(duration_s),
              "--linger",
              "300"};
    o.env = {{"NIXL_TELEMETRY_ENABLE", "y"},
             {"NIXL_TELEMETRY_METRIC_SET", "both"},
             {"NIXL_TELEMETRY_EXPORTER", "node"},
             {"NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", dir.string()},
             {"NIXL_TELEMETRY_RUN_INTERVAL", "50"}};
    o.env.insert(o.env.end(), env.begin(), env.end());
    auto p = std::make_unique<child_process>(o);
    INFO(p->output());
    REQUIRE(p->read_line("lingering for", 120s));
    return p;
}

/// xtel-exporter serving `dir` on a loopback port the system chooses, with `env` and `args`.
child_process start_exporter(const std::filesystem::path& dir,
                             std::vector<std::pair<std::string, std::string>> env,
                             std::vector<std::string> args) {
    spawn_options o;
    o.argv = {XTEL_EXPORTER, "--dir", dir.string(), "--listen", "127.0.0.1:0"};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.env = std::move(env);
    // The test's own environment may not turn OTLP on or off behind its back.
    o.unset = {"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
               "OTEL_METRICS_EXPORTER",       "OTEL_SERVICE_NAME",
               "OTEL_RESOURCE_ATTRIBUTES",    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"};
    return child_process(o);
}

std::string host_name() {
    char name[256] = {};
    ::gethostname(name, sizeof name - 1);
    return name;
}

constexpr std::uint64_t bytes_a = 1048576;
constexpr std::uint64_t bytes_b = 333333;

}  // namespace

TEST_CASE("xtel-exporter pushes each agent's exact bytes over OTLP in protobuf and JSON",
          "[otlp]") {
    temp_dir tmp;
    const auto shm = tmp.path() / "shm";
    std::filesystem::create_directories(shm);
    auto a = start_demo(shm, "a", bytes_a);
    auto b = start_demo(shm, "b", bytes_b);

    // Protobuf, gzip and headers from the OTEL_* variables; JSON from the flags.
    otlp_receiver proto_receiver(tmp.path() / "proto");
    otlp_receiver json_receiver(tmp.path() / "json");
    auto by_env = start_exporter(
        shm,
        {{"OTEL_EXPORTER_OTLP_ENDPOINT", proto_receiver.endpoint()},
         // The endpoint turns traces on too, and a demo's slow transfer would be a span POSTed
         // to /v1/traces, which this receiver refuses (exporter_traces_test.cpp tests traces).
         {"OTEL_TRACES_EXPORTER", "none"},
         {"OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=team%207,authorization=Bearer abc"},
         {"OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"},
         {"OTEL_METRIC_EXPORT_INTERVAL", "1000"},
         {"OTEL_SERVICE_NAME", "inference"},
         {"OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test"}},
        {});
    auto by_flags = start_exporter(shm, {},
                                   {"--otlp-endpoint", json_receiver.endpoint(), "--otlp-protocol",
                                    "http/json", "--otlp-interval", "1"});

    for (const otlp_receiver* r : {&proto_receiver, &json_receiver}) {
        INFO("points: " << r->file("points.txt") << "\nerrors: " << r->file("errors.txt"));
        REQUIRE(eventually([&] {
            return last_tx(*r, "a-initiator") == bytes_a && last_tx(*r, "b-initiator") == bytes_b;
        }));
        const auto all = r->points();
        const auto tx = of_agent(all, "agent_tx_bytes_total", "a-initiator").back();
        CHECK(tx.kind == "sum");
        CHECK(tx.at("monotonic") == "1");
        CHECK(tx.at("temporality") == "2");
        CHECK(tx.at("type") == "int");
        CHECK(tx.at("scope") == "xtel");
        // The agent's start (its node file's), before the point's time.
        CHECK(tx.number("start") > 1'700'000'000'000'000'000);
        CHECK(tx.number("start") < tx.number("time"));
        const std::string& res = tx.at("resource");
        CHECK(res.find(fmt::format("process.pid={},", a->pid())) != std::string::npos);
        CHECK(res.find(fmt::format("host.name={},", host_name())) != std::string::npos);
        CHECK(res.find(fmt::format("service.instance.id={}:a-initiator,", host_name())) !=
              std::string::npos);
        // Both initiators moved what they were told, and nothing else did.
        CHECK(of_agent(all, "agent_tx_bytes_total", "a-target").back().number("value") == 0);
        CHECK(of_agent(all, "agent_tx_requests_num_total", "a-initiator").back().number("value") ==
              16);
        CHECK(of_agent(all, "agent_tx_requests_num_total", "b-initiator").back().number("value") ==
              6);
        // Each transfer's latency: an explicit-bucket histogram in seconds, its buckets adding
        // up to the transfers, with the request ids xfer_demo tagged them with as exemplars.
        const auto lat = of_agent(all, "xtel_transfer_duration_seconds", "a-initiator");
        REQUIRE_FALSE(lat.empty());
        const point& h = lat.back();
        CHECK(h.kind == "histogram");
        CHECK(h.at("unit") == "s");
        CHECK(h.at("temporality") == "2");
        CHECK(h.at("attrs") == "operation=write,remote_agent=a-target");
        CHECK(h.number("count") == 16);
        std::uint64_t in_buckets = 0;
        const auto buckets = split(h.at("buckets"), ',');
        for (const std::string& c : buckets) {
            in_buckets += std::stoull(c);
        }
        CHECK(in_buckets == 16);
        CHECK(buckets.size() == split(h.at("bounds"), ',').size() + 1);
        CHECK(h.at("bounds").starts_with("0.00001,0.000025,"));
        CHECK(count_of(h.at("exemplars"), "/request_id=req-") >= 1);
        // The exporter's own resource, with its health: the four agents served.
        const auto own =
            of_resource(all, "xtel_exporter_agents",
                        fmt::format("service.instance.id={}:xtel-exporter,", host_name()));
        REQUIRE_FALSE(own.empty());
        CHECK(own.back().number("value") == 4);
        CHECK(r->file("errors.txt").empty());
    }
    const auto proto = proto_receiver.points();
    CHECK(of_agent(proto, "agent_tx_bytes_total", "b-initiator")
              .back()
              .at("resource")
              .find("deployment.environment=test,") != std::string::npos);
    CHECK(of_agent(proto, "agent_tx_bytes_total", "b-initiator")
              .back()
              .at("resource")
              .find("service.name=inference,") != std::string::npos);
    CHECK(of_agent(json_receiver.points(), "agent_tx_bytes_total", "b-initiator")
              .back()
              .at("resource")
              .find("service.name=xtel,") != std::string::npos);

    const std::string requests = proto_receiver.file("requests.jsonl");
    CHECK(count_of(requests, R"("encoding":"protobuf","gzip":true)") > 0);
    CHECK(count_of(requests, R"("x-tenant":"team 7")") > 0);
    CHECK(count_of(requests, R"("authorization":"Bearer abc")") > 0);
    CHECK(count_of(json_receiver.file("requests.jsonl"), R"("encoding":"json","gzip":false)") > 0);
}

namespace {

/// The value of `family` (no labels) in the exporter's /metrics; 0 when absent.
std::uint64_t health(int port, std::string_view family) {
    const auto v = prom_it::value_of(prom_it::scrape(port), std::string(family) + " ");
    return v ? std::stoull(*v) : 0;
}

}  // namespace

TEST_CASE("an OTLP receiver that starts late gets the exact cumulative values", "[otlp]") {
    temp_dir tmp;
    const auto shm = tmp.path() / "shm";
    std::filesystem::create_directories(shm);
    auto a = start_demo(shm, "late", bytes_a);
    const int port = prom_it::free_port();
    auto exporter = start_exporter(
        shm, {},
        {"--otlp-endpoint", fmt::format("http://127.0.0.1:{}", port), "--otlp-interval", "1"});
    const int exporter_port = prom_it::served_port(exporter);
    REQUIRE(exporter_port > 0);
    // Nobody listens yet: exports fail and queue, and scrapes are still served.
    REQUIRE(eventually([&] {
        return health(exporter_port, "xtel_exporter_otlp_failed_attempts_total") >= 2 &&
               health(exporter_port, "xtel_exporter_otlp_requests_queued") >= 2;
    }));
    CHECK(health(exporter_port, "xtel_exporter_otlp_requests_sent_total") == 0);

    otlp_receiver late(tmp.path() / "late", port);
    INFO("points: " << late.file("points.txt"));
    REQUIRE(eventually([&] { return last_tx(late, "late-initiator") == bytes_a; }));
    REQUIRE(eventually([&] {
        return health(exporter_port, "xtel_exporter_otlp_requests_sent_total") >= 2 &&
               health(exporter_port, "xtel_exporter_otlp_requests_queued") <= 1;
    }));
    // What was queued while it was down arrived too, in order, each exact.
    const auto tx = of_agent(late.points(), "agent_tx_bytes_total", "late-initiator");
    CHECK(tx.size() >= 2);
    for (std::size_t i = 0; i < tx.size(); ++i) {
        CHECK(tx[i].number("value") == bytes_a);
        if (i > 0) {
            CHECK(tx[i].number("time") > tx[i - 1].number("time"));
        }
    }
    CHECK(health(exporter_port, "xtel_exporter_otlp_requests_dropped_total") == 0);
}

TEST_CASE("delta OTLP through 503s then 200 sends every byte once in contiguous intervals",
          "[otlp]") {
    temp_dir tmp;
    const auto shm = tmp.path() / "shm";
    std::filesystem::create_directories(shm);
    otlp_receiver busy(tmp.path() / "busy", 0, {"--fail", "3", "--retry-after", "1"});
    auto exporter = start_exporter(
        shm, {{"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "delta"}},
        {"--otlp-endpoint", busy.endpoint(), "--otlp-interval", "1", "--otlp-compression", "gzip"});
    const int exporter_port = prom_it::served_port(exporter);
    REQUIRE(exporter_port > 0);
    // Passes for 3 s while the exporter pushes every second: the bytes spread over exports.
    auto d = start_demo(shm, "delta", bytes_a, 3);
    // The demo's own account: "initiator: N passes in S s, R bytes read, W written, ...";
    // the last pass may have stopped part-way at --duration, so W, not N passes of bytes_a.
    const std::string& out = d->output();
    const auto passes_at = out.find(" passes in ");
    REQUIRE(passes_at != std::string::npos);
    const auto at = out.rfind("initiator: ", passes_at);
    REQUIRE(at != std::string::npos);
    const std::uint64_t passes = std::stoull(out.substr(at + 11, passes_at - at - 11));
    const auto read_at = out.find(" bytes read, ", passes_at);
    REQUIRE(read_at != std::string::npos);
    const std::uint64_t total = std::stoull(out.substr(read_at + 13));
    CHECK(passes >= 2);
    CHECK(total >= (passes - 1) * bytes_a);
    INFO("points: " << busy.file("points.txt") << "\nattempts: " << busy.file("attempts.txt"));
    std::vector<point> tx;
    REQUIRE(eventually([&] {
        tx = of_agent(busy.points(), "agent_tx_bytes_total", "delta-initiator");
        std::uint64_t sum = 0;
        for (const point& p : tx) {
            sum += p.number("value");
        }
        return sum == total;
    }));
    CHECK(tx.size() >= 2);
    for (std::size_t i = 0; i < tx.size(); ++i) {
        CHECK(tx[i].at("temporality") == "1");
        // Each interval starts where the previous ended: no gap, no overlap.
        if (i > 0) {
            CHECK(tx[i].number("start") == tx[i - 1].number("time"));
        }
    }
    // The three 503s were retried, not dropped.
    CHECK(count_of(busy.file("attempts.txt"), "\t503\t") == 3);
    CHECK(health(exporter_port, "xtel_exporter_otlp_failed_attempts_total") == 3);
    CHECK(health(exporter_port, "xtel_exporter_otlp_requests_dropped_total") == 0);
    // The transfer counter too: every pass's transfers, once.
    std::uint64_t transfers = 0;
    for (const point& p :
         of_agent(busy.points(), "agent_tx_requests_num_total", "delta-initiator")) {
        transfers += p.number("value");
    }
    CHECK(transfers == total / 65536);
}

TEST_CASE("OpenTelemetry's decoder reads a native histogram's exponential point in both encodings",
          "[otlp]") {
    temp_dir tmp;
    // Until node files carry native buckets (snapshot codec v3), from a store in this process.
    const auto store = xtel_test::native_store("xtel_otlp_native_seconds");
    const std::vector<std::shared_ptr<const xtel::metrics::snapshot>> snaps{
        xtel_test::native_snapshot(store, 1'700'000'000'000'000)};
    // Buckets -88 (2), -79 (2) and 13 (1) of schema 3 are OTLP's -89, -80 and 12: 102 wide.
    std::string positive = "-89:2";
    for (int i = 1; i < 102; ++i) {
        positive += i == 9 ? ",2" : i == 101 ? ",1" : ",0";
    }
    for (const auto encoding :
         {xtel::push::otlp_encoding::protobuf, xtel::push::otlp_encoding::json}) {
        const bool json = encoding == xtel::push::otlp_encoding::json;
        otlp_receiver r(tmp.path() / (json ? "json" : "proto"));
        xtel::push::otlp_pusher pusher({.url = r.endpoint() + "/v1/metrics",
                                        .encoding = encoding,
                                        .resource = {"inference", "node-7", {}}});
        pusher.push(snaps, 1'700'000'010'000'000'000);
        INFO("encoding " << (json ? "json" : "protobuf") << "\npoints: " << r.file("points.txt")
                         << "\nerrors: " << r.file("errors.txt"));
        REQUIRE(eventually([&] { return !r.points().empty(); }, 30s));
        const auto p = of_agent(r.points(), "xtel_otlp_native_seconds", "a");
        REQUIRE(p.size() == 1);
        CHECK(p[0].kind == "exponential_histogram");
        CHECK(p[0].at("unit") == "s");
        CHECK(p[0].at("temporality") == "2");
        CHECK(p[0].at("attrs") == "op=write");
        CHECK(p[0].at("start") == "1700000000000000000");
        CHECK(p[0].at("time") == "1700000010000000000");
        CHECK(p[0].at("count") == "6");
        CHECK(p[0].at("sum") == "3.00291");
        CHECK(p[0].at("scale") == "3");
        CHECK(p[0].at("zero_count") == "1");
        CHECK(p[0].at("positive") == positive);
        CHECK(p[0].at("negative") == "0:");
        // The zero threshold is in the whole request only.
        CHECK(count_of(r.file("requests.jsonl"), R"("zeroThreshold":2.938735877055719e-39)") == 1);
    }
}

TEST_CASE("xtel-exporter pushes an agent's native latency histogram as an exponential one",
          "[otlp]") {
    temp_dir tmp;
    const auto shm = tmp.path() / "shm";
    std::filesystem::create_directories(shm);
    // 1 MiB in 64 KiB blocks: 16 transfers, each one observation.
    auto a = start_demo(shm, "n", bytes_a, 0, {{"NIXL_TELEMETRY_HISTOGRAM_KIND", "native"}});
    otlp_receiver proto_receiver(tmp.path() / "proto");
    otlp_receiver json_receiver(tmp.path() / "json");
    auto by_env = start_exporter(shm,
                                 {{"OTEL_EXPORTER_OTLP_ENDPOINT", proto_receiver.endpoint()},
                                  {"OTEL_TRACES_EXPORTER", "none"},
                                  {"OTEL_METRIC_EXPORT_INTERVAL", "1000"}},
                                 {});
    auto by_flags = start_exporter(shm, {},
                                   {"--otlp-endpoint", json_receiver.endpoint(), "--otlp-protocol",
                                    "http/json", "--otlp-interval", "1"});
    for (const otlp_receiver* r : {&proto_receiver, &json_receiver}) {
        INFO("points: " << r->file("points.txt") << "\nerrors: " << r->file("errors.txt"));
        const auto latency = [&] {
            return of_agent(r->points(), "xtel_transfer_duration_seconds", "n-initiator");
        };
        REQUIRE(eventually([&] {
            const auto p = latency();
            return !p.empty() && p.back().number("count") == 16;
        }));
        const point h = latency().back();
        CHECK(h.kind == "exponential_histogram");
        CHECK(h.at("unit") == "s");
        CHECK(h.at("attrs") == "operation=write,remote_agent=n-target");
        // Schema 3 unless the transfers' spread made the agent lower it.
        const int scale = std::stoi(h.at("scale"));
        CHECK(scale <= 3);
        CHECK(scale >= -4);
        // Every transfer in one bucket, none in the zero bucket (no transfer takes 0 µs), none
        // negative.
        const std::string positive = h.at("positive");
        std::uint64_t in_buckets = 0;
        for (const std::string& c : split(positive.substr(positive.find(':') + 1), ',')) {
            in_buckets += std::stoull(c);
        }
        CHECK(in_buckets + h.number("zero_count") == 16);
        CHECK(h.at("negative") == "0:");
        CHECK(std::stod(h.at("sum")) > 0);
        CHECK(count_of(h.at("exemplars"), "/request_id=req-") >= 1);
        CHECK(r->file("errors.txt").empty());
    }
    // Both encodings carry the same point: the same buckets and sum.
    const auto p =
        of_agent(proto_receiver.points(), "xtel_transfer_duration_seconds", "n-initiator").back();
    const auto j =
        of_agent(json_receiver.points(), "xtel_transfer_duration_seconds", "n-initiator").back();
    CHECK(p.at("positive") == j.at("positive"));
    CHECK(p.at("sum") == j.at("sum"));
    CHECK(p.at("scale") == j.at("scale"));
}

}  // namespace otlp_test
