// UCX write loops between two agents in this process: the cost of telemetry measured where it
// lives, on real transfers.
//
//   BM_ucx_write/<block bytes>/<off|buffer|prometheus|prometheus_under_attack>
//   BM_ucx_write/<block bytes>/<off_paired|buffer_paired|prometheus_paired>
//   BM_ucx_write/<block bytes>/<prometheus_attack_paired|prometheus_scrape_paired>
//   BM_ucx_write/<block bytes>/node_traced_paired
//
// The plain cases run one loop each; their medians are compared across cases. On this small
// shared machine separate cases, seconds apart, differ by more than telemetry costs (runs of
// "off" alone spread over 80-120 ns per 4 KiB write), so the *_paired cases compare within one
// case: they alternate between the baseline and the measured side (every 50 ms; 100 ms under
// attack, so the hostile clients reconnect after each switch) and report the
// median ratio of each measured window to the baseline windows on either side of it, which saw
// the same load from the rest of the machine.
//   buffer_paired, prometheus_paired: initiators with telemetry off against initiators with
//     that exporter, writing the same bytes into the same target, alternately, on one thread.
//     All exist throughout, so flushers and endpoints run (idle) during the off windows too,
//     as they would in a deployment. Eight initiators a side take turns (see bm_ucx_write).
//   node_traced_paired: the same against the node exporter with tracing at its defaults
//     (NIXL_TELEMETRY_TRACE_*: slow 10 ms, 1% of traces, 1000 spans a second): each transfer
//     tagged with a request id of its own, so the timed ones stage their id and the flusher
//     decides and writes their spans (issue 31's cost).
//   off_paired: the same with telemetry off on both sides: the noise floor of the method (its
//     ratio would be 1 with perfect measurement).
//   clock1_floor_paired, clock2_floor_paired (4 KiB only): telemetry off on both sides, the
//     measured side reading the agent's clock (tsc_clock) once, or twice around the post as a
//     timed post does, and nothing else: the floor of timing every transfer with one or two
//     readings, against which buffer_timed_paired's cost splits into the clock and the rest.
//   handoff_floor_paired (4 KiB only): the same two readings, and the bytes, written into a
//     32-byte slot of a ring another thread drains (handoff_floor): the floor of handing every
//     transfer to another thread, which timing every transfer for an exporter of events (the
//     flight recorder keeps each transfer's times) cannot go under.
//   prometheus_attack_paired: one prometheus pair; hostile clients (hostile_clients.hpp) of its
//     endpoint are switched on and off.
//   prometheus_scrape_paired: one prometheus pair; a scraper (back_to_back_scraper, below)
//     asks its endpoint for /metrics as Prometheus does (OpenMetrics preferred, gzip), one
//     scrape after another on a kept-alive connection, in the measured windows, and waits in
//     the baseline ones (100 ms each). The scraper's own thread competes for the machine in
//     the measured windows, as the endpoint's does: on a machine this small that is part of
//     what a scrape costs the transfers beside it. Prometheus scrapes every 15 s by default;
//     back to back is the most one scraper can ask for. Most answers come from the endpoint's
//     cache: it renders and compresses again only after a snapshot changed (each flush round,
//     and its process metrics at most once a second).
//
// The target's memory is allocated by its agent, so UCX writes it directly over shared memory
// (as ucx_perftest does); each iteration posts one write of one block and waits for it. Real
// time is measured, so the flusher thread's share of the machine counts against telemetry.
// The agents run the deployment defaults (100 ms flushes, timing one transfer in 256).

#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench_util.hpp"
#include "hostile_clients.hpp"
#include "xtel/agent/agent.hpp"
#include "xtel/agent/basic_agent.hpp"
#include "xtel/core/log.hpp"
#include "xtel/core/tsc_clock.hpp"

