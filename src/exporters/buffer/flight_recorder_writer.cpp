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
#include "xtel/clock.hpp"
#include "xtel/config.hpp"

namespace xtel::flight_recorder {

namespace {

static_assert(std::atomic_ref<std::uint64_t>::is_always_lock_free);
constexpr std::size_t event_words = sizeof(event) / sizeof(std::uint64_t);
static_assert(sizeof(event) % sizeof(std::uint64_t) == 0);

using detail::errno_text;
using detail::fd_guard;

std::atomic_ref<std::uint64_t> word(std::uint64_t& w) noexcept {
    return std::atomic_ref(w);
}

}  // namespace

writer::writer(const std::filesystem::path& dir, std::string_view agent_name, std::size_t capacity)
    : capacity_(capacity) {
    parse::file_name("agent name", agent_name);
    if (capacity == 0) {
        throw exporter_error("flight recorder capacity must be at least 1 event");
    }
    path_ = dir / std::string(agent_name);

    struct stat st {};
    if (::lstat(path_.c_str(), &st) == 0) {
        if (S_ISLNK(st.st_mode)) {
            throw exporter_error(fmt::format(
                "flight recorder {}: refusing to replace a symbolic link", path_.string()));
        }
        if (!S_ISREG(st.st_mode)) {
            throw exporter_error(fmt::format("flight recorder {}: exists and is not a regular file",
                                             path_.string()));
        }
        if (st.st_uid != ::geteuid()) {
            throw exporter_error(fmt::format(
                "flight recorder {}: belongs to user id {}, not to this process (user id {}); "
                "refusing to replace it",
                path_.string(), st.st_uid, ::geteuid()));
        }
    } else if (errno != ENOENT) {
        throw exporter_error(
            fmt::format("flight recorder {}: {}", path_.string(), errno_text(errno)));
    }

    // Build the file under a temporary name and rename it into place, so that a reader never
    // opens a half-initialised header, and readers of a previous file keep their own mapping.
    // The temporary name is random (mkostemp: O_CREAT | O_EXCL, mode 0600), so that nobody can
    // plant a file or a link at it beforehand in a shared directory such as /dev/shm.
    std::string tmp_name = (dir / fmt::format(".{}.XXXXXX", agent_name)).string();
    fd_guard fd{::mkostemp(tmp_name.data(), O_CLOEXEC)};
    if (fd.fd < 0) {
        throw exporter_error(fmt::format("flight recorder {}: cannot create a file in {}: {}",
                                         path_.string(), dir.string(), errno_text(errno)));
    }
    const std::filesystem::path tmp(tmp_name);
    auto fail = [&](std::string_view what, int err) {
        ::unlink(tmp.c_str());
        throw exporter_error(
            fmt::format("flight recorder {}: {}: {}", path_.string(), what, errno_text(err)));
    };
    if (::fchmod(fd.fd, 0600) != 0) {
        fail("cannot set mode 0600", errno);
    }
    mapped_size_ = header_size + capacity * slot_size;
    // Reserve the blocks now: a full tmpfs would otherwise surface later as SIGBUS on a store
    // into the mapping, inside the agent.
    if (const int err = ::posix_fallocate(fd.fd, 0, static_cast<off_t>(mapped_size_)); err != 0) {
        fail(fmt::format("cannot reserve {} bytes", mapped_size_), err);
    }
    void* p = ::mmap(nullptr, mapped_size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd.fd, 0);
    if (p == MAP_FAILED) {
        fail("cannot map", errno);
    }
    header_ = static_cast<file_header*>(p);
    slots_ = reinterpret_cast<slot*>(static_cast<char*>(p) + header_size);

    std::memset(header_, 0, header_size);
    header_->version = format_version;
    header_->header_size = header_size;
    header_->slot_size = slot_size;
    header_->event_size = sizeof(event);
    header_->capacity = capacity;
    header_->created_us = clock::now_us();
    header_->writer_pid = static_cast<std::uint32_t>(::getpid());
    header_->state = static_cast<std::uint32_t>(writer_state::open);
    const auto n = std::min(agent_name.size(), agent_name_size - 1);
    std::memcpy(header_->agent_name, agent_name.data(), n);
    std::memcpy(header_->magic, magic, sizeof magic);

    if (::rename(tmp.c_str(), path_.c_str()) != 0) {
        const int err = errno;
        ::munmap(p, mapped_size_);
        header_ = nullptr;
        fail("cannot move into place", err);
    }
}

writer::~writer() {
    if (header_ != nullptr) {
        std::atomic_ref(header_->state)
            .store(static_cast<std::uint32_t>(writer_state::closed), std::memory_order_release);
        ::munmap(header_, mapped_size_);
    }
}

void writer::append(std::span<const event> events) noexcept {
    for (const event& e : events) {
        slot& s = slots_[next_index_];
        const std::uint64_t seq = next_ + 1;
        // A seqlock per slot: mark busy, fill, publish. Readers compare the sequence before
        // and after their copy.
        word(s.seq).store(seq | busy_bit, std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_release);
        std::uint64_t src[event_words];
        std::memcpy(src, &e, sizeof e);
        auto* dst = reinterpret_cast<std::uint64_t*>(&s.ev);
        for (std::size_t i = 0; i < event_words; ++i) {
            word(dst[i]).store(src[i], std::memory_order_relaxed);
        }
        word(s.seq).store(seq, std::memory_order_release);
        ++next_;
        if (++next_index_ == capacity_) {
            next_index_ = 0;
        }
    }
    word(header_->claim_seq).store(next_, std::memory_order_relaxed);
    word(header_->write_seq).store(next_, std::memory_order_release);
}

}  // namespace xtel::flight_recorder
