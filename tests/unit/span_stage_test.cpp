// The span stage's reading of request ids: a run of one id read once, and an id rewritten in
// place between rounds read anew.

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "xtel/core/label_table.hpp"
#include "xtel/trace/span_stage.hpp"

namespace span_stage_test {

namespace {

/// A stage that samples nothing but failures (sample fraction 0, the slow threshold out of
/// reach): each tagged record's trace is still read, for the exemplars.
xtel::trace::span_stage quiet_stage() {
    xtel::trace::sampler_settings s;
    s.sample = 0;
    s.slow_us = xtel::trace::max_slow_us;
    return {"a1", xtel::process_rank{}, s, 1};
}

xtel::transfer_record tagged(std::string_view id) {
    xtel::transfer_record r;
    r.timestamp_us = 100;
    r.xfer_us = 5;
    r.request_id = id;
    return r;
}

}  // namespace

TEST_CASE("a tagged round's records each carry the trace their own id names") {
    auto stage = quiet_stage();
    const xtel::label_table labels;
    // One buffer, as a round's text: the id at the same address is rewritten between rounds.
    std::string text = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    const std::string other = "00-1bf7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    std::vector<xtel::transfer_record> round{tagged(other), tagged(text), tagged(text)};
    stage.sample(round, labels, 1);
    REQUIRE(stage.traces().size() == 3);
    CHECK(stage.traces()[0].trace_id[0] == 0x1b);
    CHECK(stage.traces()[1].trace_id[0] == 0x0a);
    CHECK(stage.traces()[2].trace_id[0] == 0x0a);
    CHECK(stage.traces()[2].index == 2);

    text[3] = '2';  // the next round's id, written where the last one's was
    std::vector<xtel::transfer_record> next{tagged(text)};
    stage.sample(next, labels, 2);
    REQUIRE(stage.traces().size() == 1);
    CHECK(stage.traces()[0].trace_id[0] == 0x2a);
    CHECK(stage.spans().empty());
}

}  // namespace span_stage_test
