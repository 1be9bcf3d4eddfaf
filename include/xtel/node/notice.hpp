#pragma once
/// The notice an agent leaves when it cannot publish its node file:
/// `<dir>/<agent>.<pid>.unpublished` beside the node files, held (flock) for the agent's life,
/// removed when it stops cleanly. So that xtel-exporter and xtel top show an agent whose metrics
/// never reach the node, and why. docs/node-format.md ("The unpublished notice") describes the
/// record line by line.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "xtel/core/error.hpp"

namespace xtel::node {

/// `<agent>.<pid>` + this is a notice's file name; never `.metrics`, so no reader of node files
/// takes it for one.
inline constexpr std::string_view notice_suffix = ".unpublished";
/// A notice's first line: its magic and version.
inline constexpr std::string_view notice_magic = "xtel-unpublished";
inline constexpr std::uint32_t notice_version = 1;
/// The largest notice: writers cut the node file's path and the error text to stay within it,
/// readers refuse a larger file unread.
inline constexpr std::size_t max_notice_bytes = 4096;

/// Why an agent could not publish (the `reason` line). Readers accept any `[a-z_]{1,32}`, so a
/// new reason needs no new version.
enum class unpublished_reason : std::uint8_t {
    name_taken,     ///< a live agent of the same name holds the node file
    path_blocked,   ///< a link, a non-regular file or another user's file is at the path
    no_space,       ///< the directory's file system is full (or over quota)
    create_failed,  ///< the file could not be made for another reason (permissions, ...)
    file_lost,      ///< made, then truncated, deleted, replaced or not writable: publishing stopped
};

/// The name of `r` as the notice and the `reason` label write it ("name_taken").
std::string_view to_string(unpublished_reason r) noexcept;

/// One notice's record.
struct notice {
    std::string agent_name;
    std::uint32_t pid = 0;
    std::string node_file;  ///< the path of the node file the agent could not publish
    std::string reason;     ///< to_string(unpublished_reason) for this version's writers
    std::string error;      ///< the error the agent logged

    friend bool operator==(const notice&, const notice&) = default;
};

/// A notice that is not one: what() names the line and quotes the bad value.
class notice_error : public error {
  public:
    using error::error;
};

/// The file name of agent `agent_name`'s notice in process `pid`.
std::string notice_file_name(std::string_view agent_name, std::uint32_t pid);

/// The record of `n`, at most max_notice_bytes: the node file's path and then the error text
/// are cut (at a byte, never inside an escape) when the whole would not fit.
std::string format_notice(const notice& n);

/// Reads a record format_notice wrote; throws notice_error for anything else (another magic or
/// version, a missing, extra or reordered line, a bad escape, a pid that is not 1 to
/// 2147483647, a reason that is not [a-z_]{1,32}, more than max_notice_bytes). Decoding then
/// formatting gives back the same bytes.
notice parse_notice(std::string_view bytes);

/// The notice of one agent, from its creation to the agent's clean stop: made whole under a
/// hidden temporary name (mkostemp: O_EXCL, mode 0600), locked (flock LOCK_EX), then linked into
/// place without replacing anything (renameat2 RENAME_NOREPLACE). A dead process's notice left
/// at the same name (its pid reused) is replaced; anything else there is left alone.
class notice_writer {
  public:
    /// Throws exporter_error when the notice cannot be made (the caller has an error to log
    /// already; this one says why the notice is missing too).
    notice_writer(const std::filesystem::path& dir, const notice& n);
    /// Removes the notice if its name still names it, and lets its lock go.
    ~notice_writer();
    notice_writer(const notice_writer&) = delete;
    notice_writer& operator=(const notice_writer&) = delete;

    const std::filesystem::path& path() const noexcept { return path_; }

  private:
    std::filesystem::path path_;
    int fd_ = -1;
};

}  // namespace xtel::node