namespace {

/// The floor of handing each transfer's readings to another thread, as a pipeline that times
/// every transfer must for an exporter of events: a single-producer ring of 32-byte slots (the
/// staging ring's size and capacity), written with the two readings, the bytes and the time,
/// and drained by a thread of its own every millisecond (xtel's flusher drains at half full or
/// every run interval). Nothing else: no attributes, no format, no exporter.
class handoff_floor {
  public:
    handoff_floor() : slots_(capacity), consumer_([this] { drain_until_stopped(); }) {}
    ~handoff_floor() {
        stop_.store(true, std::memory_order_relaxed);
        consumer_.join();
    }
    handoff_floor(const handoff_floor&) = delete;
    handoff_floor& operator=(const handoff_floor&) = delete;

    void push(std::uint64_t start, std::uint64_t end, std::uint64_t bytes) noexcept {
        const std::uint64_t head = head_.load(std::memory_order_relaxed);
        if (head - tail_cache_ == capacity) {
            tail_cache_ = tail_.load(std::memory_order_acquire);
            if (head - tail_cache_ == capacity) {
                ++dropped_;
                return;
            }
        }
        slot& s = slots_[head & (capacity - 1)];
        s = {start, end, bytes, head};
        head_.store(head + 1, std::memory_order_release);
    }

  private:
    static constexpr std::uint64_t capacity = 16384;
    struct slot {
        std::uint64_t start, end, bytes, seq;
    };
    static_assert(sizeof(slot) == 32);

    void drain_until_stopped() {
        std::uint64_t sum = 0;
        while (!stop_.load(std::memory_order_relaxed)) {
            const std::uint64_t head = head_.load(std::memory_order_acquire);
            std::uint64_t tail = tail_.load(std::memory_order_relaxed);
            for (; tail < head; ++tail) {
                const slot& s = slots_[tail & (capacity - 1)];
                sum += s.end - s.start + s.bytes + s.seq;
            }
            tail_.store(tail, std::memory_order_release);
            benchmark::DoNotOptimize(sum);
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
    }

    std::vector<slot> slots_;
    alignas(64) std::atomic<std::uint64_t> head_{0};
    std::uint64_t tail_cache_ = 0;
    std::uint64_t dropped_ = 0;
    alignas(64) std::atomic<std::uint64_t> tail_{0};
    std::atomic<bool> stop_{false};
    std::thread consumer_;
};

/// Blocks the loop cycles through, so that consecutive writes touch different lines.
constexpr std::uint64_t blocks = 64;
/// Initiators a side in the cases against off.
constexpr std::size_t instances = 8;

/// CPU seconds the endpoint's thread ("xtel-metrics") has used; 0 when there is none.
double endpoint_cpu_seconds() {
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
        std::ifstream comm(task.path() / "comm");
        std::string name;
        std::getline(comm, name);
        if (name != "xtel-metrics") {
            continue;
        }
        std::ifstream stat(task.path() / "stat");
        std::string line;
        std::getline(stat, line);
        // Fields after the ")" that ends the name: state is the 3rd field, utime the 14th.
        std::istringstream rest(line.substr(line.rfind(')') + 2));
        std::string field;
        double ticks = 0;
        for (int i = 3; i <= 15 && rest >> field; ++i) {
            if (i >= 14) {
                ticks += std::stod(field);
            }
        }
        return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
    }
    return 0;
}

/// Scrapes /metrics at 127.0.0.1:`port` on a thread of its own, one scrape after another while
/// active, as Prometheus would ask (its Accept and Accept-Encoding headers), on one kept-alive
/// connection opened again whenever the endpoint closes it. Each answer is read whole, by its
/// Content-Length, and neither inflated nor parsed. Paused, it finishes the scrape in flight
/// and then waits, keeping its connection.
class back_to_back_scraper {
  public:
    explicit back_to_back_scraper(std::uint16_t port) : port_(port), thread_([this] { run(); }) {}
    ~back_to_back_scraper() { stop(); }
    back_to_back_scraper(const back_to_back_scraper&) = delete;
    back_to_back_scraper& operator=(const back_to_back_scraper&) = delete;

    /// Resumes (true) or pauses (false) scraping; it starts paused.
    void set_active(bool on) {
        active_.store(on);
        active_.notify_one();
    }

    /// Stops scraping and waits for the thread.
    void stop() {
        if (thread_.joinable()) {
            stop_ = true;
            set_active(true);  // wakes it if paused
            thread_.join();
        }
    }

