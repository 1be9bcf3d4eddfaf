#pragma once
/// The metadata blob an agent exports so that agents in other processes can connect to it.
///
/// Format version 1, little-endian, no padding:
///
///   offset size
///        0    8  magic "XTELMETA"
///        8    2  format version (1)
///       10    2  flags (0)
///       12    4  total size of the blob in bytes, checksum included
///       16    8  incarnation: random, unique to one agent object
///       24    4  process id
///       28   16  host id (the kernel boot id), to tell "same process" from "same pid elsewhere"
///       44    2  agent name length N (1..255), then N bytes of name
///        .    4  UCX worker address length A (1..65535), then A bytes
///        .    4  region count R (0..65536), then R regions of
///                  8 address, 8 length, 1 memory kind, 3 zero bytes, 4 device,
///                  4 packed remote key length K (1..65535), then K bytes
///        .    8  FNV-1a 64 of every byte before it
///
/// decode_metadata() checks every field before anything reaches UCX, which trusts what it is given:
/// a truncated, corrupted or foreign blob is a bad_metadata status, never a crash.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "xtel/core/status.hpp"
#include "xtel/core/transfer.hpp"

namespace xtel::detail {

inline constexpr char metadata_magic[8] = {'X', 'T', 'E', 'L', 'M', 'E', 'T', 'A'};
inline constexpr std::uint16_t metadata_version = 1;
inline constexpr std::size_t metadata_max_name = 255;
inline constexpr std::size_t metadata_max_address = 65535;
inline constexpr std::size_t metadata_max_regions = 65536;
inline constexpr std::size_t metadata_max_rkey = 65535;

/// One registered region as another agent sees it.
struct metadata_region {
    descriptor region;
    std::vector<std::byte> rkey;  ///< UCX packed remote key
};

struct agent_metadata {
    std::string name;
    std::uint64_t incarnation = 0;
    std::uint32_t pid = 0;
    std::array<std::byte, 16> host_id{};
    std::vector<std::byte> worker_address;
    std::vector<metadata_region> regions;
};

/// Serialises; PRECONDITION: the fields are within the limits above.
std::vector<std::byte> encode_metadata(const agent_metadata& md);

/// Parses and validates; on error `out` is left unspecified and the status says what is wrong.
status decode_metadata(std::span<const std::byte> blob, agent_metadata& out);

/// This host's id (the kernel boot id; a hash of the host name where that is unavailable).
const std::array<std::byte, 16>& host_id() noexcept;

}  // namespace xtel::detail
