#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "agent/metadata.hpp"

namespace agent_metadata_test {

using xtel::status_code;
using xtel::detail::agent_metadata;
using xtel::detail::decode_metadata;
using xtel::detail::encode_metadata;

namespace {

std::vector<std::byte> bytes(std::string_view s) {
    std::vector<std::byte> v(s.size());
    std::memcpy(v.data(), s.data(), s.size());
    return v;
}

agent_metadata sample() {
    agent_metadata md;
    md.name = "agent-7";
    md.incarnation = 0x0123456789abcdefull;
    md.pid = 4242;
    md.host_id[0] = std::byte{0xaa};
    md.host_id[15] = std::byte{0x55};
    md.worker_address = bytes("a worker address");
    md.regions.push_back({{0x7f0000001000, 65536, xtel::memory_kind::dram, 0}, bytes("rkey-0")});
    md.regions.push_back({{0x7f0000100000, 4096, xtel::memory_kind::vram, 3}, bytes("rkey-1!")});
    return md;
}

}  // namespace

TEST_CASE("metadata comes back from a blob exactly as it went in") {
    const auto md = sample();
    agent_metadata out;
    REQUIRE(decode_metadata(encode_metadata(md), out).ok());
    CHECK(out.name == md.name);
    CHECK(out.incarnation == md.incarnation);
    CHECK(out.pid == md.pid);
    CHECK(out.host_id == md.host_id);
    CHECK(out.worker_address == md.worker_address);
    REQUIRE(out.regions.size() == 2);
    CHECK(out.regions[0].region == md.regions[0].region);
    CHECK(out.regions[1].region == md.regions[1].region);
    CHECK(out.regions[1].rkey == md.regions[1].rkey);
}

TEST_CASE("a blob starts with the magic and carries its own length") {
    const auto blob = encode_metadata(sample());
    CHECK(std::memcmp(blob.data(), "XTELMETA", 8) == 0);
    std::uint32_t size = 0;
    std::memcpy(&size, blob.data() + 12, 4);
    CHECK(size == blob.size());
}

TEST_CASE("every truncation of a metadata blob is refused as bad metadata") {
    const auto blob = encode_metadata(sample());
    for (std::size_t n = 0; n < blob.size(); ++n) {
        agent_metadata out;
        const auto st = decode_metadata(std::span(blob).first(n), out);
        INFO("first " << n << " bytes: " << st.to_string());
        CHECK(st.code() == status_code::bad_metadata);
    }
}

TEST_CASE("a flipped bit anywhere in a metadata blob is refused as bad metadata") {
    const auto blob = encode_metadata(sample());
    for (std::size_t i = 0; i < blob.size(); ++i) {
        auto copy = blob;
        copy[i] ^= std::byte{0x10};
        agent_metadata out;
        const auto st = decode_metadata(copy, out);
        INFO("byte " << i << ": " << st.to_string());
        CHECK(st.code() == status_code::bad_metadata);
    }
}

TEST_CASE("a blob of another format version names both versions") {
    auto blob = encode_metadata(sample());
    blob[8] = std::byte{2};
    agent_metadata out;
    const auto st = decode_metadata(blob, out);
    CHECK(st.code() == status_code::bad_metadata);
    CHECK_THAT(st.message(), Catch::Contains("version 2") && Catch::Contains("version 1"));
}

TEST_CASE("a well-formed blob with an agent name that is not a file name is refused") {
    auto md = sample();
    md.name = "../etc";
    agent_metadata out;
    const auto st = decode_metadata(encode_metadata(md), out);
    CHECK(st.code() == status_code::bad_metadata);
    CHECK_THAT(st.message(), Catch::Contains("'../etc'"));
}

TEST_CASE("a well-formed blob with an empty region is refused") {
    auto md = sample();
    md.regions[1].region.length = 0;
    agent_metadata out;
    const auto st = decode_metadata(encode_metadata(md), out);
    CHECK(st.code() == status_code::bad_metadata);
    CHECK_THAT(st.message(), Catch::Contains("region 1") && Catch::Contains("empty"));
}

TEST_CASE("bytes that are not metadata at all are refused with their size") {
    agent_metadata out;
    const auto st =
        decode_metadata(bytes("definitely not metadata, but long enough to look at"), out);
    CHECK(st.code() == status_code::bad_metadata);
    CHECK_THAT(st.message(), Catch::Contains("51 bytes") && Catch::Contains("XTELMETA"));
}

}  // namespace agent_metadata_test