    /// Answers 200 received.
    std::uint64_t ok() const { return ok_.load(); }
    /// Answers other than 200, and scrapes lost to a socket error, a timeout or a refusal.
    std::uint64_t failed() const { return failed_.load(); }
    /// Answers 200 that were not gzip-compressed.
    std::uint64_t not_gzip() const { return not_gzip_.load(); }
    /// Body bytes (as sent, compressed) of the answers 200.
    std::uint64_t body_bytes() const { return body_bytes_.load(); }
    /// Read after stop(): the thread's CPU seconds, how long it ran, and how long of that it
    /// was active.
    double cpu_seconds() const { return cpu_seconds_; }
    double seconds_running() const { return seconds_running_; }
    double seconds_active() const { return seconds_active_; }

  private:
    using clock = std::chrono::steady_clock;

    int connect_to() const {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            return -1;
        }
        // Blocking, with a deadline, so that a stalled endpoint counts as a failure.
        const timeval timeout{2, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
        ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port_);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
            ::close(fd);
            return -1;
        }
        return fd;
    }

    struct outcome {
        bool ok = false;    // 200, read whole
        bool keep = false;  // the connection can carry the next scrape
    };

    /// One GET on `fd`, its answer read whole.
    outcome scrape(int fd) {
        static constexpr std::string_view request =
            "GET /metrics HTTP/1.1\r\n"
            "Host: 127.0.0.1\r\n"
            "User-Agent: Prometheus/2.42.0\r\n"
            "Accept: application/openmetrics-text;version=1.0.0,application/"
            "openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\n"
            "Accept-Encoding: gzip\r\n"
            "X-Prometheus-Scrape-Timeout-Seconds: 10\r\n"
            "\r\n";
        for (std::size_t sent = 0; sent < request.size();) {
            const ssize_t n =
                ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
            if (n <= 0) {
                return {};
            }
            sent += static_cast<std::size_t>(n);
        }
        // The head, and whatever of the body came with it.
        head_.clear();
        std::size_t end = std::string::npos;
        while (end == std::string::npos) {
            const ssize_t n = ::recv(fd, buf_.data(), buf_.size(), 0);
            if (n <= 0) {
                return {};
            }
            head_.append(buf_.data(), static_cast<std::size_t>(n));
            end = head_.find("\r\n\r\n");
        }
        std::uint64_t have = head_.size() - (end + 4);
        head_.resize(end + 2);  // each header line ends in CRLF
        std::transform(head_.begin(), head_.end(), head_.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        const auto header = [&](std::string_view name) -> std::string_view {
            const std::size_t at = head_.find("\r\n" + std::string(name) + ":");
            if (at == std::string::npos) {
                return {};
            }
            const std::size_t from = at + 2 + name.size() + 1;
            std::string_view v(head_.data() + from, head_.find("\r\n", from) - from);
            while (!v.empty() && v.front() == ' ') {
                v.remove_prefix(1);
            }
            return v;
        };
        const std::string_view length = header("content-length");
        if (length.empty()) {
            return {};  // the endpoint always says how long its answers are
        }
        const std::uint64_t body = std::stoull(std::string(length));
        while (have < body) {
            const ssize_t n =
                ::recv(fd, buf_.data(), std::min<std::uint64_t>(buf_.size(), body - have), 0);
            if (n <= 0) {
                return {};
            }
            have += static_cast<std::uint64_t>(n);
        }
        const bool ok = head_.starts_with("http/1.1 200 ");
        if (ok) {
            body_bytes_ += body;
            if (header("content-encoding") != "gzip") {
                ++not_gzip_;
            }
        }
        return {ok, header("connection") != "close"};
    }

    void run() {
        const auto started = clock::now();
        clock::duration active{};
        int fd = -1;
        while (!stop_) {
            active_.wait(false);
            const auto resumed = clock::now();
            while (!stop_ && active_.load(std::memory_order_relaxed)) {
                if (fd < 0 && (fd = connect_to()) < 0) {
                    ++failed_;
                    std::this_thread::sleep_for(std::chrono::milliseconds(1));
                    continue;
                }
                const outcome o = scrape(fd);
                ++(o.ok ? ok_ : failed_);
                if (!o.keep) {
                    ::close(fd);
                    fd = -1;
                }
            }
            active += clock::now() - resumed;
        }
        if (fd >= 0) {
            ::close(fd);
        }
        timespec cpu{};
        ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
        cpu_seconds_ = static_cast<double>(cpu.tv_sec) + static_cast<double>(cpu.tv_nsec) / 1e9;
        seconds_running_ = std::chrono::duration<double>(clock::now() - started).count();
        seconds_active_ = std::chrono::duration<double>(active).count();
    }

    const std::uint16_t port_;
    std::atomic<bool> stop_{false};
    std::atomic<bool> active_{false};
    std::atomic<std::uint64_t> ok_{0};
    std::atomic<std::uint64_t> failed_{0};
    std::atomic<std::uint64_t> not_gzip_{0};
    std::atomic<std::uint64_t> body_bytes_{0};
    std::string head_;
    std::vector<char> buf_ = std::vector<char>(65536);
    double cpu_seconds_ = 0;
    double seconds_running_ = 0;
    double seconds_active_ = 0;
    std::thread thread_;  // last: the members above exist before it runs
};

