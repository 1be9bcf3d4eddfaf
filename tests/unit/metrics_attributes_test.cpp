#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "xtel/metrics/attributes.hpp"

namespace metrics_attributes_test {

using namespace xtel::metrics;

namespace {

std::vector<std::string> names_of(const telemetry_data& d) {
    std::vector<std::string> out;
    for (const auto& f : d.fields) {
        out.push_back(f.name);
    }
    return out;
}

}  // namespace

TEST_CASE("sanitizing lower-cases and replaces every character outside [a-z0-9_]") {
    CHECK(sanitize_field_value("NVIDIA H100 80GB HBM3") == "nvidia_h100_80gb_hbm3");
    CHECK(sanitize_field_value("prefill-0.rack7") == "prefill_0_rack7");
    CHECK(sanitize_field_value("already_clean_42") == "already_clean_42");
    CHECK(sanitize_field_value("a\"b\\c\n") == "a_b_c_");
    // Each byte of a multi-byte character is replaced: a label value stays ASCII.
    CHECK(sanitize_field_value("gpu\xC3\xA9") == "gpu__");
    CHECK(sanitize_field_value("") == "");
}

TEST_CASE("the GPU identifier counts each device name and sorts the names") {
    const std::vector<std::string> two = {"NVIDIA H100", "NVIDIA H100"};
    CHECK(gpu_identifier(two) == "2x_nvidia_h100");
    const std::vector<std::string> mixed = {"NVIDIA H100", "NVIDIA A100-SXM4-80GB", "NVIDIA H100",
                                            "NVIDIA H100"};
    CHECK(gpu_identifier(mixed) == "1x_nvidia_a100_sxm4_80gb_3x_nvidia_h100");
    CHECK(gpu_identifier(std::vector<std::string>{"Tesla T4"}) == "1x_tesla_t4");
    CHECK(gpu_identifier(std::vector<std::string>{}) == "");
}

TEST_CASE("the default registry labels by eight string attributes in a fixed order") {
    const auto r = default_attributes();
    CHECK(r.names() == std::vector<std::string>{"backend", "operation", "direction", "local_memory",
                                                "remote_memory", "remote_agent", "status", "gpu"});
    for (const auto& a : r.entries()) {
        CHECK(a.type == attribute_type::string);
        CHECK(std::get<std::string>(a.default_value) == "unknown");
        CHECK(a.raw_key == a.name);
    }
    CHECK_NOTHROW(check_transfer_keys(r));
}

TEST_CASE("extraction keeps strings as written and booleans and integers and lists as they are") {
    attribute_registry r({
        {"peer", "peer", attribute_type::string, std::string("unknown"), 1},
        {"ok", "ok", attribute_type::boolean, false, 2},
        {"rank", "rank", attribute_type::integer, std::int64_t{-1}, 3},
        {"devices", "devices", attribute_type::list, std::vector<std::string>{}, 4},
    });
    raw_record raw;
    raw.set("peer", std::string("Decode-7.East"));
    raw.set("ok", true);
    raw.set("rank", std::int64_t{-42});
    raw.set("devices", std::vector<std::string>{"NVIDIA H100", "Mixed Case"});
    const auto d = extract_telemetry_data(raw, r);
    REQUIRE(names_of(d) == std::vector<std::string>{"peer", "ok", "rank", "devices"});
    CHECK(std::get<std::string>(d.fields[0].value) == "Decode-7.East");
    CHECK(d.fields[0].label == "Decode-7.East");
    CHECK(std::get<bool>(d.fields[1].value) == true);
    CHECK(d.fields[1].label == "true");
    CHECK(std::get<std::int64_t>(d.fields[2].value) == -42);
    CHECK(d.fields[2].label == "-42");
    CHECK(std::get<std::vector<std::string>>(d.fields[3].value) ==
          std::vector<std::string>{"NVIDIA H100", "Mixed Case"});
    CHECK(d.fields[3].label == "NVIDIA H100,Mixed Case");
}

TEST_CASE("a missing key, an empty string or a value of another type takes the default") {
    attribute_registry r({
        {"peer", "peer", attribute_type::string, std::string("Nobody Yet"), 1},
        {"ok", "ok", attribute_type::boolean, false, 2},
        {"rank", "rank", attribute_type::integer, std::int64_t{7}, 3},
    });
    raw_record raw;
    raw.set("peer", std::string(""));
    raw.set("ok", std::string("yes"));
    const auto d = extract_telemetry_data(raw, r);
    // The string default is used as written, like any value.
    CHECK(d.fields[0].label == "Nobody Yet");
    CHECK(d.fields[1].label == "false");
    CHECK(d.fields[2].label == "7");
}

TEST_CASE("entries are ordered by their order, ties in the order they were added") {
    attribute_registry r;
    r.add({"c", "status", attribute_type::string, std::string("x"), 30});
    r.add({"a", "backend", attribute_type::string, std::string("x"), 10});
    r.add({"b2", "operation", attribute_type::string, std::string("x"), 20});
    r.add({"b1", "direction", attribute_type::string, std::string("x"), 20});
    CHECK(r.names() == std::vector<std::string>{"a", "b2", "b1", "c"});
}

TEST_CASE("adding one entry to the registry adds one attribute to the normalized data") {
    auto r = default_attributes();
    r.add({"ok", "success", attribute_type::boolean, false, 75});
    xtel::label_table labels;
    xtel::transfer_attributes a;
    a.backend = labels.intern("ucx");
    a.remote_agent = labels.intern("Decode-3");
    a.op = xtel::transfer_op::read;
    a.status = xtel::transfer_status::success;
    const auto d = extract_telemetry_data(
        transfer_raw_record(a, xtel::direction::rx, labels, {"me", "host"}), r);
    CHECK(names_of(d) == std::vector<std::string>{"backend", "operation", "direction",
                                                  "local_memory", "remote_memory", "remote_agent",
                                                  "status", "ok", "gpu"});
    std::vector<std::string> labels_of;
    for (const auto& f : d.fields) {
        labels_of.push_back(f.label);
    }
    CHECK(labels_of == std::vector<std::string>{"ucx", "read", "rx", "dram", "dram", "Decode-3",
                                                "success", "true", "unknown"});
}

TEST_CASE("a transfer's raw record leaves out label ids that are unknown or never issued") {
    xtel::label_table labels;
    xtel::transfer_attributes a;
    a.backend = 999;  // never issued
    a.remote_agent = xtel::label_table::overflow;
    a.gpu = labels.intern("2x_nvidia_h100");
    a.local_memory = xtel::memory_kind::vram;
    a.status = xtel::transfer_status::error;
    const auto raw = transfer_raw_record(a, xtel::direction::tx, labels, {"agent-1", "node7"});
    CHECK(raw.find("backend") == nullptr);
    REQUIRE(raw.find("remote_agent") != nullptr);
    CHECK(std::get<std::string>(*raw.find("remote_agent")) == "other");
    CHECK(std::get<std::string>(*raw.find("gpu")) == "2x_nvidia_h100");
    CHECK(std::get<std::string>(*raw.find("local_memory")) == "vram");
    CHECK(std::get<std::string>(*raw.find("status")) == "error");
    CHECK(std::get<bool>(*raw.find("success")) == false);
    CHECK(std::get<std::string>(*raw.find("direction")) == "tx");
    CHECK(std::get<std::string>(*raw.find("agent_name")) == "agent-1");
    CHECK(std::get<std::string>(*raw.find("hostname")) == "node7");
}

TEST_CASE("a failed transfer's status attribute names the kind of its failure") {
    const xtel::label_table labels;
    xtel::transfer_attributes a;
    a.status = xtel::failed_with(xtel::status_code::timed_out);
    const auto raw = transfer_raw_record(a, xtel::direction::rx, labels, {"agent-1", "node7"});
    CHECK(std::get<std::string>(*raw.find("status")) == "timed_out");
    CHECK(std::get<bool>(*raw.find("success")) == false);
    // ok and in_progress are not failures: such a status is a failure of no known kind.
    CHECK(xtel::failed_with(xtel::status_code::ok) == xtel::transfer_status::error);
    CHECK(xtel::failed_with(xtel::status_code::in_progress) == xtel::transfer_status::error);
    CHECK(xtel::to_string(xtel::failed_with(xtel::status_code::remote_disconnected)) ==
          "remote_disconnected");
    CHECK(xtel::to_string(xtel::transfer_status::success) == "success");
}

TEST_CASE("a bad registry entry is refused with a message naming it and what is accepted") {
    attribute_registry r = default_attributes();
    CHECK_THROWS_WITH(r.add({"9lives", "backend", attribute_type::string, std::string("x"), 1}),
                      Catch::Contains("'9lives'") && Catch::Contains("[a-zA-Z_][a-zA-Z0-9_]*"));
    CHECK_THROWS_WITH(r.add({"__x", "backend", attribute_type::string, std::string("x"), 1}),
                      Catch::Contains("not starting with"));
    CHECK_THROWS_WITH(r.add({"backend", "backend", attribute_type::string, std::string("x"), 1}),
                      Catch::Contains("'backend' is already in the registry"));
    CHECK_THROWS_WITH(r.add({"x", "", attribute_type::string, std::string("x"), 1}),
                      Catch::Contains("empty raw key"));
    CHECK_THROWS_WITH(r.add({"x", "success", attribute_type::boolean, std::string("no"), 1}),
                      Catch::Contains("of type boolean but its default 'no' is a string"));
    CHECK_THROWS_AS(r.add({"x", "", attribute_type::string, std::string("x"), 1}), xtel::error);
    CHECK(r.size() == 8);
}

TEST_CASE("an entry reading a raw key transfers lack, or with another type, is refused") {
    attribute_registry typo(
        {{"peer", "remote_agnet", attribute_type::string, std::string("u"), 1}});
    CHECK_THROWS_WITH(check_transfer_keys(typo), Catch::Contains("raw key 'remote_agnet'") &&
                                                     Catch::Contains("remote_agent (string)") &&
                                                     Catch::Contains("success (boolean)"));
    attribute_registry wrong_type({{"ok", "success", attribute_type::string, std::string("u"), 1}});
    CHECK_THROWS_WITH(check_transfer_keys(wrong_type),
                      Catch::Contains("raw key 'success' holds a boolean"));
}

}  // namespace metrics_attributes_test
