#include "xtel/flight_recorder.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "exporters/buffer/recorder_io.hpp"

namespace xtel::flight_recorder {

namespace {

static_assert(std::atomic_ref<std::uint64_t>::is_always_lock_free);
constexpr std::size_t event_words = sizeof(event) / sizeof(std::uint64_t);
static_assert(sizeof(event) % sizeof(std::uint64_t) == 0);

using detail::errno_text;
using detail::fd_guard;

/// For the reader's read-only mapping: atomic_ref<const T> is not in C++20, so the reference is
/// made on a cast, and only loads are ever issued through it.
std::atomic_ref<std::uint64_t> word(const std::uint64_t& w) noexcept {
    return std::atomic_ref(const_cast<std::uint64_t&>(w));
}

}  // namespace

reader::reader(const std::filesystem::path& path) {
    const auto name = path.string();
    fd_guard fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
    if (fd.fd < 0) {
        throw format_error(fmt::format("{}: cannot open: {}", name, errno_text(errno)));
    }
    struct stat st {};
    if (::fstat(fd.fd, &st) != 0) {
        throw format_error(fmt::format("{}: cannot stat: {}", name, errno_text(errno)));
    }
    if (S_ISDIR(st.st_mode)) {
        throw format_error(fmt::format("{}: is a directory, not a telemetry buffer", name));
    }
    if (!S_ISREG(st.st_mode)) {
        throw format_error(fmt::format("{}: is not a regular file", name));
    }
    const auto size = static_cast<std::size_t>(st.st_size);
    if (size < header_size) {
        throw format_error(fmt::format("{}: truncated: {} bytes, smaller than the {}-byte header",
                                       name, size, header_size));
    }
    file_header h{};
    if (::pread(fd.fd, &h, sizeof h, 0) != static_cast<ssize_t>(sizeof h)) {
        throw format_error(fmt::format("{}: cannot read the header", name));
    }
    if (std::memcmp(h.magic, magic, sizeof magic) != 0) {
        throw format_error(fmt::format("{}: not a telemetry buffer (bad magic)", name));
    }
    if (h.version != format_version) {
        throw format_error(
            fmt::format("{}: unsupported format version {} (this reader reads version {})", name,
                        h.version, format_version));
    }
    if (h.header_size != header_size || h.slot_size != slot_size || h.event_size != sizeof(event)) {
        throw format_error(fmt::format(
            "{}: unexpected layout (header {} bytes, slot {}, event {}; expected {}, {}, {})", name,
            h.header_size, h.slot_size, h.event_size, header_size, slot_size, sizeof(event)));
    }
    if (h.capacity == 0 || h.capacity > (size - header_size) / slot_size) {
        throw format_error(
            fmt::format("{}: truncated: {} bytes cannot hold the {} events the header declares",
                        name, size, h.capacity));
    }
    capacity_ = h.capacity;
    mapped_size_ = header_size + capacity_ * slot_size;
    void* p = ::mmap(nullptr, mapped_size_, PROT_READ, MAP_SHARED, fd.fd, 0);
    if (p == MAP_FAILED) {
        throw format_error(fmt::format("{}: cannot map: {}", name, errno_text(errno)));
    }
    header_ = static_cast<const file_header*>(p);
    slots_ = reinterpret_cast<const slot*>(static_cast<const char*>(p) + header_size);
}

reader::~reader() {
    if (header_ != nullptr) {
        ::munmap(const_cast<file_header*>(header_), mapped_size_);
    }
}

std::uint64_t reader::published_count() const noexcept {
    return word(header_->write_seq).load(std::memory_order_acquire);
}

bool reader::writer_closed() const noexcept {
    return std::atomic_ref(const_cast<std::uint32_t&>(header_->state))
               .load(std::memory_order_acquire) == static_cast<std::uint32_t>(writer_state::closed);
}

std::string reader::agent_name() const {
    return std::string(header_->agent_name, ::strnlen(header_->agent_name, agent_name_size));
}

std::uint32_t reader::writer_pid() const noexcept {
    return header_->writer_pid;
}

bool reader::read_slot(std::uint64_t seq, event& out) const noexcept {
    const slot& s = slots_[seq % capacity_];
    const std::uint64_t expected = seq + 1;
    if (word(s.seq).load(std::memory_order_acquire) != expected) {
        return false;  // overwritten by a newer event (or being overwritten)
    }
    std::uint64_t buf[event_words];
    const auto* src = reinterpret_cast<const std::uint64_t*>(&s.ev);
    for (std::size_t i = 0; i < event_words; ++i) {
        buf[i] = word(src[i]).load(std::memory_order_relaxed);
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (word(s.seq).load(std::memory_order_relaxed) != expected) {
        return false;  // torn: the writer started on this slot while we copied
    }
    std::memcpy(&out, buf, sizeof out);
    return true;
}

}  // namespace xtel::flight_recorder