/// The agents' configuration: `exporter` empty means telemetry off. The deployment defaults
/// otherwise; NIXL_TELEMETRY_RUN_INTERVAL and NIXL_TELEMETRY_TIMING_SAMPLE are taken from the
/// environment when set, so `NIXL_TELEMETRY_TIMING_SAMPLE=1 scripts/bench ...` shows what
/// timing every transfer costs.
/// `timing_sample`, when given, replaces the environment's NIXL_TELEMETRY_TIMING_SAMPLE.
xtel::config bench_config(const std::string& exporter,
                          const std::filesystem::path& dir,
                          std::optional<std::string> timing_sample = std::nullopt) {
    const std::string out = dir.string();
    xtel::config cfg =
        xtel::config::from_env([&](std::string_view var) -> std::optional<std::string> {
            if (var == xtel::env::enable) {
                return exporter.empty() ? "n" : "y";
            }
            if (var == xtel::env::exporter) {
                return exporter.empty() ? "buffer" : exporter;
            }
            if (var == xtel::env::output_path && exporter != "prometheus") {
                return out;  // the flight recorder's directory (prometheus: its address, below)
            }
            if (var == xtel::env::timing_sample && timing_sample) {
                return timing_sample;
            }
            if (var == xtel::env::run_interval || var == xtel::env::timing_sample) {
                return xtel::process_env(var);
            }
            return std::nullopt;
        });
    if (exporter == "prometheus") {
        xtel::set_log_level(xtel::log_level::error);
        ::setenv(xtel::env::prometheus_address, "127.0.0.1:0", 1);
    }
    return cfg;
}

/// The target agent (telemetry off: it only progresses) with `blocks` blocks of its own memory,
/// and the source memory every initiator writes from.
class write_target {
  public:
    explicit write_target(std::uint64_t block)
        : block_(block), local_(blocks * block, std::byte{1}) {
        agent_ = xtel::make_agent("bench_target", bench_config("", dir_.path()));
        if (!agent_->allocate_memory(blocks * block, remote_).ok() ||
            !agent_->export_metadata(blob_).ok()) {
            error_ = "target set-up failed";
        }
    }

    const std::string& error() const { return error_; }
    xtel::agent& agent() { return *agent_; }
    std::uint64_t block() const { return block_; }
    const xtel::descriptor& remote() const { return remote_; }
    const std::vector<std::byte>& blob() const { return blob_; }
    xtel::descriptor local() { return xtel::descriptor::dram(local_.data(), local_.size()); }

  private:
    xtel_bench::scratch_dir dir_;
    std::uint64_t block_;
    std::vector<std::byte> local_;
    std::unique_ptr<xtel::agent> agent_;
    xtel::descriptor remote_;
    std::vector<std::byte> blob_;
    std::string error_;
};

