// ASCII letter case and hex digits (include/xtel/core/ascii.hpp), the one helper every
// component spells ids, escapes and case-insensitive keywords with.

#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "xtel/core/ascii.hpp"

namespace core_ascii_test {

namespace ascii = xtel::ascii;

TEST_CASE("lower changes ASCII capitals only", "[ascii]") {
    CHECK(ascii::lower('A') == 'a');
    CHECK(ascii::lower('Z') == 'z');
    CHECK(ascii::lower('a') == 'a');
    CHECK(ascii::lower('@') == '@');        // just before 'A'
    CHECK(ascii::lower('[') == '[');        // just after 'Z'
    CHECK(ascii::lower('\xc4') == '\xc4');  // a byte of UTF-8 stays as it is, whatever the locale
    CHECK(ascii::lower(std::string_view("Content-TYPE: X\xc3\x84")) == "content-type: x\xc3\x84");
}

TEST_CASE("equals_ignoring_case compares ASCII letters without case, and lengths", "[ascii]") {
    CHECK(ascii::equals_ignoring_case("Accept-Encoding", "accept-encoding"));
    CHECK_FALSE(ascii::equals_ignoring_case("gzip", "gzip "));
    CHECK_FALSE(ascii::equals_ignoring_case("[", "{"));  // 0x5b and 0x7b differ by 0x20 too
    static_assert(ascii::equals_ignoring_case("NOP", "nop"));
}

TEST_CASE("hex_value reads digits of either case; lower_hex_value refuses capitals", "[ascii]") {
    const std::vector<std::pair<char, int>> table = {
        {'0', 0},  {'9', 9},  {'a', 10}, {'f', 15}, {'A', 10}, {'F', 15}, {'g', -1},
        {'G', -1}, {'/', -1}, {':', -1}, {'`', -1}, {'@', -1}, {' ', -1}};
    for (const auto& [c, value] : table) {
        INFO("digit '" << c << "'");
        CHECK(ascii::hex_value(c) == value);
        CHECK(ascii::lower_hex_value(c) == (c >= 'A' && c <= 'F' ? -1 : value));
    }
}

TEST_CASE("to_hex writes two lower-case digits per byte, high nibble first", "[ascii]") {
    const std::vector<std::uint8_t> bytes = {0x00, 0x0f, 0xa0, 0xff, 0x4b};
    CHECK(ascii::to_hex(bytes) == "000fa0ff4b");
    CHECK(ascii::to_hex(std::vector<std::uint8_t>{}).empty());
    constexpr std::array<std::uint8_t, 2> id = {0xb7, 0xad};
    constexpr auto fixed = ascii::to_hex_array(id);
    static_assert(fixed[0] == 'b' && fixed[1] == '7' && fixed[2] == 'a' && fixed[3] == 'd');
    CHECK(std::string(fixed.begin(), fixed.end()) == "b7ad");
}

TEST_CASE("hex written by to_hex reads back with hex_value", "[ascii]") {
    for (int b = 0; b < 256; ++b) {
        const std::uint8_t byte = static_cast<std::uint8_t>(b);
        const std::string two = ascii::to_hex(std::span(&byte, 1));
        REQUIRE(two.size() == 2);
        CHECK(ascii::lower_hex_value(two[0]) * 16 + ascii::lower_hex_value(two[1]) == b);
    }
}

}  // namespace core_ascii_test
