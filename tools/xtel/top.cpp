#include "top.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>
#include <thread>

#include "straggler.hpp"
#include "terminal.hpp"
#include "top_options.hpp"
#include "top_view.hpp"
#include "xtel/core/log.hpp"

namespace xtel::top {

namespace {

/// What the collector's log lines start with.
constexpr std::string_view program = "xtel top";

/// The collector of `o.dir`, and the rows of its latest reading.
class reading {
  public:
    explicit reading(const options& o) : collector_(settings_of(o)) {}

    /// Lists the directory, reads every file, and makes the rows against the last reading.
    void refresh() {
        collector_.scan();
        const auto now = clock::now();
        const auto wall_us =
            static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                           std::chrono::system_clock::now().time_since_epoch())
                                           .count());
        std::vector<sample> samples;
        peer_histograms peers;
        for (const auto& a : collector_.refresh_agents(now)) {
            // A stopped writer's numbers are as old as its last publish, on this clock.
            std::optional<clock::time_point> last;
            if (a.state != writer_state::live) {
                last = a.published_us != 0 && a.published_us <= wall_us
                           ? now - std::chrono::microseconds(wall_us - a.published_us)
                           : a.ended;
            }
            samples.push_back(sample_of(*a.snapshot, a.state, last));
            add_peer_histograms(*a.snapshot, peers);
        }
        rows_ = tracker_.update(std::move(samples), now);
        stragglers_ = stragglers_tracker_.update(std::move(peers), now);
    }

    /// The frame's lines for the agents that could not publish their node file, then for the
    /// straggler peers over the readings of the last 5 minutes.
    std::vector<std::string> notices() const {
        std::vector<std::string> out;
        for (const auto& n : collector_.unpublished()) {
            out.push_back(unpublished_line(n));
        }
        for (const auto& s : stragglers_) {
            out.push_back(straggler_line(s));
        }
        return out;
    }

    const std::vector<row>& rows() const noexcept { return rows_; }
    std::uint64_t read_errors() const noexcept { return collector_.read_errors_total(); }

  private:
    /// The collector's settings: xtel-exporter's defaults for the limits.
    static node::collector::settings settings_of(const options& o) {
        node::collector::settings s;
        s.dir = o.dir;
        s.stale_ttl = std::chrono::seconds(o.stale_ttl_s);
        s.program = std::string(program);
        s.allowed_uids = o.allowed_uids;
        return s;
    }

    node::collector collector_;
    rate_tracker tracker_;
    std::vector<row> rows_;
    straggler_tracker stragglers_tracker_;
    std::vector<straggler> stragglers_;
};

std::string wall_clock() {
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    ::localtime_r(&t, &tm);
    char buf[16] = {};
    std::strftime(buf, sizeof buf, "%H:%M:%S", &tm);
    return buf;
}

frame_options frame_options_of(const options& o) {
    frame_options f;
    f.dir = o.dir.string();
    f.interval = o.interval;
    f.sort = o.sort;
    f.reverse = o.reverse;
    f.filter = o.filter;
    f.time = wall_clock();
    return f;
}

/// One frame on stdout, with the rates over one interval; messages on stderr.
int run_once(const options& o) {
    set_log_sink([](log_level, std::string_view message) {
        std::fprintf(stderr, "%.*s\n", static_cast<int>(message.size()), message.data());
    });
    reading r(o);
    r.refresh();
    std::this_thread::sleep_for(o.interval);
    r.refresh();
    auto f = frame_options_of(o);
    f.read_errors = r.read_errors();
    f.notices = r.notices();
    std::string out;
    for (const auto& line : format_frame(r.rows(), f).lines) {
        out += line;
        out += '\n';
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    return std::fflush(stdout) == 0 ? 0 : 1;
}

/// The latest log line, for the frame to show (the screen is ours: nothing goes to stderr).
class last_message {
  public:
    last_message() {
        set_log_sink([this](log_level, std::string_view message) {
            const std::lock_guard lock(mutex_);
            text_ = message;
        });
    }
    ~last_message() { set_log_sink({}); }
    last_message(const last_message&) = delete;
    last_message& operator=(const last_message&) = delete;

    std::string get() const {
        const std::lock_guard lock(mutex_);
        return text_;
    }

  private:
    mutable std::mutex mutex_;
    std::string text_;
};

/// The signals the live view handles itself, read from a signalfd: blocked in every thread.
class signals {
  public:
    signals() {
        sigemptyset(&set_);
        for (const int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH, SIGTSTP, SIGCONT}) {
            sigaddset(&set_, s);
        }
        ::pthread_sigmask(SIG_BLOCK, &set_, &old_);
        fd_ = ::signalfd(-1, &set_, SFD_CLOEXEC | SFD_NONBLOCK);
        if (fd_ < 0) {
            ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
            throw error(std::string("signalfd failed: ") + std::strerror(errno));
        }
    }
    ~signals() {
        ::close(fd_);
        ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    }
    signals(const signals&) = delete;
    signals& operator=(const signals&) = delete;

    int fd() const noexcept { return fd_; }

    /// The next signal that came; 0 when none.
    int next() const {
        signalfd_siginfo info{};
        return ::read(fd_, &info, sizeof info) == sizeof info ? static_cast<int>(info.ssi_signo)
                                                              : 0;
    }

  private:
    sigset_t set_{};
    sigset_t old_{};
    int fd_ = -1;
};