/// An initiator agent with `blocks` prepared writes of one block each into the target, from
/// the target's shared source memory: initiators compared with each other move the very same
/// bytes between the very same addresses, and differ only in their telemetry.
class write_loop {
  public:
    /// `exporter` empty: telemetry off. `timing_sample`: as bench_config's.
    /// `tagged`: each transfer carries a request id of its own (req-<tag>-<n>).
    /// `clock_readings` (0, 1 or 2): readings of the agent's clock each step takes itself, one
    /// before the post, the second after it; 3: two, handed to another thread with the bytes
    /// (handoff_floor).
    write_loop(write_target& target,
               const std::string& tag,
               const std::string& exporter,
               std::optional<std::string> timing_sample = std::nullopt,
               bool tagged = false,
               int clock_readings = 0)
        : target_(target),
          clock_readings_(clock_readings),
          handoff_(clock_readings == 3 ? std::make_unique<handoff_floor>() : nullptr) {
        initiator_ = xtel::make_agent("bench_initiator_" + tag,
                                      bench_config(exporter, dir_.path(), timing_sample));
        const xtel::descriptor local = target.local();
        std::string name;
        if (!initiator_->register_memory(local).ok() ||
            !initiator_->load_remote_metadata(target.blob(), name).ok()) {
            error_ = "initiator set-up failed";
            return;
        }
        const std::uint64_t block = target.block();
        handles_.resize(blocks);
        for (std::uint64_t b = 0; b < blocks; ++b) {
            const xtel::descriptor l{local.address + b * block, block};
            const xtel::descriptor r{target.remote().address + b * block, block};
            const std::string id = tagged ? "req-" + tag + "-" + std::to_string(b) : "";
            const xtel::status st =
                initiator_->create_transfer(xtel::transfer_op::write, std::span(&l, 1),
                                            std::span(&r, 1), name, handles_[b], {id});
            if (!st.ok()) {
                error_ = st.to_string();
                return;
            }
        }
    }

    ~write_loop() {
        for (const auto h : handles_) {
            (void)initiator_->release(h);
        }
    }

    write_loop(const write_loop&) = delete;
    write_loop& operator=(const write_loop&) = delete;

    /// Why set-up failed; empty when it did not.
    const std::string& error() const { return error_; }

    /// One write of one block, waited for.
    xtel::status step() {
        const xtel::transfer_handle h = handles_[next_++ & (blocks - 1)];
        xtel::status st;
        if (clock_readings_ == 0) [[likely]] {
            st = initiator_->post(h);
        } else {
            const std::uint64_t start = clock_.now();
            st = initiator_->post(h);
            if (handoff_ != nullptr) {
                handoff_->push(start, clock_.now(), target_.block());
            } else {
                readings_ += clock_readings_ == 2 ? clock_.now() - start : start;
                benchmark::DoNotOptimize(readings_);
            }
        }
        while (st.code() == xtel::status_code::in_progress) {
            target_.agent().progress();
            st = initiator_->poll(h);
        }
        return st;
    }

    xtel::agent& initiator() { return *initiator_; }

    /// Flushes and reports what the initiator's pipeline dropped.
    double dropped() {
        initiator_->flush_telemetry();
        return static_cast<double>(initiator_->stats().records_dropped);
    }

  private:
    xtel_bench::scratch_dir dir_;
    write_target& target_;
    std::unique_ptr<xtel::agent> initiator_;
    std::vector<xtel::transfer_handle> handles_;
    std::uint64_t next_ = 0;
    const int clock_readings_;
    std::unique_ptr<handoff_floor> handoff_;
    xtel::detail::tsc_clock clock_;
    std::uint64_t readings_ = 0;
    std::string error_;
};

/// Alternates between a baseline side and a measured side every `window` of steady time and
/// keeps each window's rate (iterations per second), leaving out its first `settle` (caches
/// and the switch itself). Call count() every iteration and due() every few.
class alternating_windows {
  public:
    using steady = std::chrono::steady_clock;

    alternating_windows(std::chrono::milliseconds window, std::chrono::milliseconds settle)
        : window_(window), settle_(settle), start_(steady::now()) {}

    bool measuring() const { return measuring_; }
    void count() { ++iterations_; }

