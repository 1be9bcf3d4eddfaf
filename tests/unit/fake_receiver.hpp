#pragma once
// A local HTTP server for the push clients' tests (remote write, OTLP): it answers each POST
// to one path as told and keeps the requests it got.

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <initializer_list>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace xtel_test {

/// One answer: the status, and optionally a body, its type and more headers.
struct fake_answer {
    int status = 200;
    std::string body{};
    std::string content_type{};
    std::vector<std::pair<std::string, std::string>> headers{};
};

/// Answers each POST to `path` with the next of `answers` (the last one from then on).
class fake_receiver {
  public:
    fake_receiver(std::string path, std::vector<fake_answer> answers)
        : path_(std::move(path)), answers_(std::move(answers)) {
        server.Post(path_, [this](const httplib::Request& req, httplib::Response& res) {
            const std::lock_guard lock(mutex);
            requests.push_back(req);
            times.push_back(std::chrono::steady_clock::now());
            const fake_answer& a = answers_[std::min(requests.size(), answers_.size()) - 1];
            res.status = a.status;
            for (const auto& [name, value] : a.headers) {
                res.set_header(name, value);
            }
            if (!a.body.empty()) {
                res.set_content(a.body, a.content_type);
            }
        });
        port = server.bind_to_any_port("127.0.0.1");
        thread = std::thread([this] { server.listen_after_bind(); });
        while (!server.is_running()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
    }
    /// Answers every POST with the statuses in turn, no body.
    fake_receiver(std::string path, std::initializer_list<int> statuses)
        : fake_receiver(std::move(path), answers_of(statuses)) {}

    ~fake_receiver() {
        server.stop();
        thread.join();
    }

    fake_receiver(const fake_receiver&) = delete;
    fake_receiver& operator=(const fake_receiver&) = delete;

    std::string url() const { return "http://127.0.0.1:" + std::to_string(port) + path_; }
    std::size_t received() {
        const std::lock_guard lock(mutex);
        return requests.size();
    }

    httplib::Server server;
    std::mutex mutex;
    std::vector<httplib::Request> requests;
    std::vector<std::chrono::steady_clock::time_point> times;
    int port = 0;
    std::thread thread;

  private:
    static std::vector<fake_answer> answers_of(std::initializer_list<int> statuses) {
        std::vector<fake_answer> out;
        for (const int s : statuses) {
            out.push_back({s});
        }
        return out;
    }

    std::string path_;
    std::vector<fake_answer> answers_;
};

/// Whether `done()` becomes true within 20 s.
template <class Done>
bool eventually(Done&& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done()) {
        if (std::chrono::steady_clock::now() > deadline) {
            return false;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
}

}  // namespace xtel_test
