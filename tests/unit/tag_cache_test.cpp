#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "collecting_exporter.hpp"
#include "test_util.hpp"
#include "xtel/core/tag_cache.hpp"
#include "xtel/core/telemetry.hpp"

// A run of transfers with one request id stages the id once (xtel/core/tag_cache.hpp).
namespace tag_cache_test {

using xtel::direction;
using xtel_test::record_keeper;

namespace {

/// A pipeline of record_keeper with an eight-slot ring and no flusher thread, whose attribute
/// cache already holds the attributes its transfers carry: each takes one slot for itself.
struct eight_slots {
    xtel::telemetry<record_keeper> t;
    explicit eight_slots(const std::string& name)
        : t(xtel_test::enabled_config({}),
            name,
            {.staging_capacity = 8, .batch_size = 256, .start_flusher = false}) {
        transfer(0, "");  // its own slot and, the first time, the attributes'
        t.flush();
        record_keeper::clear();
    }
    void transfer(std::uint64_t bytes, std::string_view id) {
        t.record_transfer(direction::tx, bytes, bytes, 1, 2, 3, {}, id);
    }
};

const std::string trace_a = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
const std::string trace_b = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

}  // namespace

TEST_CASE("a run of transfers with one request id stages the id once", "[staging]") {
    eight_slots p("tag_once");
    // Three slots for the first (its own and the id's two), then one each: eight fill the ring.
    for (std::uint64_t i = 1; i <= 7; ++i) {
        p.transfer(i, trace_a);
    }
    CHECK(p.t.stats().records_dropped == 1);
    p.t.flush();
    REQUIRE(record_keeper::ids.size() == 6);
    for (const std::string& id : record_keeper::ids) {
        CHECK(id == trace_a);
    }
}

TEST_CASE("transfers whose ids alternate each reach the exporter with their own", "[staging]") {
    eight_slots p("tag_alternate");
    const std::vector<std::string> ids{trace_a, trace_a, trace_b, "", trace_b, trace_a};
    for (std::size_t i = 0; i < ids.size(); ++i) {
        p.transfer(i + 1, ids[i]);
        p.t.flush();  // each in a round of its own: the ring's copy outlives the round
    }
    CHECK(record_keeper::ids == ids);
}

// The producer's last id may change only with a slot the consumer will read: had the dropped
// transfer's id become the last, the next transfer with it would carry "as last" and reach the
// exporter with the id staged before.
TEST_CASE("a tagged transfer dropped for want of room leaves the last id as it was", "[staging]") {
    eight_slots p("tag_kept");
    p.transfer(1, trace_a);  // three slots
    for (std::uint64_t i = 2; i <= 5; ++i) {
        p.transfer(i, "");  // one each: seven used
    }
    p.transfer(6, trace_b);  // three slots, one left: only the transfer fits, without its id
    p.transfer(7, trace_b);  // no room at all
    CHECK(p.t.stats().records_dropped == 1);
    p.t.flush();
    p.transfer(8, trace_b);
    p.transfer(9, trace_a);
    p.t.flush();
    REQUIRE(record_keeper::ids.size() == 8);
    CHECK(record_keeper::ids[5].empty());  // transfer 6 lost only its id
    CHECK(record_keeper::ids[6] == trace_b);
    CHECK(record_keeper::ids[7] == trace_a);
}

TEST_CASE("the last id compares equal only to the same bytes, at every length", "[staging]") {
    const std::string full(xtel::max_request_id, 'x');
    for (std::size_t n = 1; n <= xtel::max_request_id; ++n) {
        CAPTURE(n);
        const std::string id = full.substr(0, n);
        xtel::detail::tag_cache c;
        CHECK_FALSE(c.is_last(id));
        c.remember(id);
        CHECK(c.is_last(id));
        CHECK_FALSE(c.is_last(full.substr(0, n - 1)));
        for (std::size_t at = 0; at < n; ++at) {
            std::string other = id;
            other[at] = 'y';
            if (c.is_last(other)) {
                FAIL_CHECK("a difference at byte " << at << " compared equal");
            }
        }
    }
}

// The hot path's one check of both (same_tag_and_attributes): a difference in any byte of the id
// or of the attributes, or in the id's length, makes it false.
TEST_CASE("the id and the attributes compare equal together only when both are the last",
          "[staging]") {
    const std::string full(xtel::max_request_id, 'x');
    xtel::detail::attribute_cache sent;
    const std::uint64_t set[2] = {0x0102030405060708ULL, 0x1112131415161718ULL};
    sent.store(3, set[0], set[1]);
    for (std::size_t n = 1; n <= xtel::max_request_id; ++n) {
        CAPTURE(n);
        const std::string id = full.substr(0, n);
        xtel::detail::tag_cache c;
        CHECK_FALSE(xtel::detail::same_tag_and_attributes(c, id, sent, set));
        c.remember(id);
        CHECK(xtel::detail::same_tag_and_attributes(c, id, sent, set));
        CHECK_FALSE(xtel::detail::same_tag_and_attributes(c, full.substr(0, n - 1), sent, set));
        if (n < xtel::max_request_id) {
            CHECK_FALSE(xtel::detail::same_tag_and_attributes(c, full.substr(0, n + 1), sent, set));
        }
        for (std::size_t at = 0; at < n; ++at) {
            std::string other = id;
            other[at] = 'y';
            if (xtel::detail::same_tag_and_attributes(c, other, sent, set)) {
                FAIL_CHECK("a difference at byte " << at << " of the id compared equal");
            }
        }
        for (std::size_t at = 0; at < sizeof set; ++at) {
            std::uint64_t other[2] = {set[0], set[1]};
            reinterpret_cast<unsigned char*>(other)[at] ^= 0x40;
            if (xtel::detail::same_tag_and_attributes(c, id, sent, other)) {
                FAIL_CHECK("a difference at byte " << at << " of the attributes compared equal");
            }
        }
    }
}

}  // namespace tag_cache_test