    /// True when the side just switched (the caller switches what it runs).
    bool due() {
        const auto now = steady::now();
        if (now - start_ < settle_) {
            iterations_ = 0;
            return false;
        }
        if (now - start_ < window_) {
            return false;
        }
        const double seconds = std::chrono::duration<double>(now - start_ - settle_).count();
        windows_.push_back({measuring_, static_cast<double>(iterations_) / seconds});
        measuring_ = !measuring_;
        start_ = now;
        iterations_ = 0;
        return true;
    }

    /// Each measured window's rate over the mean of the baseline windows on either side,
    /// sorted.
    std::vector<double> ratios() const {
        std::vector<double> out;
        for (std::size_t i = 1; i + 1 < windows_.size(); ++i) {
            if (windows_[i].measured && !windows_[i - 1].measured && !windows_[i + 1].measured) {
                const double base = (windows_[i - 1].rate + windows_[i + 1].rate) / 2;
                if (base > 0) {
                    out.push_back(windows_[i].rate / base);
                }
            }
        }
        std::sort(out.begin(), out.end());
        return out;
    }

    /// Reports the ratios (bench_util.hpp's report_window_ratios): summarize.py pools a case's
    /// windows over its repetitions (its calibration runs too: they measure the same way).
    void report(benchmark::State& state,
                const std::string& case_name,
                const std::string& prefix) const {
        xtel_bench::report_window_ratios(state, case_name, prefix, ratios());
    }

  private:
    struct sample {
        bool measured;
        double rate;
    };
    std::chrono::milliseconds window_;
    std::chrono::milliseconds settle_;
    steady::time_point start_;
    std::uint64_t iterations_ = 0;
    bool measuring_ = false;
    std::vector<sample> windows_;
};

enum class mode {
    off,
    off_paired,
    buffer,
    prometheus,
    prometheus_under_attack,
    buffer_paired,
    prometheus_paired,
    prometheus_attack_paired,
    prometheus_scrape_paired,
    /// buffer_paired with every transfer timed (NIXL_TELEMETRY_TIMING_SAMPLE=1) instead of
    /// one in 256: what the sampling saves.
    buffer_timed_paired,
    /// Against off: the node exporter with tracing at its defaults, every transfer tagged.
    node_traced_paired,
    /// Against off: telemetry off, one or two clock readings per post and nothing else.
    clock1_floor_paired,
    clock2_floor_paired,
    /// Against off: two readings handed to another thread through a ring (handoff_floor).
    handoff_floor_paired
};

constexpr const char* mode_name(mode m) {
    switch (m) {
        case mode::off:
            return "off";
        case mode::off_paired:
            return "off_paired";
        case mode::buffer:
            return "buffer";
        case mode::prometheus:
            return "prometheus";
        case mode::prometheus_under_attack:
            return "prometheus_under_attack";
        case mode::buffer_paired:
            return "buffer_paired";
        case mode::prometheus_paired:
            return "prometheus_paired";
        case mode::prometheus_attack_paired:
            return "prometheus_attack_paired";
        case mode::prometheus_scrape_paired:
            return "prometheus_scrape_paired";
        case mode::buffer_timed_paired:
            return "buffer_timed_paired";
        case mode::node_traced_paired:
            return "node_traced_paired";
        case mode::clock1_floor_paired:
            return "clock1_floor_paired";
        case mode::clock2_floor_paired:
            return "clock2_floor_paired";
        case mode::handoff_floor_paired:
            return "handoff_floor_paired";
    }
    return "?";
}

/// A case's name: BM_ucx_write/<block bytes>/<mode> (Google Benchmark appends what it sets).
std::string case_name(std::uint64_t block, mode m) {
    return "BM_ucx_write/" + std::to_string(block) + "/" + mode_name(m);
}

/// The exporter of the loop a mode measures; empty: telemetry off.
std::string exporter_of(mode m) {
    switch (m) {
        case mode::off:
        case mode::off_paired:
        case mode::clock1_floor_paired:
        case mode::clock2_floor_paired:
        case mode::handoff_floor_paired:
            return "";
        case mode::buffer:
        case mode::buffer_paired:
        case mode::buffer_timed_paired:
            return "buffer";
        case mode::node_traced_paired:
            return "node";
        default:
            return "prometheus";
    }
}

