#pragma once
/// gzip compression of answer bodies (private to src/), with zlib.

#include <string>
#include <string_view>

namespace xtel::http {

/// `in` as one gzip member (RFC 1952), compressed at zlib `level` (1 fastest to 9 smallest).
/// Throws std::bad_alloc when zlib runs out of memory, std::runtime_error on another failure
/// of zlib (a level out of range).
std::string gzip(std::string_view in, int level);

}  // namespace xtel::http
