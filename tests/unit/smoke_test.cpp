#include <catch2/catch.hpp>

#include "xtel/event.hpp"

TEST_CASE("an event fits one cache line with its slot sequence") {
    CHECK(sizeof(xtel::event) + sizeof(std::uint64_t) == 64);
}
