#include "node/node_collector.hpp"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <string_view>

#include "core/log.hpp"
#include "xtel/metrics/snapshot_codec.hpp"
#include "xtel/node_file.hpp"

namespace xtel::detail {

namespace {

/// `<agent>.metrics`, not a crashed writer's `<agent>.metrics.crashed.<pid>` (those are kept
/// for a person to look at, and their agent may be running again under the plain name).
bool is_node_file_name(std::string_view name) {
    return name.size() > node_file::file_suffix.size() && name.ends_with(node_file::file_suffix) &&
           name.find(".crashed.") == std::string_view::npos && !name.starts_with('.');
}

/// Adds the writer's `pid` to the labels every series of `s` carries. A family with a label of
/// its own named pid (xtel_agent_info: the agent's process, the writer) loses that column, so
/// no series names the label twice, which no exposition format allows.
void add_pid_label(metrics::snapshot& s, std::uint32_t pid) {
    for (auto& f : s.families) {
        auto& names = f.spec.label_names;
        const auto it = std::find(names.begin(), names.end(), "pid");
        if (it == names.end()) {
            continue;
        }
        const auto column = it - names.begin();
        names.erase(it);
        for (auto& series : f.series) {
            series.label_values.erase(series.label_values.begin() + column);
        }
    }
    s.labels.push_back({"pid", std::to_string(pid)});
}

}  // namespace

node_collector::node_collector(std::filesystem::path dir,
                               clock::duration stale_ttl,
                               std::string program)
    : dir_(std::move(dir)), stale_ttl_(stale_ttl), program_(std::move(program)) {}

node_collector::~node_collector() = default;

void node_collector::scan() noexcept {
    try {
        DIR* d = ::opendir(dir_.c_str());
        if (d == nullptr) {
            if (!dir_failed_) {
                detail::log(log_level::error, "{}: cannot list {}: {}", program_, dir_.string(),
                            std::strerror(errno));
                dir_failed_ = true;
            }
            return;
        }
        dir_failed_ = false;
        std::map<std::string, identity> present;
        while (const dirent* e = ::readdir(d)) {
            const std::string_view name(e->d_name);
            if (!is_node_file_name(name)) {
                continue;
            }
            // lstat: a link is not followed, whatever it points to.
            struct stat st {};
            if (::lstat((dir_ / name).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
                continue;
            }
            present.emplace(std::string(name),
                            identity{static_cast<std::uint64_t>(st.st_dev),
                                     static_cast<std::uint64_t>(st.st_ino),
                                     static_cast<std::uint64_t>(st.st_size),
                                     st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec});
        }
        ::closedir(d);

        // A file deleted from the directory is dropped at once.
        std::erase_if(sources_, [&](const auto& s) { return !present.contains(s.first); });
        for (const auto& [name, id] : present) {
            source& s = sources_[name];
            if (s.reader) {
                if (s.reader->replaced()) {
                    s = source{};
                    open(name, s, id);
                }
            } else if (!s.refused || *s.refused != id) {
                open(name, s, id);
            }
        }
    } catch (const std::exception& e) {
        detail::log(log_level::error, "{}: scanning {} failed: {}", program_, dir_.string(),
                    e.what());
    }
}

void node_collector::open(const std::string& name, source& s, const identity& id) {
    try {
        s.reader = std::make_unique<node_file::reader>(dir_ / name);
        s.refused.reset();
    } catch (const std::exception& e) {
        refuse(name, s, id, e.what());
    }
}

void node_collector::refuse(const std::string& name,
                            source& s,
                            const identity& id,
                            std::string_view why) {
    detail::log(log_level::warning, "{}: {} is not served (until it changes): {}", program_,
                (dir_ / name).string(), why);
    ++read_errors_total_;
    s.latest.reset();
    s.refused = id;
}

void node_collector::read(const std::string& name, source& s, clock::time_point now) {
    try {
        const auto p = s.reader->read_latest();
        // nullopt: the writer published during every try; the previous payload is served.
        if (p && p->number != 0 && p->number != s.number) {
            auto snap = metrics::decode_snapshot(p->payload);
            add_pid_label(snap, s.reader->writer_pid());
            snap.start_time_us = s.reader->created_us();
            if (!s.latest) {
                ++seen_total_;
            }
            s.latest = std::make_shared<const metrics::snapshot>(std::move(snap));
            s.number = p->number;
            s.published_us = p->published_us;
        }
        // The lock first: a writer sets the closed state before it lets the lock go, so once
        // the lock is free the state read after it is final.
        if (!s.ended && !s.reader->writer_alive()) {
            s.ended = now;
            s.state = s.reader->closed() ? writer_state::closed : writer_state::dead;
        }
    } catch (const std::exception& e) {
        // Kept open, so that only a new file under the name (replaced()) is tried again.
        refuse(name, s, identity{}, e.what());
    }
}

std::vector<std::shared_ptr<const metrics::snapshot>> node_collector::refresh(
    clock::time_point now) {
    std::vector<std::shared_ptr<const metrics::snapshot>> out;
    for (auto& a : refresh_agents(now)) {
        out.push_back(std::move(a.snapshot));
    }
    return out;
}

std::vector<node_collector::agent> node_collector::refresh_agents(clock::time_point now) {
    std::vector<agent> out;
    out.reserve(sources_.size());
    for (auto& [name, s] : sources_) {
        if (!s.reader || s.refused) {
            continue;
        }
        if (s.ended && now - *s.ended >= stale_ttl_) {
            continue;  // stale: its series are gone until the file is replaced
        }
        read(name, s, now);
        if (s.latest && !s.refused) {
            out.push_back({s.latest, s.state, s.ended, s.published_us});
        }
    }
    served_ = out.size();
    return out;
}

}  // namespace xtel::detail
