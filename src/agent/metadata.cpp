#include "agent/metadata.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <string_view>

#include "xtel/core/ascii.hpp"
#include "xtel/core/config.hpp"
#include "xtel/core/parse.hpp"

namespace xtel::detail {

namespace {

constexpr std::size_t fixed_header = 44;  // up to the name length
constexpr std::size_t checksum_size = 8;
constexpr std::size_t region_fixed = 8 + 8 + 1 + 3 + 4 + 4;

std::uint64_t fnv1a(std::span<const std::byte> bytes) noexcept {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (const std::byte b : bytes) {
        h ^= static_cast<std::uint8_t>(b);
        h *= 0x100000001b3ull;
    }
    return h;
}

class writer {
  public:
    explicit writer(std::vector<std::byte>& out) : out_(out) {}

    template <class T>
    void put(T v) {
        for (std::size_t i = 0; i < sizeof(T); ++i) {
            out_.push_back(
                static_cast<std::byte>((static_cast<std::uint64_t>(v) >> (8 * i)) & 0xff));
        }
    }
    void bytes(const void* p, std::size_t n) {
        if (n > 0) {
            const std::size_t at = out_.size();
            out_.resize(at + n);
            std::memcpy(out_.data() + at, p, n);
        }
    }

  private:
    std::vector<std::byte>& out_;
};

/// Reads fields in order; every read checks the bytes left, so a short blob fails cleanly.
class reader {
  public:
    explicit reader(std::span<const std::byte> in) : in_(in) {}

    template <class T>
    bool get(T& v) {
        if (in_.size() - pos_ < sizeof(T)) {
            return false;
        }
        std::uint64_t x = 0;
        for (std::size_t i = 0; i < sizeof(T); ++i) {
            x |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(in_[pos_ + i])) << (8 * i);
        }
        v = static_cast<T>(x);
        pos_ += sizeof(T);
        return true;
    }
    bool bytes(std::size_t n, std::span<const std::byte>& out) {
        if (in_.size() - pos_ < n) {
            return false;
        }
        out = in_.subspan(pos_, n);
        pos_ += n;
        return true;
    }
    std::size_t position() const noexcept { return pos_; }

  private:
    std::span<const std::byte> in_;
    std::size_t pos_ = 0;
};

status bad(std::string message) {
    return {status_code::bad_metadata, std::move(message)};
}

std::array<std::byte, 16> read_host_id() noexcept {
    std::array<std::byte, 16> id{};
    try {
        std::ifstream f("/proc/sys/kernel/random/boot_id");
        std::string text;
        std::getline(f, text);
        std::size_t n = 0;
        int half = -1;
        for (const char c : text) {
            const int v = ascii::lower_hex_value(c);
            if (v < 0 || n == id.size())
                continue;
            if (half < 0) {
                half = v;
            } else {
                id[n++] = static_cast<std::byte>(half * 16 + v);
                half = -1;
            }
        }
        if (n == id.size()) {
            return id;
        }
        char host[256] = {};
        ::gethostname(host, sizeof host - 1);
        const auto h = std::hash<std::string_view>{}(host);
        std::memcpy(id.data(), &h, sizeof h);
    } catch (...) {
    }
    return id;
}

}  // namespace

const std::array<std::byte, 16>& host_id() noexcept {
    static const std::array<std::byte, 16> id = read_host_id();
    return id;
}

std::vector<std::byte> encode_metadata(const agent_metadata& md) {
    std::vector<std::byte> out;
    std::size_t size =
        fixed_header + 2 + md.name.size() + 4 + md.worker_address.size() + 4 + checksum_size;
    for (const auto& r : md.regions) {
        size += region_fixed + r.rkey.size();
    }
    out.reserve(size);
    writer w(out);
    w.bytes(metadata_magic, sizeof metadata_magic);
    w.put(metadata_version);
    w.put(std::uint16_t{0});
    w.put(static_cast<std::uint32_t>(size));
    w.put(md.incarnation);
    w.put(md.pid);
    w.bytes(md.host_id.data(), md.host_id.size());
    w.put(static_cast<std::uint16_t>(md.name.size()));
    w.bytes(md.name.data(), md.name.size());
    w.put(static_cast<std::uint32_t>(md.worker_address.size()));
    w.bytes(md.worker_address.data(), md.worker_address.size());
    w.put(static_cast<std::uint32_t>(md.regions.size()));
    for (const auto& r : md.regions) {
        w.put(r.region.address);
        w.put(r.region.length);
        w.put(static_cast<std::uint8_t>(r.region.kind));
        w.put(std::uint8_t{0});
        w.put(std::uint16_t{0});
        w.put(r.region.device);
        w.put(static_cast<std::uint32_t>(r.rkey.size()));
        w.bytes(r.rkey.data(), r.rkey.size());
    }
    w.put(fnv1a(out));
    return out;
}

