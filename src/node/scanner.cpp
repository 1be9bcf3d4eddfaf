#include "xtel/node/scanner.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/ranges.h>

#include "core/log.hpp"
#include "xtel/node/file.hpp"
#include "xtel/node/notice.hpp"
#include "xtel/trace/span_ring.hpp"

namespace xtel::node {

namespace {

namespace ring = trace::span_ring;

/// The largest span ring a writer makes: larger is refused unread.
constexpr std::uint64_t max_ring_bytes =
    ring::header_size + std::uint64_t{sizeof(ring::slot)} * ring::max_slot_count;

/// What a listing shows that is not a regular file, for a message.
std::string_view what_is(mode_t mode) {
    if (S_ISLNK(mode)) {
        return "a symbolic link";
    }
    if (S_ISDIR(mode)) {
        return "a directory";
    }
    if (S_ISFIFO(mode)) {
        return "a FIFO";
    }
    if (S_ISSOCK(mode)) {
        return "a socket";
    }
    return "a device";
}

/// How each kind is named in a refusal's message, and what serving it is called.
struct kind_words {
    std::string_view noun;  ///< "a node file"
    std::string_view done;  ///< "served": only the files of uid ... are served
    std::string_view limit_option;
};
constexpr kind_words words_of(file_kind k) {
    switch (k) {
        case file_kind::node_file:
            return {"a node file", "served", " (--max-file-bytes)"};
        case file_kind::notice:
            return {"a notice", "read", ""};
        case file_kind::nixl_ring:
            return {"a NIXL ring", "read", ""};
        case file_kind::nixl_store:
            return {"a NIXL store", "read", ""};
        case file_kind::span_ring:
            break;
    }
    return {"a span ring", "read", ""};
}

file_identity identity_of(const struct stat& st) {
    return {static_cast<std::uint64_t>(st.st_dev),
            static_cast<std::uint64_t>(st.st_ino),
            static_cast<std::uint64_t>(st.st_size),
            st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec,
            st.st_mode,
            st.st_uid};
}

}  // namespace

std::string_view to_string(refusal r) noexcept {
    switch (r) {
        case refusal::foreign_owner:
            return "foreign_owner";
        case refusal::not_regular:
            return "not_regular";
        case refusal::too_large:
            return "too_large";
        case refusal::unreadable:
            return "unreadable";
        case refusal::not_node_file:
            return "not_node_file";
        case refusal::damaged:
            return "damaged";
        case refusal::bad_snapshot:
            return "bad_snapshot";
        case refusal::writer_mismatch:
            return "writer_mismatch";
        case refusal::writer_unverified:
            return "writer_unverified";
        case refusal::name_mismatch:
            return "name_mismatch";
        case refusal::series_limit:
            return "series_limit";
        case refusal::bad_notice:
            return "bad_notice";
        case refusal::not_span_file:
            return "not_span_file";
        case refusal::not_nixl_file:
            return "not_nixl_file";
    }
    return "unknown";
}

std::string_view to_string(file_kind k) noexcept {
    switch (k) {
        case file_kind::node_file:
            return "node_file";
        case file_kind::notice:
            return "notice";
        case file_kind::span_ring:
            return "span_ring";
        case file_kind::nixl_ring:
            return "nixl_ring";
        case file_kind::nixl_store:
            return "nixl_store";
    }
    return "unknown";
}

std::span<const refusal> reasons_of(file_kind k) noexcept {
    switch (k) {
        case file_kind::node_file:
            return node_file_reasons;
        case file_kind::notice:
            return notice_reasons;
        case file_kind::span_ring:
            return span_ring_reasons;
        case file_kind::nixl_ring:
            return nixl_ring_reasons;
        case file_kind::nixl_store:
            return nixl_store_reasons;
    }
    return {};
}

listing::~listing() {
    if (dir_fd_ >= 0) {
        ::close(dir_fd_);
    }
}

opened::opened(opened&& o) noexcept
    : refused(o.refused), why(std::move(o.why)), retry(o.retry), fd_(std::exchange(o.fd_, -1)) {}

opened::~opened() {
    if (fd_ >= 0) {
        ::close(fd_);
    }
}

int opened::release() noexcept {
    return std::exchange(fd_, -1);
}

scanner::scanner(settings s) : settings_(std::move(s)) {}

std::optional<file_kind> scanner::kind_of(std::string_view name) const noexcept {
    if (name.starts_with('.')) {
        return std::nullopt;
    }
    if (settings_.nixl_rings) {
        return file_kind::nixl_ring;  // NIXL names its ring by its agent alone
    }
    const auto named = [&](std::string_view suffix) {
        return name.size() > suffix.size() && name.ends_with(suffix);
    };
    if (settings_.nixl_stores) {
        constexpr std::string_view prefix = "nixl.", suffix = ".mmap";
        return name.size() > prefix.size() + suffix.size() && name.starts_with(prefix) &&
                       name.ends_with(suffix)
                   ? std::optional(file_kind::nixl_store)
                   : std::nullopt;
    }
    // Not a crashed writer's `<agent>.metrics.crashed.<pid>`: kept for a person to look at,
    // and its agent may be running again under the plain name.
    if (named(file::file_suffix) && name.find(".crashed.") == std::string_view::npos) {
        return file_kind::node_file;
    }
    if (named(notice_suffix)) {
        return file_kind::notice;
    }
    if (settings_.span_rings && named(ring::file_suffix)) {
        return file_kind::span_ring;
    }
    return std::nullopt;
}

std::shared_ptr<const listing> scanner::scan() noexcept {
    try {
        const int fd = ::open(settings_.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        const std::unique_ptr<DIR, int (*)(DIR*)> d(fd < 0 ? nullptr : ::fdopendir(::dup(fd)),
                                                    ::closedir);
        if (d == nullptr) {
            const int err = errno;
            if (fd >= 0) {
                ::close(fd);
            }
            if (!dir_failed_) {
                xtel::detail::log(log_level::error, "{}: cannot list {}: {}", settings_.program,
                                  settings_.dir.string(), std::strerror(err));
                dir_failed_ = true;
            }
            return nullptr;
        }
        dir_failed_ = false;
        std::shared_ptr<listing> l(new listing(fd, ++listings_));
        while (const dirent* e = ::readdir(d.get())) {
            const auto kind = kind_of(e->d_name);
            // Not following a link, whatever it points to.
            struct stat st {};
            if (!kind || ::fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
                continue;  // not served, or gone since it was listed
            }
            l->files_[static_cast<std::size_t>(*kind)].emplace(e->d_name, identity_of(st));
        }
        const std::lock_guard lock(latest_mutex_);
        latest_ = l;
        return l;
    } catch (const std::exception& e) {
        xtel::detail::log(log_level::error, "{}: scanning {} failed: {}", settings_.program,
                          settings_.dir.string(), e.what());
        return nullptr;
    }
}

std::shared_ptr<const listing> scanner::latest() const {
    const std::lock_guard lock(latest_mutex_);
    return latest_;
}

std::uint64_t scanner::max_bytes(file_kind k) const noexcept {
    switch (k) {
        case file_kind::node_file:
            return settings_.max_file_bytes;
        case file_kind::notice:
            return max_notice_bytes;
        case file_kind::nixl_ring:
            return settings_.max_nixl_ring_bytes;
        case file_kind::nixl_store:
            return settings_.max_nixl_store_bytes;
        case file_kind::span_ring:
            break;
    }
    return max_ring_bytes;
}

bool scanner::allowed(uid_t uid) const noexcept {
    return uid == ::geteuid() ||
           std::find(settings_.allowed_uids.begin(), settings_.allowed_uids.end(), uid) !=
               settings_.allowed_uids.end();
}

std::optional<std::pair<refusal, std::string>> scanner::untrusted(file_kind k,
                                                                  mode_t mode,
                                                                  uid_t uid,
                                                                  std::uint64_t size) const {
    const kind_words words = words_of(k);
    if (!S_ISREG(mode)) {
        return std::pair{refusal::not_regular,
                         fmt::format("{}, not a regular file; not read", what_is(mode))};
    }
    if (!allowed(uid)) {
        return std::pair{
            refusal::foreign_owner,
            fmt::format("owned by uid {}, and only the files of uid {}{} are {} (--allow-uid)", uid,
                        ::geteuid(),
                        settings_.allowed_uids.empty()
                            ? std::string()
                            : fmt::format(" and {}", fmt::join(settings_.allowed_uids, ", ")),
                        words.done)};
    }
    const std::uint64_t limit = max_bytes(k);
    if (size > limit) {
        return std::pair{refusal::too_large,
                         fmt::format("{} bytes, larger than the {} bytes {} may have here{}; not "
                                     "read",
                                     size, limit, words.noun, words.limit_option)};
    }
    return std::nullopt;
}

opened scanner::open(const listing& l, file_kind k, const std::string& name) const {
    opened out;
    const auto refuse = [&out](refusal r, std::string why) {
        out.refused = r;
        out.why = std::move(why);
        return std::move(out);
    };
    const auto& files = l.of(k);
    const auto listed = files.find(name);
    if (listed == files.end()) {
        return out;  // not listed: nothing to open
    }
    // What the listing saw, first: a link, a FIFO or another user's file is never opened.
    const file_identity& id = listed->second;
    if (auto why =
            untrusted(k, static_cast<mode_t>(id.mode), static_cast<uid_t>(id.uid), id.size)) {
        return refuse(why->first, std::move(why->second));
    }
    // O_NOFOLLOW and the same checks on what was opened: the name may have been replaced since
    // it was listed, and only what the descriptor names counts. O_NONBLOCK: a FIFO put there
    // meanwhile is not waited on. A NIXL ring's one reader writes its read position.
    const int access = k == file_kind::nixl_ring ? O_RDWR : O_RDONLY;
    out.fd_ = ::openat(l.dir_fd(), name.c_str(), access | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
    if (out.fd_ < 0) {
        const int err = errno;
        if (err == ENOENT) {
            return out;  // gone since it was listed: an agent going away, nothing to report
        }
        if (err == ELOOP) {
            return refuse(refusal::not_regular,
                          "a symbolic link, not a regular file; not followed");
        }
        // This process's trouble, not the file's.
        out.retry = err == EMFILE || err == ENFILE || err == ENOMEM || err == EINTR;
        return refuse(refusal::unreadable, fmt::format("cannot open: {}", std::strerror(err)));
    }
    struct stat st {};
    if (::fstat(out.fd_, &st) != 0) {
        const int err = errno;
        ::close(out.release());
        return refuse(refusal::unreadable, fmt::format("cannot stat: {}", std::strerror(err)));
    }
    if (auto why = untrusted(k, st.st_mode, st.st_uid, static_cast<std::uint64_t>(st.st_size))) {
        ::close(out.release());
        return refuse(why->first, std::move(why->second));
    }
    return out;
}

void scanner::count(file_kind k, refusal r) noexcept {
    refused_[static_cast<std::size_t>(k) * refusal_count + static_cast<std::size_t>(r)].fetch_add(
        1, std::memory_order_relaxed);
}

std::uint64_t scanner::refused(file_kind k, refusal r) const noexcept {
    return refused_[static_cast<std::size_t>(k) * refusal_count + static_cast<std::size_t>(r)].load(
        std::memory_order_relaxed);
}

}  // namespace xtel::node
