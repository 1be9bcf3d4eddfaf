// What every reader of an owned file does the same: opening it, checking what was opened before
// trusting its header, and asking whether its writer is still there. The writer's side is in
// owned_file.cpp.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "core/owned_file.hpp"
#include "xtel/core/error.hpp"

namespace xtel::detail {

int open_for_reading(const std::filesystem::path& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        throw format_error(file_fault::unreadable,
                           fmt::format("{}: cannot open: {}", path.string(), errno_text(errno)));
    }
    return fd;
}

std::uint64_t check_opened(const owned_file_kind& kind,
                           int fd,
                           const std::filesystem::path& path,
                           void* header,
                           std::uint64_t max_bytes) {
    const auto name = path.string();
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        throw format_error(file_fault::unreadable,
                           fmt::format("{}: cannot stat: {}", name, errno_text(errno)));
    }
    if (S_ISDIR(st.st_mode)) {
        throw format_error(file_fault::not_regular,
                           fmt::format("{}: is a directory, not a {}", name, kind.format_name));
    }
    if (!S_ISREG(st.st_mode)) {
        throw format_error(file_fault::not_regular, fmt::format("{}: is not a regular file", name));
    }
    const auto size = static_cast<std::uint64_t>(st.st_size);
    if (size > max_bytes) {
        throw format_error(file_fault::too_large,
                           fmt::format("{}: {} bytes, larger than the {} bytes a {} may have "
                                       "here (--max-file-bytes)",
                                       name, size, max_bytes, kind.format_name));
    }
    if (size < kind.header_size) {
        throw format_error(file_fault::wrong_format,
                           fmt::format("{}: truncated: {} bytes, smaller than the {}-byte header",
                                       name, size, kind.header_size));
    }
    if (!pread_all(fd, header, kind.header_size, 0)) {
        throw format_error(file_fault::wrong_format,
                           fmt::format("{}: cannot read the header", name));
    }
    const auto* h = static_cast<const unsigned char*>(header);
    if (std::memcmp(h, kind.magic.data(), kind.magic.size()) != 0) {
        throw format_error(file_fault::wrong_format,
                           fmt::format("{}: not a {} (bad magic)", name, kind.format_name));
    }
    if (const auto version = header_field<std::uint32_t>(h, 8); version != kind.version) {
        throw format_error(
            file_fault::wrong_format,
            fmt::format("{}: unsupported format version {} (this reader reads version {})", name,
                        version, kind.version));
    }
    return size;
}

void check_writer_state(const std::filesystem::path& path, std::uint32_t state) {
    if (state != state_open && state != state_closed) {
        throw format_error(file_fault::wrong_format,
                           fmt::format("{}: unknown writer state {} (expected 1 open or 2 closed)",
                                       path.string(), state));
    }
}

int probe_writer_lock(int fd) noexcept {
    if (::flock(fd, LOCK_SH | LOCK_NB) != 0) {
        return errno;
    }
    ::flock(fd, LOCK_UN);
    return 0;
}

bool replaced(const std::filesystem::path& path, int fd) noexcept {
    struct stat by_path {};
    struct stat open_file {};
    if (::stat(path.c_str(), &by_path) != 0 || ::fstat(fd, &open_file) != 0) {
        return true;
    }
    return by_path.st_ino != open_file.st_ino || by_path.st_dev != open_file.st_dev;
}

owned_file_reader::owned_file_reader(int fd, std::filesystem::path path) noexcept
    : path_(std::move(path)), fd_(fd) {}

owned_file_reader::~owned_file_reader() {
    if (fd_ >= 0) {
        ::close(fd_);
    }
}

bool owned_file_reader::replaced() const {
    return xtel::detail::replaced(path_, fd_);
}

bool owned_file_reader::writer_holds_lock() const noexcept {
    // The writer holds LOCK_EX for its whole life, on its own open file description; a shared
    // lock on this reader's one is refused exactly while it lives.
    return probe_writer_lock(fd_) == EWOULDBLOCK;
}

bool owned_file_reader::lock_free() const noexcept {
    return probe_writer_lock(fd_) == 0;
}

}  // namespace xtel::detail