void bm_ucx_write(benchmark::State& state, std::uint64_t block, mode m) {
    const bool prometheus = exporter_of(m) == "prometheus";
    const bool attacked = m == mode::prometheus_under_attack || m == mode::prometheus_attack_paired;
    const bool against_off = m == mode::off_paired || m == mode::buffer_paired ||
                             m == mode::prometheus_paired || m == mode::buffer_timed_paired ||
                             m == mode::node_traced_paired || m == mode::clock1_floor_paired ||
                             m == mode::clock2_floor_paired || m == mode::handoff_floor_paired;
    const bool scraped = m == mode::prometheus_scrape_paired;
    const bool paired = against_off || m == mode::prometheus_attack_paired || scraped;

    write_target target(block);
    if (!target.error().empty()) {
        state.SkipWithError(target.error().c_str());
        return;
    }
    // Against off: `instances` initiators a side, taken in turn, since each pair of agents
    // has a speed of its own (within a few percent: how UCX happened to map the target's
    // memory, say) that one pair per side would mistake for telemetry's cost.
    const std::size_t n = against_off ? instances : 1;
    std::vector<std::unique_ptr<write_loop>> measured, base;
    for (std::size_t k = 0; k < n; ++k) {
        measured.push_back(std::make_unique<write_loop>(
            target, "m" + std::to_string(k), exporter_of(m),
            m == mode::buffer_timed_paired ? std::optional<std::string>("1") : std::nullopt,
            m == mode::node_traced_paired,
            m == mode::clock1_floor_paired    ? 1
            : m == mode::clock2_floor_paired  ? 2
            : m == mode::handoff_floor_paired ? 3
                                              : 0));
        if (against_off) {
            base.push_back(std::make_unique<write_loop>(target, "b" + std::to_string(k), ""));
        }
    }
    for (const auto* side : {&measured, &base}) {
        for (const auto& l : *side) {
            if (!l->error().empty()) {
                state.SkipWithError(l->error().c_str());
                return;
            }
        }
    }

    std::unique_ptr<xtel_bench::hostile_clients> attack;
    std::unique_ptr<back_to_back_scraper> scraper;  // starts paused
    if (attacked || scraped) {
        auto& typed =
            dynamic_cast<xtel::basic_agent<xtel::prometheus_telemetry>&>(measured[0]->initiator());
        const std::uint16_t port = typed.telemetry().get<xtel::prometheus_exporter>().port();
        if (attacked) {
            xtel_bench::hostile_clients::options o;
            o.port = port;
            attack = std::make_unique<xtel_bench::hostile_clients>(o);
            std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the crowd gathers
        } else {
            scraper = std::make_unique<back_to_back_scraper>(port);
        }
    }
    // Where the time goes: the endpoint's own thread, over the measurement.
    const double endpoint_cpu_before = prometheus ? endpoint_cpu_seconds() : 0;
    const auto started = std::chrono::steady_clock::now();

    // Paired: the baseline side first (off, no attack, no scraping).
    // Against off: short windows, many of them. Under attack: long enough for the hostile
    // clients to connect again after each switch; scraping: the same windows as under attack.
    using ms = std::chrono::milliseconds;
    alternating_windows windows(against_off ? ms(50) : ms(100), against_off ? ms(5) : ms(20));
    write_loop* running = against_off ? base[0].get() : measured[0].get();
    std::size_t turn = 0;
    if (m == mode::prometheus_attack_paired) {
        attack->set_active(false);
    }
    std::uint64_t i = 0;
    for (auto _ : state) {
        if (paired) {
            windows.count();
            if ((++i & 63) == 0 && windows.due()) {
                if (against_off) {
                    if (windows.measuring()) {
                        running = measured[turn % n].get();
                    } else {
                        running = base[++turn % n].get();
                    }
                } else if (attack) {
                    attack->set_active(windows.measuring());
                } else {
                    scraper->set_active(windows.measuring());
                }
            }
        }
        const xtel::status st = running->step();
        if (!st.ok()) [[unlikely]] {
            state.SkipWithError(st.to_string().c_str());
            break;
        }
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * block));
    if (prometheus) {
        const std::chrono::duration<double> wall = std::chrono::steady_clock::now() - started;
        state.counters["endpoint_cpu_pct"] =
            100 * (endpoint_cpu_seconds() - endpoint_cpu_before) / wall.count();
    }
    if (paired) {
        windows.report(state, case_name(block, m),
                       against_off ? "telemetry"
                       : scraped   ? "scrape"
                                   : "attack");
    }
    if (attack) {
        attack->stop();
        state.counters["attacker_cpu_pct"] =
            100 * attack->cpu_seconds() / attack->seconds_running();
        state.counters["scrapes_ok"] = static_cast<double>(attack->scrapes_ok());
        state.counters["scrapes_failed"] = static_cast<double>(attack->scrapes_failed());
        state.counters["hostile_connections"] = static_cast<double>(attack->opened());
        attack.reset();
    }
    if (scraper) {
        scraper->stop();
        const double ok = static_cast<double>(scraper->ok());
        state.counters["scraper_cpu_pct"] =
            100 * scraper->cpu_seconds() / scraper->seconds_running();
        state.counters["scrapes_ok"] = ok;
        state.counters["scrapes_failed"] = static_cast<double>(scraper->failed());
        state.counters["scrapes_not_gzip"] = static_cast<double>(scraper->not_gzip());
        state.counters["scrapes_per_active_s"] = ok / scraper->seconds_active();
        state.counters["scrape_bytes_mean"] =
            ok > 0 ? static_cast<double>(scraper->body_bytes()) / ok : 0;
        scraper.reset();
    }
    double dropped = 0;
    for (const auto& l : measured) {
        dropped += l->dropped();
    }
    state.counters["dropped"] = dropped;
    {
        double exported = 0;
        for (const auto& l : measured) {
            exported += static_cast<double>(l->initiator().stats().events_exported);
        }
        state.counters["events_per_iteration"] = exported / static_cast<double>(state.iterations());
    }
}

