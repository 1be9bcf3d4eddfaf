#include "xtel/metrics/process_metrics.hpp"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace xtel::metrics {

namespace {

using metrics::family_snapshot;
using metrics::metric_type;

/// The fields of /proc/self/stat after the command name (which may hold spaces and
/// parentheses, so the line is split after its last ')'): field 3 (state) is index 0.
std::vector<std::string> stat_fields() {
    std::ifstream in("/proc/self/stat");
    std::string line;
    if (!std::getline(in, line)) {
        return {};
    }
    const auto close = line.rfind(')');
    if (close == std::string::npos) {
        return {};
    }
    std::istringstream rest(line.substr(close + 1));
    std::vector<std::string> out;
    for (std::string f; rest >> f;) {
        out.push_back(std::move(f));
    }
    return out;
}

std::optional<std::uint64_t> number(std::string_view s) {
    std::uint64_t v = 0;
    const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || ptr != s.data() + s.size()) {
        return std::nullopt;
    }
    return v;
}

/// Seconds since the epoch at which the machine booted (/proc/stat btime).
std::optional<std::uint64_t> boot_time() {
    std::ifstream in("/proc/stat");
    for (std::string line; std::getline(in, line);) {
        if (line.starts_with("btime ")) {
            return number(std::string_view(line).substr(6));
        }
    }
    return std::nullopt;
}

std::optional<std::uint64_t> open_fds() {
    DIR* d = ::opendir("/proc/self/fd");
    if (d == nullptr) {
        return std::nullopt;
    }
    std::uint64_t n = 0;
    while (const dirent* e = ::readdir(d)) {
        if (e->d_name[0] != '.') {
            ++n;
        }
    }
    ::closedir(d);
    return n - 1;  // the directory's own descriptor
}

void add(metrics::snapshot& s,
         std::string name,
         std::string help,
         metric_type type,
         std::uint64_t value,
         std::uint8_t decimals = 0,
         std::string unit = {}) {
    family_snapshot f;
    f.spec = {std::move(name), std::move(help), type, {}, decimals, {}, std::move(unit)};
    metrics::series one;
    one.value = value;
    f.series.push_back(std::move(one));
    s.families.push_back(std::move(f));
}

}  // namespace

metrics::snapshot process_snapshot() {
    metrics::snapshot s;
    const auto f = stat_fields();
    const long ticks = ::sysconf(_SC_CLK_TCK);
    const long page = ::sysconf(_SC_PAGESIZE);
    // Fields (man 5 proc), counted from 3: utime 14, stime 15, starttime 22, vsize 23, rss 24.
    const auto field = [&](std::size_t n) -> std::optional<std::uint64_t> {
        return n - 3 < f.size() ? number(f[n - 3]) : std::nullopt;
    };
    if (const auto ut = field(14), st = field(15); ut && st && ticks > 0) {
        // Kept in microseconds (decimals 6), shown in seconds.
        add(s, "process_cpu_seconds_total", "User and system CPU time the process has used.",
            metric_type::counter, (*ut + *st) * 1000000 / static_cast<std::uint64_t>(ticks), 6,
            "seconds");
    }
    if (const auto rss = field(24); rss && page > 0) {
        add(s, "process_resident_memory_bytes", "Resident memory of the process.",
            metric_type::gauge, *rss * static_cast<std::uint64_t>(page), 0, "bytes");
    }
    if (const auto start = field(22), boot = boot_time(); start && boot && ticks > 0) {
        // Kept in hundredths of a second (decimals 2), the resolution of the clock ticks.
        add(s, "process_start_time_seconds",
            "When the process started, in seconds since the epoch.", metric_type::gauge,
            *boot * 100 + *start * 100 / static_cast<std::uint64_t>(ticks), 2, "seconds");
    }
    if (const auto vsize = field(23)) {
        add(s, "process_virtual_memory_bytes", "Virtual memory of the process.", metric_type::gauge,
            *vsize, 0, "bytes");
    }
    if (const auto fds = open_fds()) {
        add(s, "process_open_fds", "Open file descriptors of the process.", metric_type::gauge,
            *fds);
    }
    if (rlimit r{}; ::getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur != RLIM_INFINITY) {
        add(s, "process_max_fds", "The most file descriptors the process may open.",
            metric_type::gauge, r.rlim_cur);
    }
    std::sort(s.families.begin(), s.families.end(),
              [](const family_snapshot& a, const family_snapshot& b) {
                  return a.spec.name < b.spec.name;
              });
    return s;
}

}  // namespace xtel::metrics
