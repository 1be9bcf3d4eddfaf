#pragma once
/// What the single writer and each reader of an owned file hold, whatever its format: the
/// flight recorder, the node file and the span ring each build their writer and reader on these
/// two and add only their layout. The rules they share (creation, locking, crashed writers, the
/// checks before a header is trusted) are in src/core/owned_file.hpp; these classes are public
/// only because the formats' writers and readers are.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

namespace xtel::detail {

struct owned_file_kind;  // src/core/owned_file.hpp
struct owned_writer;     // src/core/owned_file.hpp

/// The writer's hold on its file: its path, its descriptor (which holds flock(LOCK_EX) for the
/// writer's life) and why it gave up, if it did. failed() and failure() may be read from any
/// thread; the rest is for the writer's one thread.
class owned_file_writer {
  public:
    owned_file_writer(const owned_file_writer&) = delete;
    owned_file_writer& operator=(const owned_file_writer&) = delete;

    const std::filesystem::path& path() const noexcept { return path_; }
    /// True once the writer has given up on the file (logged once, when it did).
    bool failed() const noexcept { return failed_.load(std::memory_order_acquire); }
    /// Why it gave up (the message it logged); empty while !failed().
    const std::string& failure() const noexcept;

  protected:
    /// For the file of `kind` at `path`; create() makes it.
    owned_file_writer(const owned_file_kind& kind, std::filesystem::path path) noexcept;
    /// Marks the file closed, unless the writer gave up on it, and closes it, which releases
    /// the lock. The file stays for readers that come late.
    ~owned_file_writer();

    /// Creates the file: `size` bytes, `header` at offset 0 (create_owned_file, which throws
    /// exporter_error naming the path and why). `agent_name` is for its log lines.
    void create(std::string_view agent_name, std::uint64_t size, std::span<const std::byte> header);
    /// Writing, checking and giving up on the file.
    owned_writer owned() noexcept;

  private:
    const owned_file_kind& kind_;
    std::filesystem::path path_;
    std::string failure_;  // written once, before failed_ is set
    int fd_ = -1;
    std::atomic<bool> failed_{false};
};

/// A reader's hold on the file it opened: the path that names it in messages and the
/// descriptor, closed with the reader (also when a derived constructor throws).
class owned_file_reader {
  public:
    owned_file_reader(const owned_file_reader&) = delete;
    owned_file_reader& operator=(const owned_file_reader&) = delete;

    const std::filesystem::path& path() const noexcept { return path_; }
    /// True when the path no longer names the file this reader has open (renamed, replaced or
    /// removed).
    bool replaced() const;

  protected:
    /// Owns `fd` from now on.
    owned_file_reader(int fd, std::filesystem::path path) noexcept;
    ~owned_file_reader();

    int fd() const noexcept { return fd_; }
    /// True while a writer holds the file's lock. The shared lock a reader is granted when none
    /// does is released at once, so that a reader never keeps the next writer waiting.
    bool writer_holds_lock() const noexcept;
    /// True when no writer holds the lock and the lock could be asked for: the writer is gone.
    bool lock_free() const noexcept;

  private:
    std::filesystem::path path_;
    int fd_ = -1;
};

}  // namespace xtel::detail