/// Seconds each repetition of a paired case runs at least: XTEL_BENCH_PAIRED_SECONDS, or 1.5.
/// Google Benchmark runs a repetition for up to 1.4x this (its last estimate aims past it), and
/// finds the iteration count in the first repetition, so 1.5 s gives some 20 windows a side
/// per repetition and about 11 s per case at 5 repetitions; 4 s (some 55 windows a side) made
/// the 12 paired cases alone take 7 minutes.
double paired_min_time() {
    constexpr double fallback = 1.5;
    const char* text = std::getenv("XTEL_BENCH_PAIRED_SECONDS");
    if (text == nullptr || *text == '\0') {
        return fallback;
    }
    char* end = nullptr;
    const double seconds = std::strtod(text, &end);
    if (*end != '\0' || !(seconds >= 0.2 && seconds <= 600)) {
        std::fprintf(stderr,
                     "xtel_bench: XTEL_BENCH_PAIRED_SECONDS='%s' is invalid: expected seconds "
                     "from 0.2 to 600; using %.1f\n",
                     text, fallback);
        return fallback;
    }
    return seconds;
}

const bool registered = [] {
    const double paired_seconds = paired_min_time();
    for (const std::uint64_t block : {4096u, 65536u}) {
        for (const mode m :
             {mode::off, mode::buffer, mode::prometheus, mode::prometheus_under_attack}) {
            const std::string name = case_name(block, m);
            benchmark::RegisterBenchmark(name.c_str(), bm_ucx_write, block, m)->UseRealTime();
        }
        for (const mode m : {mode::off_paired, mode::buffer_paired, mode::buffer_timed_paired,
                             mode::node_traced_paired, mode::prometheus_paired,
                             mode::prometheus_attack_paired, mode::prometheus_scrape_paired}) {
            const std::string name = case_name(block, m);
            benchmark::RegisterBenchmark(name.c_str(), bm_ucx_write, block, m)
                ->UseRealTime()
                ->MinTime(paired_seconds);
        }
    }
    for (const mode m :
         {mode::clock1_floor_paired, mode::clock2_floor_paired, mode::handoff_floor_paired}) {
        benchmark::RegisterBenchmark(case_name(4096, m).c_str(), bm_ucx_write, 4096, m)
            ->UseRealTime()
            ->MinTime(paired_seconds);
    }
    return true;
}();

}  // namespace
