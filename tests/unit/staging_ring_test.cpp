// The per-thread staging ring and its slot layouts: a drain stops at its limit, except that a
// record's slots (a transfer, its extension and its request id), published together, are never
// split between two drains; events and ids written across two slots read back whole.

#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

#include "xtel/core/ring.hpp"

namespace staging_ring_test {

namespace d = xtel::detail;

namespace {

void stage_one(d::staging_ring& ring, std::uint64_t value) {
    d::staged_record* r = ring.try_claim();
    REQUIRE(r != nullptr);
    r->timestamp_us = value;
    r->value = value;
    r->kind = d::record_kind::transfer_tx;
    r->flags = 0;
    ring.publish();
}

/// A transfer, its extension and its id: four slots published together.
void stage_tagged(d::staging_ring& ring, std::uint64_t value, std::string_view id) {
    d::staged_record* r = ring.try_claim_n(4);
    REQUIRE(r != nullptr);
    r->timestamp_us = value;
    r->value = value;
    r->kind = d::record_kind::transfer_tx;
    r->flags = d::slot_flag::continued | d::slot_flag::extended;
    d::staged_record* x = ring.next_of(r);
    d::ext_layout::write(*x, value, value, value, true);
    d::staged_record* h = ring.next_of(x);
    d::tag_layout::write(*h, *ring.next_of(h), id);
    ring.publish_n(4);
}

struct seen {
    d::record_kind kind;
    std::uint64_t value;  // a transfer's value; 0 for the other slots
    std::string id;       // a tag's request id, read at its tail
};

std::vector<seen> drain(d::staging_ring& ring, std::size_t limit) {
    std::vector<seen> out;
    const d::staged_record* tag_head = nullptr;
    ring.drain(
        [&](const d::staged_record& r) {
            seen s{r.kind, 0, {}};
            if (r.kind == d::record_kind::transfer_tag) {
                tag_head = &r;
            } else if (r.kind == d::record_kind::tag_tail) {
                REQUIRE(tag_head != nullptr);
                d::tag_layout::read(*tag_head, r, s.id);
            } else if (r.kind == d::record_kind::transfer_tx) {
                s.value = r.value;
            }
            out.push_back(s);
        },
        limit);
    return out;
}

}  // namespace

TEST_CASE("a drain that reaches its limit inside a record takes the rest of its slots with it",
          "[ring]") {
    const std::size_t limit = GENERATE(2, 3, 4);
    CAPTURE(limit);
    d::staging_ring ring(16);
    stage_one(ring, 1);
    stage_tagged(ring, 2, "req-2");
    stage_one(ring, 3);
    const auto first = drain(ring, limit);
    REQUIRE(first.size() == 5);
    CHECK(first[1].value == 2);
    CHECK(first[2].kind == d::record_kind::transfer_ext);
    CHECK(first[3].kind == d::record_kind::transfer_tag);
    CHECK(first[4].id == "req-2");
    const auto rest = drain(ring, limit);
    REQUIRE(rest.size() == 1);
    CHECK(rest[0].value == 3);
    CHECK(ring.empty());
}

// Every slot of a record is written with its flags, so a slot reused from a record that
// continued reads as it is now. A drain whose limit ended on a slot that only looked continued
// would take one slot more than its limit, and could split the next record.
TEST_CASE("a drain that reaches its limit at a record's end stops there, whatever its slots held",
          "[ring]") {
    d::staging_ring ring(8);
    // Round 1 leaves slots 1 to 4 holding slots that continue.
    stage_one(ring, 10);
    stage_tagged(ring, 11, "first");
    REQUIRE(drain(ring, 16).size() == 5);
    // Round 2, over them: one-slot records in slots 5 to 7 and 0 to 4.
    for (std::uint64_t v = 20; v < 28; ++v) {
        stage_one(ring, v);
    }
    const auto got = drain(ring, 3);
    REQUIRE(got.size() == 3);
    CHECK(got[2].value == 22);
    const auto next = drain(ring, 2);  // slots 0 and 1: held continued slots in round 1
    REQUIRE(next.size() == 2);
    CHECK(next[1].value == 24);
    CHECK(drain(ring, 16).size() == 3);
    CHECK(ring.empty());
}

TEST_CASE("a request id across two slots reads back whole, and its slots say where it ends",
          "[ring]") {
    const std::string id = GENERATE(std::string(), std::string("a"), std::string(29, 'h'),
                                    std::string(30, 't'), std::string(xtel::max_request_id, 'x'),
                                    std::string(xtel::max_request_id + 9, 'y'));
    CAPTURE(id.size());
    d::staged_record head{};
    d::staged_record tail{};
    head.flags = 0xff;  // reused slots
    tail.flags = 0xff;
    d::tag_layout::write(head, tail, id);
    CHECK(head.kind == d::record_kind::transfer_tag);
    CHECK(head.flags == d::slot_flag::continued);
    CHECK(tail.kind == d::record_kind::tag_tail);
    CHECK(tail.flags == 0);
    std::string got = "kept:";
    d::tag_layout::read(head, tail, got);
    CHECK(got == "kept:" + id.substr(0, xtel::max_request_id));
}

TEST_CASE("a transfer's extension slot reads back its attribute words and full request count",
          "[ring]") {
    const bool continued = GENERATE(false, true);
    d::staged_record x{};
    x.flags = 0xff;  // a reused slot
    const std::uint64_t w0 = 0x0123456789abcdefULL;
    const std::uint64_t w1 = 0xfedcba9876543210ULL;
    const std::uint64_t requests = (std::uint64_t{1} << 40) + 65536;  // past the slot's 16 bits
    d::ext_layout::write(x, w0, w1, requests, continued);
    CHECK(x.kind == d::record_kind::transfer_ext);
    CHECK(x.flags == (continued ? d::slot_flag::continued : 0));
    std::uint64_t w[2] = {};
    std::uint64_t got = 0;
    d::ext_layout::read(x, w, got);
    CHECK(w[0] == w0);
    CHECK(w[1] == w1);
    CHECK(got == requests);
}

TEST_CASE("an event across two slots reads back with every byte of its name", "[ring]") {
    xtel::event_name name{};
    std::string full(sizeof(name), '\0');
    for (std::size_t i = 0; i < full.size(); ++i) {
        full[i] = static_cast<char>('A' + i % 26);
    }
    std::memcpy(&name, full.data(), sizeof name);
    d::staged_record head{};
    d::staged_record tail{};
    head.flags = 0xff;
    tail.flags = 0xff;
    d::event_layout::write(head, tail, 123, 456, xtel::category::backend, xtel::value_kind::gauge,
                           name);
    CHECK(head.flags == d::slot_flag::continued);
    CHECK(tail.flags == 0);
    const xtel::event e = d::event_layout::read(head, tail);
    CHECK(e.timestamp_us == 123);
    CHECK(e.value == 456);
    CHECK(e.cat == xtel::category::backend);
    CHECK(e.kind == xtel::value_kind::gauge);
    CHECK(std::memcmp(&e.name, full.data(), sizeof e.name) == 0);
}

TEST_CASE(
    "a full ring refuses a record of several slots, then a single one, and takes both once "
    "drained",
    "[ring]") {
    d::staging_ring ring(4);
    for (std::uint64_t v = 1; v <= 4; ++v) {
        stage_one(ring, v);
    }
    CHECK(ring.try_claim_n(2) == nullptr);
    // The refused claim must not leave the next single claim a slot still unread (a pair's
    // check mark once let it past the full check, onto the oldest record).
    CHECK(ring.try_claim() == nullptr);
    CHECK(ring.try_claim() == nullptr);
    CHECK(drain(ring, 1).size() == 1);  // one slot free: a single fits, two do not
    CHECK(ring.try_claim_n(2) == nullptr);
    stage_one(ring, 5);
    CHECK(ring.try_claim() == nullptr);
    const auto rest = drain(ring, 16);
    REQUIRE(rest.size() == 4);
    CHECK(rest[0].value == 2);
    CHECK(rest[3].value == 5);
    stage_tagged(ring, 6, "id");  // empty again: room for four
    CHECK(drain(ring, 16).size() == 4);
}

TEST_CASE("a record's slots wrap around the ring's end in order", "[ring]") {
    d::staging_ring ring(8);
    for (std::uint64_t v = 1; v <= 6; ++v) {
        stage_one(ring, v);
    }
    REQUIRE(drain(ring, 16).size() == 6);
    stage_tagged(ring, 7, "wraps");  // slots 6, 7, 0 and 1
    const auto got = drain(ring, 16);
    REQUIRE(got.size() == 4);
    CHECK(got[0].value == 7);
    CHECK(got[3].id == "wraps");
}

TEST_CASE("the attribute cache's ways are spread and in range", "[ring]") {
    std::set<unsigned> ways;
    for (std::uint64_t peer = 0; peer < 64; ++peer) {
        const unsigned w = d::attribute_cache::way_of(peer << 32, 0);
        CHECK(w < d::attribute_cache::ways);
        ways.insert(w);
    }
    // 64 peers over 16 ways: a hash that ignored the peer would use one.
    CHECK(ways.size() >= 12);
}

}  // namespace staging_ring_test
