// Whether a node file's writer is still there, and whether the process holding its lock is
// the writer its header names: the collector's liveness rules, read from the file's state, its
// flock(2) and /proc/locks (node/flock_holders.hpp).

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "node/flock_holders.hpp"
#include "xtel/node/collector.hpp"
#include "xtel/node/file.hpp"

namespace xtel::node {

const detail::flock_holders& collector::holders(dev_t dev) {
    for (const auto& [d, h] : holders_) {
        if (d == dev) {
            return *h;
        }
    }
    holders_.emplace_back(
        dev, std::make_unique<detail::flock_holders>(detail::flock_holders::read(dev)));
    return *holders_.back().second;
}

collector::verdict collector::check_writer(const std::string& name,
                                           source& s,
                                           clock::time_point now) {
    const auto ended = [&] {
        // The lock first: a writer sets the closed state before it lets the lock go, so once
        // the lock is free the state read after it is final.
        s.ended = stopped_at(s, now);
        s.state = s.reader->closed() ? writer_state::closed : writer_state::dead;
        return verdict::serve;
    };
    if (s.ended) {
        return verdict::serve;  // closed or dead: nobody to check any more
    }
    if (s.reader->closed()) {
        // Final: whoever holds its lock now is no writer of it (a writer never reopens a file).
        s.ended = stopped_at(s, now);
        s.state = writer_state::closed;
        return verdict::serve;
    }
    if (!s.reader->writer_alive()) {
        return ended();
    }
    // A live writer: the process holding the lock must be the one the header names, as that
    // process sees its own pid (the innermost of its PID namespaces).
    const detail::flock_holders& table = holders(static_cast<dev_t>(s.id.dev));
    const auto holder = table.holder(static_cast<ino_t>(s.id.ino));
    if (!holder) {
        if (!s.reader->writer_alive()) {
            return ended();  // the writer went after the lock was tested
        }
        std::string why =
            "its lock is held by a process this program cannot see, so it cannot tell whether "
            "that is the writer (pid {}) the header names; run it in the agents' PID namespace "
            "(hostPID: true in Kubernetes) with a /proc that shows their processes (not mounted "
            "hidepid)";
        if (!table.readable()) {
            why += "; /proc/locks cannot be read";
        } else if (table.truncated()) {
            why += fmt::format("; /proc/locks is longer than the {} bytes read of it",
                               detail::flock_holders::max_read_bytes);
        }
        report(name, s, refusal::writer_unverified,
               fmt::format(fmt::runtime(why), s.reader->writer_pid()));
        return verdict::refuse;
    }
    const auto pid = detail::innermost_pid(*holder);
    if (!pid) {
        return verdict::undecided;  // the holder ended since /proc/locks was read: look again
    }
    if (static_cast<std::uint32_t>(*pid) == s.reader->writer_pid()) {
        return verdict::serve;
    }
    if (!s.reader->writer_alive()) {
        return ended();
    }
    report(name, s, refusal::writer_mismatch,
           *pid == *holder
               ? fmt::format("its lock is held by pid {}, not by the writer (pid {}) its header "
                             "names",
                             *holder, s.reader->writer_pid())
               : fmt::format("its lock is held by pid {} (pid {} in its own PID namespace), not "
                             "by the writer (pid {}) its header names",
                             *holder, *pid, s.reader->writer_pid()));
    return verdict::refuse;
}

collector::clock::time_point collector::stopped_at(const source& s, clock::time_point now) {
    if (s.seen_live) {
        return now;  // live at the refresh before: it stopped since
    }
    // Stopped before this collector first looked: dated by the file's last change, which for a
    // closed file is its close and for a dead writer's its last publication. So a new xtel top
    // or a restarted xtel-exporter does not show agents that stopped long ago. A date in the
    // future counts as now; one past ten years ago as ten years ago (no overflow).
    const std::int64_t wall_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                     .count();
    constexpr std::int64_t ten_years_ns = std::int64_t{10} * 365 * 86400 * 1'000'000'000;
    const std::int64_t age = std::clamp<std::int64_t>(wall_ns - s.id.mtime_ns, 0, ten_years_ns);
    return now - std::chrono::duration_cast<clock::duration>(std::chrono::nanoseconds(age));
}
}  // namespace xtel::node
