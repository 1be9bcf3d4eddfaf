// The collector's unpublished notices (xtel/node/notice.hpp): read by the node files' trust
// rules, and listed while their agent holds the notice's lock.

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "core/log.hpp"
#include "xtel/core/parse.hpp"
#include "xtel/node/collector.hpp"

namespace xtel::node {

collector::notice_source::notice_source(notice_source&& o) noexcept
    : id(o.id), fd(std::exchange(o.fd, -1)), record(std::move(o.record)), logged(o.logged) {}

collector::notice_source& collector::notice_source::operator=(notice_source&& o) noexcept {
    if (this != &o) {
        if (fd >= 0) {
            ::close(fd);
        }
        id = o.id;
        fd = std::exchange(o.fd, -1);
        record = std::move(o.record);
        logged = o.logged;
    }
    return *this;
}

collector::notice_source::~notice_source() {
    if (fd >= 0) {
        ::close(fd);
    }
}

void collector::refuse_notice(const std::string& name, refusal r, std::string_view why) {
    files_.count(file_kind::notice, r);
    xtel::detail::log(log_level::warning, "{}: {} is not read (until it changes): {}: {}",
                      settings_.program, (settings_.dir / name).string(), to_string(r), why);
}

void collector::open_notice(const listing& l, const std::string& name, notice_source& n) {
    opened o = files_.open(l, file_kind::notice, name);
    if (o.refused) {
        // Looked at again only when it changes (a notice is written once).
        refuse_notice(name, *o.refused, o.why);
        return;
    }
    if (o.fd() < 0) {
        return;  // gone since it was listed: its agent stopped
    }
    n.fd = o.release();
    // Refused until it changes: its listing stays, so it is not read again.
    const auto drop = [&n] {
        ::close(n.fd);
        n.fd = -1;
    };
    const int fd = n.fd;
    // One byte more than a notice may have: a file grown since its fstat is refused too.
    std::string bytes(max_notice_bytes + 1, '\0');
    const ssize_t got = ::pread(fd, bytes.data(), bytes.size(), 0);
    if (got < 0) {
        refuse_notice(name, refusal::unreadable,
                      fmt::format("cannot read: {}", std::strerror(errno)));
        drop();
        return;
    }
    bytes.resize(static_cast<std::size_t>(got));
    try {
        n.record = parse_notice(bytes);
    } catch (const notice_error& e) {
        refuse_notice(name, refusal::bad_notice, e.what());
        drop();
        return;
    }
    // Named after the agent and process it speaks for: a copy under another name would show
    // one agent twice, or stand for another.
    if (name != notice_file_name(n.record.agent_name, n.record.pid)) {
        refuse_notice(name, refusal::name_mismatch,
                      fmt::format("it speaks for agent '{}' pid {}, whose notice would be '{}'",
                                  parse::escape_controls(n.record.agent_name), n.record.pid,
                                  parse::escape_controls(
                                      notice_file_name(n.record.agent_name, n.record.pid))));
        drop();
    }
}

void collector::check_notices() {
    unpublished_.clear();
    for (auto& [name, n] : notices_) {
        if (n.fd < 0) {
            continue;
        }
        // The agent holds LOCK_EX for its life: a shared lock refused means it is alive.
        if (::flock(n.fd, LOCK_SH | LOCK_NB) == 0) {
            ::flock(n.fd, LOCK_UN);
            // A killed agent's notice: nobody removes it (the directory is not this program's;
            // the next agent of that pid replaces it), and it is not read again unless changed.
            ::close(n.fd);
            n.fd = -1;
            continue;
        }
        if (errno != EWOULDBLOCK) {
            continue;  // a file system without flock: nothing tells a live agent from a dead one
        }
        if (!n.logged) {
            n.logged = true;
            xtel::detail::log(log_level::warning,
                              "{}: agent '{}' (pid {}) could not publish its node file {}: {}: {}",
                              settings_.program, parse::escape_controls(n.record.agent_name),
                              n.record.pid, parse::escape_controls(n.record.node_file),
                              parse::escape_controls(n.record.reason),
                              parse::escape_controls(n.record.error));
        }
        unpublished_.push_back(n.record);
    }
}
}  // namespace xtel::node
