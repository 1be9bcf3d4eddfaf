#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <thread>

#include "core/owned_file.hpp"
#include "node/file_io.hpp"
#include "xtel/node/file.hpp"

namespace xtel::node::file {

namespace {

using xtel::detail::errno_text;
using xtel::detail::pread_all;

/// The area that `generation` published, or nullptr when none or both claim it.
const area* area_of(const file_header& h, std::uint64_t generation) noexcept {
    const bool first = h.areas[0].generation == generation;
    const bool second = h.areas[1].generation == generation;
    if (first == second) {
        return nullptr;
    }
    return first ? &h.areas[0] : &h.areas[1];
}

/// True when the area lies inside a file of `file_size` bytes, without overflow.
bool area_fits(const area& a, std::uint64_t file_size) noexcept {
    return a.length <= a.capacity && a.capacity <= max_payload_size && a.offset >= header_size &&
           a.offset <= file_size && a.capacity <= file_size - a.offset;
}

}  // namespace

reader::reader(const std::filesystem::path& path, std::uint64_t max_file_bytes)
    : reader(xtel::detail::open_for_reading(path), path, max_file_bytes) {}

reader::reader(int file, std::filesystem::path file_path, std::uint64_t max_file_bytes)
    : owned_file_reader(file, std::move(file_path)), max_file_bytes_(max_file_bytes) {
    const auto name = path().string();
    file_header h{};
    xtel::detail::check_opened(detail::file_kind, fd(), path(), &h, max_file_bytes_);
    if (h.header_size != header_size) {
        throw format_error(fault::wrong_format,
                           fmt::format("{}: unexpected header size {} (expected {})", name,
                                       h.header_size, header_size));
    }
    xtel::detail::check_writer_state(path(), h.state);
    agent_name_.assign(h.agent_name, ::strnlen(h.agent_name, agent_name_size));
    writer_pid_ = h.writer_pid;
    created_us_ = h.created_us;
    start_time_us_ = h.start_time_us;
}

file_header reader::read_header() const {
    file_header h{};
    if (!pread_all(fd(), &h, sizeof h, 0)) {
        throw format_error(fault::damaged,
                           fmt::format("{}: damaged: truncated below its {}-byte header",
                                       path().string(), header_size));
    }
    return h;
}

std::uint64_t reader::read_generation() const {
    std::uint64_t g = 0;
    if (!pread_all(fd(), &g, sizeof g, offsetof(file_header, generation))) {
        throw format_error(fault::damaged,
                           fmt::format("{}: damaged: truncated below its {}-byte header",
                                       path().string(), header_size));
    }
    return g;
}

std::optional<publication> reader::read_latest(int attempts) {
    const auto name = path().string();
    for (int attempt = 0; attempt < attempts; ++attempt) {
        if (attempt > 0) {
            std::this_thread::yield();
        }
        // Seqlock read: generation, the header, the payload, the generation again. Equal and
        // even, nothing the reader copied changed meanwhile: the writer rewrites a descriptor
        // only while the generation is odd, and an area only after the generation moved off it.
        const std::uint64_t g1 = read_generation();
        std::uint64_t latest = g1;
        if (g1 % 2 != 0) {
            // A writer that died in the middle of a publish left the generation odd for good;
            // the area published before it is whole (the writer never writes the latest area).
            if (writer_alive()) {
                continue;
            }
            latest = g1 - 1;
        }
        if (latest == 0) {
            if (read_generation() != g1) {
                continue;
            }
            return publication{};
        }
        const file_header h = read_header();
        struct stat st {};
        if (::fstat(fd(), &st) != 0) {
            throw format_error(fault::unreadable,
                               fmt::format("{}: cannot stat: {}", name, errno_text(errno)));
        }
        const auto file_size = static_cast<std::uint64_t>(st.st_size);
        if (file_size > max_file_bytes_) {
            // Grown since it was opened: a live writer's payload outgrew the limit, or someone
            // extended the file. Either way nothing of it is read.
            throw format_error(fault::too_large,
                               fmt::format("{}: grew to {} bytes, larger than the {} bytes a node "
                                           "file may have here (--max-file-bytes)",
                                           name, file_size, max_file_bytes_));
        }
        const area* a = area_of(h, latest);
        const bool fits = a != nullptr && area_fits(*a, file_size);
        publication p;
        bool copied = false;
        if (fits) {
            p.payload.resize(static_cast<std::size_t>(a->length));
            copied = pread_all(fd(), p.payload.data(), p.payload.size(), a->offset);
        }
        if (read_generation() != g1) {
            continue;  // published meanwhile: what was copied may be torn
        }
        // Stable: the header copy is the one the writer left, so what is wrong with it is damage.
        if (a == nullptr) {
            throw format_error(
                fault::damaged,
                fmt::format("{}: damaged: no single area carries the latest generation {}", name,
                            latest));
        }
        if (!fits) {
            throw format_error(
                fault::damaged,
                fmt::format("{}: damaged: the latest area (offset {}, capacity {}, length {}) "
                            "does not fit the file of {} bytes",
                            name, a->offset, a->capacity, a->length, file_size));
        }
        if (!copied) {
            throw format_error(fault::damaged,
                               fmt::format("{}: damaged: truncated while being read", name));
        }
        p.number = latest / 2;
        p.published_us = a->published_us;
        return p;
    }
    return std::nullopt;
}

std::uint64_t reader::published() const {
    return read_generation() / 2;
}

std::uint64_t reader::refused() const {
    return read_header().refused;
}

bool reader::closed() const {
    return read_header().state == static_cast<std::uint32_t>(writer_state::closed);
}

}  // namespace xtel::node::file
