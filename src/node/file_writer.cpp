#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "core/log.hpp"
#include "core/owned_file.hpp"
#include "node/file_io.hpp"
#include "xtel/core/clock.hpp"
#include "xtel/node/file.hpp"

namespace xtel::node::file {

namespace {

using xtel::detail::format_or_empty;

/// When this process started, in microseconds since the epoch: boot time (/proc/stat btime)
/// plus the process's start in clock ticks since boot (/proc/self/stat field 22). With the pid it
/// names the process even after the pid is reused. `fallback` when /proc cannot say.
std::uint64_t process_start_us(std::uint64_t fallback) {
    std::ifstream stat_file("/proc/self/stat");
    std::string line;
    std::getline(stat_file, line);
    // Field 2 is the command in parentheses and may hold anything; count after the last ')'.
    const auto close = line.rfind(')');
    if (close == std::string::npos) {
        return fallback;
    }
    std::istringstream fields(line.substr(close + 1));
    std::string field;
    std::uint64_t start_ticks = 0;
    for (int i = 3; i <= 22 && fields >> field; ++i) {
        if (i == 22) {
            start_ticks = std::strtoull(field.c_str(), nullptr, 10);
        }
    }
    std::ifstream proc_stat("/proc/stat");
    std::uint64_t boot_s = 0;
    for (std::string key; proc_stat >> key;) {
        if (key == "btime") {
            proc_stat >> boot_s;
            break;
        }
    }
    const long ticks_per_s = ::sysconf(_SC_CLK_TCK);
    if (start_ticks == 0 || boot_s == 0 || ticks_per_s <= 0) {
        return fallback;
    }
    return boot_s * 1'000'000 + start_ticks * 1'000'000 / static_cast<std::uint64_t>(ticks_per_s);
}

}  // namespace

writer::writer(const std::filesystem::path& dir, std::string_view agent_name)
    : owned_file_writer(
          detail::file_kind,
          xtel::detail::agent_file_path(detail::file_kind, dir, agent_name, file_suffix)),
      agent_name_(agent_name) {
    for (std::size_t i = 0; i < 2; ++i) {
        regions_[i].offset = header_size + i * initial_area_capacity;
        regions_[i].capacity = initial_area_capacity;
    }
    file_size_ = header_size + 2 * initial_area_capacity;

    auto h = xtel::detail::new_owned_header<file_header>(detail::file_kind, agent_name);
    h.start_time_us = process_start_us(h.created_us);
    h.areas[0] = regions_[0];
    h.areas[1] = regions_[1];
    create(agent_name, file_size_, std::as_bytes(std::span(&h, 1)));
}

void writer::refuse_payload(std::string_view why) noexcept {
    const std::uint64_t refused = refused_.fetch_add(1, std::memory_order_relaxed) + 1;
    if (refused == 1) {
        xtel::detail::log(log_level::error,
                          "agent '{}': node file {}: {}; the previous payload stays published "
                          "(further refusals are counted in the file's header, not logged)",
                          agent_name_, path().string(), why);
    }
    (void)owned().write_at(&refused, sizeof refused, offsetof(file_header, refused));
}

/// Appends two new areas of the doubled capacity at the end of the file: `index` gets the first
/// at once, the other index the second for its next publish. Until then the other index's
/// descriptor in the file still names its old area, which readers may be copying; the areas
/// left behind are never written again (the file does not shrink while the writer lives).
bool writer::make_room(std::size_t index, std::uint64_t size) noexcept {
    std::uint64_t capacity = regions_[index].capacity;
    while (capacity < size) {
        capacity *= 2;
    }
    capacity = std::min(capacity, max_payload_size);
    const std::uint64_t offset = file_size_;
    if (const int err = ::posix_fallocate(owned().fd, static_cast<off_t>(offset),
                                          static_cast<off_t>(2 * capacity));
        err != 0) {
        refuse_payload(format_or_empty("cannot grow to hold a payload of {} bytes: {}", size,
                                       std::strerror(err)));
        return false;
    }
    regions_[index] = area{offset, capacity, 0, 0, 0};
    regions_[1 - index] = area{offset + capacity, capacity, 0, 0, 0};
    file_size_ = offset + 2 * capacity;
    return true;
}

bool writer::publish(std::span<const std::byte> payload) noexcept {
    if (failed()) {
        return false;
    }
    // Checked first: a refusal writes its count to the file, which must still be this one's.
    const xtel::detail::owned_writer file = owned();
    if (!file.intact(file_size_)) {
        return false;
    }
    if (payload.size() > max_payload_size) {
        refuse_payload(format_or_empty("a payload of {} bytes is over the limit of {} bytes",
                                       payload.size(), max_payload_size));
        return false;
    }
    const std::size_t i = next_;
    if (payload.size() > regions_[i].capacity && !make_room(i, payload.size())) {
        return false;
    }
    // The payload goes to the area readers are not reading (the latest is the other one), then
    // the seqlock: generation odd, the descriptor, generation even (docs/node-format.md).
    if (!file.write_at(payload.data(), payload.size(), regions_[i].offset)) {
        return false;
    }
    area a = regions_[i];
    a.length = payload.size();
    a.generation = generation_ + 2;
    a.published_us = clock::now_us();
    const std::uint64_t writing = generation_ + 1;
    if (!file.write_at(&writing, sizeof writing, offsetof(file_header, generation)) ||
        !file.write_at(&a, sizeof a, offsetof(file_header, areas) + i * sizeof(area)) ||
        !file.write_at(&a.generation, sizeof a.generation, offsetof(file_header, generation))) {
        return false;
    }
    generation_ = a.generation;
    next_ = 1 - i;
    published_.fetch_add(1, std::memory_order_relaxed);
    return true;
}

}  // namespace xtel::node::file