/// The live view's state between frames: what the keys change.
struct view_state {
    options o;
    bool editing = false;
    std::string filter_before;  ///< restored by Esc while editing
    bool quit = false;
    bool refresh_now = false;
};

/// Skips an escape sequence (an arrow key: ESC [ A) starting at keys[i] == ESC; returns the
/// index of its last byte, or `i` for a lone ESC.
std::size_t skip_sequence(std::string_view keys, std::size_t i) {
    if (i + 1 >= keys.size() || (keys[i + 1] != '[' && keys[i + 1] != 'O')) {
        return i;
    }
    std::size_t j = i + 2;
    while (j < keys.size() && !(keys[j] >= 0x40 && keys[j] <= 0x7e)) {
        ++j;
    }
    return std::min(j, keys.size() - 1);
}

void on_keys(view_state& v, std::string_view keys) {
    for (std::size_t i = 0; i < keys.size(); ++i) {
        const char k = keys[i];
        const bool sequence = k == '\x1b' && skip_sequence(keys, i) != i;
        if (sequence) {
            i = skip_sequence(keys, i);
            continue;
        }
        if (v.editing) {
            if (k == '\r' || k == '\n') {
                v.editing = false;
            } else if (k == '\x1b') {
                v.o.filter = v.filter_before;
                v.editing = false;
            } else if (k == '\x7f' || k == '\b') {
                if (!v.o.filter.empty()) {
                    v.o.filter.pop_back();
                }
            } else if (k >= 0x20 && k <= 0x7e) {
                v.o.filter += k;
            }
            continue;
        }
        switch (k) {
            case 'q':
            case 'Q':
                v.quit = true;
                return;
            case 's':
            case 'S':
                v.o.sort = next_column(v.o.sort, k == 's');
                break;
            case 'r':
                v.o.reverse = !v.o.reverse;
                break;
            case 'f':
            case '/':
                v.editing = true;
                v.filter_before = v.o.filter;
                break;
            case 'c':
                v.o.filter.clear();
                break;
            case ' ':
                v.refresh_now = true;
                break;
            default:
                break;
        }
    }
}

int ms_until(clock::time_point t) {
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(t - clock::now()).count();
    return static_cast<int>(std::clamp<std::int64_t>(ms, 0, 3'600'000));
}

/// Refreshes every interval and draws, until q or a signal that ends it.
int run_live(const options& o) {
    const signals sig;
    const last_message message;
    terminal term(STDIN_FILENO, STDOUT_FILENO);
    reading r(o);
    view_state v;
    v.o = o;
    auto next_refresh = clock::now();
    for (;;) {
        if (v.refresh_now || clock::now() >= next_refresh) {
            r.refresh();
            v.refresh_now = false;
            next_refresh = clock::now() + o.interval;
        }
        if (term.taken()) {
            auto f = frame_options_of(v.o);
            f.width = term.width();
            f.height = term.height();
            f.read_errors = r.read_errors();
            f.notices = r.notices();
            f.message = message.get();
            f.interactive = true;
            f.editing_filter = v.editing;
            term.draw(format_frame(r.rows(), f));
        }
        pollfd fds[2] = {{sig.fd(), POLLIN, 0}, {term.key_fd(), POLLIN, 0}};
        const int n = ::poll(fds, term.has_keys() ? 2 : 1, ms_until(next_refresh));
        if (n < 0 && errno != EINTR) {
            throw error(std::string("poll failed: ") + std::strerror(errno));
        }
        while (const int s = sig.next()) {
            if (s == SIGTSTP) {
                // Ctrl-Z: the shell's terminal back, then stop; SIGCONT takes it again.
                term.release();
                ::kill(::getpid(), SIGSTOP);
            } else if (s == SIGCONT) {
                term.take();
            } else if (s != SIGWINCH) {
                return 0;  // SIGINT, SIGTERM, SIGHUP, SIGQUIT: the terminal goes back (term)
            }
        }
        if (term.has_keys() && (fds[1].revents & (POLLHUP | POLLERR)) != 0) {
            return 0;  // the terminal went away
        }
        if (term.has_keys() && (fds[1].revents & POLLIN) != 0) {
            on_keys(v, term.read_keys());
            if (v.quit) {
                return 0;
            }
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    options o;
    try {
        o = parse_options(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "xtel top: %s (xtel top --help lists the options)\n", e.what());
        return exit_usage;
    }
    if (o.help) {
        const auto text = usage();
        std::fwrite(text.data(), 1, text.size(), stdout);
        return 0;
    }
    try {
        return o.once ? run_once(o) : run_live(o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "xtel top: %s\n", e.what());
        return 1;
    }
}

}  // namespace xtel::top