namespace {

/// The parts around the fields: magic, version, size, checksum, flags.
status check_envelope(std::span<const std::byte> blob) {
    if (blob.size() < fixed_header + checksum_size ||
        std::memcmp(blob.data(), metadata_magic, sizeof metadata_magic) != 0) {
        return bad(
            fmt::format("a blob of {} bytes is not xtel agent metadata (expected the "
                        "bytes an agent's export_metadata produced, starting with "
                        "\"XTELMETA\")",
                        blob.size()));
    }
    reader r(blob.subspan(sizeof metadata_magic));
    std::uint16_t version = 0, flags = 0;
    std::uint32_t size = 0;
    r.get(version);
    r.get(flags);
    r.get(size);
    if (version != metadata_version) {
        return bad(
            fmt::format("metadata format version {} is not supported (this build reads "
                        "version {})",
                        version, metadata_version));
    }
    if (size != blob.size()) {
        return bad(
            fmt::format("metadata says it is {} bytes long but the blob has {} bytes "
                        "(truncated or padded in transit?)",
                        size, blob.size()));
    }
    const auto body = blob.first(blob.size() - checksum_size);
    std::uint64_t stored = 0;
    for (std::size_t i = 0; i < checksum_size; ++i) {
        stored |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(blob[body.size() + i]))
                  << (8 * i);
    }
    if (fnv1a(body) != stored) {
        return bad("metadata checksum does not match its contents (the blob was corrupted)");
    }
    if (flags != 0) {
        return bad(fmt::format("metadata flags {:#x} are not understood (expected 0)", flags));
    }
    return {};
}

/// Who the agent is and where: incarnation, pid, host, name, worker address.
status read_identity(reader& b, agent_metadata& out) {
    std::span<const std::byte> chunk;
    std::uint16_t name_len = 0;
    b.get(out.incarnation);
    b.get(out.pid);
    b.bytes(out.host_id.size(), chunk);
    std::memcpy(out.host_id.data(), chunk.data(), chunk.size());
    if (!b.get(name_len) || name_len == 0 || name_len > metadata_max_name ||
        !b.bytes(name_len, chunk)) {
        return bad(fmt::format("metadata agent name length {} is invalid (expected 1 to {})",
                               name_len, metadata_max_name));
    }
    out.name.assign(reinterpret_cast<const char*>(chunk.data()), chunk.size());
    try {
        parse::file_name("metadata agent name", out.name);
    } catch (const error& e) {
        return bad(e.what());
    }
    std::uint32_t address_len = 0;
    if (!b.get(address_len) || address_len == 0 || address_len > metadata_max_address ||
        !b.bytes(address_len, chunk)) {
        return bad(
            fmt::format("metadata of '{}': worker address length {} is invalid (expected 1 "
                        "to {} within the blob)",
                        out.name, address_len, metadata_max_address));
    }
    out.worker_address.assign(chunk.begin(), chunk.end());
    return {};
}

/// Region `i` of `count` of the agent `name`.
status read_region(reader& b,
                   const std::string& name,
                   std::uint32_t i,
                   std::uint32_t count,
                   metadata_region& reg) {
    std::uint8_t kind = 0, pad8 = 0;
    std::uint16_t pad16 = 0;
    std::uint32_t rkey_len = 0;
    if (!b.get(reg.region.address) || !b.get(reg.region.length) || !b.get(kind) || !b.get(pad8) ||
        !b.get(pad16) || !b.get(reg.region.device) || !b.get(rkey_len)) {
        return bad(fmt::format("metadata of '{}': region {} of {} is cut short", name, i, count));
    }
    if (kind > static_cast<std::uint8_t>(memory_kind::vram) || pad8 != 0 || pad16 != 0) {
        return bad(
            fmt::format("metadata of '{}': region {} has memory kind {} (expected 0 "
                        "for DRAM or 1 for VRAM, and zero padding)",
                        name, i, kind));
    }
    reg.region.kind = static_cast<memory_kind>(kind);
    if (reg.region.length == 0 || reg.region.address + reg.region.length < reg.region.address) {
        return bad(
            fmt::format("metadata of '{}': region {} [{:#x}, +{}) is empty or wraps "
                        "around the address space",
                        name, i, reg.region.address, reg.region.length));
    }
    std::span<const std::byte> chunk;
    if (rkey_len == 0 || rkey_len > metadata_max_rkey || !b.bytes(rkey_len, chunk)) {
        return bad(
            fmt::format("metadata of '{}': region {} remote key length {} is invalid "
                        "(expected 1 to {} within the blob)",
                        name, i, rkey_len, metadata_max_rkey));
    }
    reg.rkey.assign(chunk.begin(), chunk.end());
    return {};
}

}  // namespace

status decode_metadata(std::span<const std::byte> blob, agent_metadata& out) {
    if (status st = check_envelope(blob); !st.ok()) {
        return st;
    }
    // From here on the bytes are what an encoder wrote; the limits still guard against a
    // well-formed blob from a buggy or hostile writer.
    const auto body = blob.first(blob.size() - checksum_size);
    reader b(body.subspan(sizeof metadata_magic + 8));
    if (status st = read_identity(b, out); !st.ok()) {
        return st;
    }
    std::uint32_t count = 0;
    if (!b.get(count) || count > metadata_max_regions) {
        return bad(fmt::format("metadata of '{}': region count {} is invalid (expected 0 to {})",
                               out.name, count, metadata_max_regions));
    }
    out.regions.clear();
    out.regions.reserve(std::min<std::size_t>(count, body.size() / region_fixed));
    for (std::uint32_t i = 0; i < count; ++i) {
        metadata_region reg;
        if (status st = read_region(b, out.name, i, count, reg); !st.ok()) {
            return st;
        }
        out.regions.push_back(std::move(reg));
    }
    if (b.position() != body.size() - sizeof metadata_magic - 8) {
        return bad(fmt::format("metadata of '{}' has {} unexpected bytes after its last region",
                               out.name, body.size() - sizeof metadata_magic - 8 - b.position()));
    }
    return {};
}

}  // namespace xtel::detail
