#include "dir_watch.hpp"

#include <fmt/format.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

#include "xtel/core/log.hpp"

namespace xtel::xtel_exporter {

namespace {

/// One warning line through xtel's log sink; formatting that fails (no memory) loses the
/// details, not the line.
template <class... Args>
void warn(fmt::format_string<Args...> format, Args&&... args) noexcept {
    try {
        xtel::log(log_level::warning, fmt::format(format, std::forward<Args>(args)...));
    } catch (...) {
        xtel::log(log_level::warning, "the watch of the directory failed");
    }
}

// A writer builds its file under a hidden temporary name and renames it into place, so a
// node file arrives by IN_MOVED_TO, whole (IN_CREATE would show a file still being written).
// It leaves by deletion or by a rename (a crashed writer's file is kept under another name).
// IN_CLOSE_WRITE: its writer closed it, on stopping or dying (the kernel closes a killed
// process's files), so the stale rule starts counting at once.
constexpr std::uint32_t watched = IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CLOSE_WRITE |
                                  IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;

}  // namespace

dir_watch::dir_watch(const node::scanner& files) : files_(files), dir_(files.config().dir) {
    fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd_ < 0) {
        warn("cannot watch {} (inotify_init1: {}); relying on the rescan", dir_.string(),
             std::strerror(errno));
        return;
    }
    if (::inotify_add_watch(fd_, dir_.c_str(), watched) < 0) {
        warn(
            "cannot watch {} (inotify_add_watch: {}); relying on the "
            "rescan",
            dir_.string(), std::strerror(errno));
        stop();
    }
}

dir_watch::~dir_watch() {
    stop();
}

bool dir_watch::changed() noexcept {
    bool any = false;
    while (fd_ >= 0) {
        alignas(inotify_event) char buf[16 * 1024];
        const ssize_t n = ::read(fd_, buf, sizeof buf);
        if (n <= 0) {
            if (n < 0 && errno == EINTR) {
                continue;
            }
            if (n < 0 && errno != EAGAIN) {
                warn(
                    "reading the watch of {} failed ({}); relying on the "
                    "rescan",
                    dir_.string(), std::strerror(errno));
                stop();
                any = true;
            }
            break;
        }
        for (ssize_t at = 0; at < n;) {
            const auto* e = reinterpret_cast<const inotify_event*>(buf + at);
            at += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
            if ((e->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) != 0) {
                warn(
                    "{} is no longer watched (moved or deleted); relying "
                    "on the rescan",
                    dir_.string());
                stop();
                return true;
            }
            if ((e->mask & IN_Q_OVERFLOW) != 0 ||
                (e->len > 0 && files_.kind_of(std::string_view(e->name)))) {
                any = true;
            }
        }
    }
    return any;
}

void dir_watch::stop() noexcept {
    if (fd_ >= 0) {
        ::close(fd_);
        fd_ = -1;
    }
}

}  // namespace xtel::xtel_exporter
