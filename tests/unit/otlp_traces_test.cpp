// The OTLP traces client: span records encoded as an ExportTraceServiceRequest, decoded back
// with the messages of proto/ (the integration tests decode them with the OpenTelemetry JS
// project's definitions instead), its JSON form, the OTEL_* settings for traces, and the
// sender against a local server.

#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "fake_receiver.hpp"
#include "otlp_trace.pb.h"
#include "test_util.hpp"
#include "xtel/core/error.hpp"
#include "xtel/push/otlp_traces.hpp"

namespace otlp_traces_test {

using namespace xtel;
using namespace std::chrono_literals;
using xtel_test::eventually;
namespace pb = xtel::otlp;
using trace::span_ring::span_record;

namespace {

constexpr std::uint64_t start_us = 1'700'000'000'000'123;

/// A span of prefill-0 writing to decode-1: 3 descriptors, 4096 bytes over 2 lanes, 250 µs.
span_record record(std::uint8_t seed) {
    span_record r;
    for (std::size_t i = 0; i < r.trace.size(); ++i) {
        r.trace[i] = static_cast<std::uint8_t>(seed + i);
    }
    for (std::size_t i = 0; i < r.span.size(); ++i) {
        r.span[i] = static_cast<std::uint8_t>(0xA0 + seed + i);
    }
    r.start_us = start_us;
    r.end_us = start_us + 250;
    r.bytes = 4096;
    r.descriptors = 3;
    r.lanes = 2;
    r.rank = 3;
    r.local_rank = 1;
    r.operation = 1;
    r.kind = static_cast<std::uint8_t>(trace::span_ring::side::initiator);
    r.reason = 2;
    r.origin = 3;
    trace::span_ring::set_text(r.agent, "prefill-0");
    trace::span_ring::set_text(r.remote_agent, "decode-1");
    trace::span_ring::set_text(r.request_id, "req-42");
    return r;
}

push::otlp_resource resource() {
    return {"inference", "node-7", {{"deployment.environment", "test"}}};
}

pb::ExportTraceServiceRequest decode(const std::string& body) {
    pb::ExportTraceServiceRequest r;
    REQUIRE(r.ParseFromString(body));
    return r;
}

pb::ExportTraceServiceRequest encode(std::vector<push::otlp_agent_spans> agents) {
    return decode(push::encode_spans(agents, resource(), push::otlp_encoding::protobuf));
}

std::map<std::string, std::string> attributes(
    const google::protobuf::RepeatedPtrField<pb::KeyValue>& kvs) {
    std::map<std::string, std::string> out;
    for (const auto& kv : kvs) {
        const auto& v = kv.value();
        CHECK(out.count(kv.key()) == 0);
        out[kv.key()] = v.value_case() == pb::AnyValue::kIntValue
                            ? "int:" + std::to_string(v.int_value())
                            : v.string_value();
    }
    return out;
}

template <std::size_t N>
std::string bytes(const std::array<std::uint8_t, N>& id) {
    return std::string(reinterpret_cast<const char*>(id.data()), N);
}

}  // namespace

TEST_CASE("each agent's spans are one resource, the one its metrics have, with scope xtel",
          "[otlp_traces]") {
    auto other = record(9);
    other.rank = -1;
    other.local_rank = -1;
    const auto r = encode(
        {{"prefill-0", 4242, {record(1), record(2)}}, {"empty", 1, {}}, {"decode-1", 0, {other}}});
    REQUIRE(r.resource_spans_size() == 2);
    CHECK(attributes(r.resource_spans(0).resource().attributes()) ==
          std::map<std::string, std::string>{{"service.name", "inference"},
                                             {"service.instance.id", "node-7:prefill-0"},
                                             {"host.name", "node-7"},
                                             {"deployment.environment", "test"},
                                             {"xtel.agent.name", "prefill-0"},
                                             {"xtel.rank", "int:3"},
                                             {"xtel.local_rank", "int:1"},
                                             {"process.pid", "int:4242"}});
    // No rank, no pid: left out rather than made up.
    const auto second = attributes(r.resource_spans(1).resource().attributes());
    CHECK(second.at("xtel.agent.name") == "decode-1");
    CHECK(second.count("xtel.rank") == 0);
    CHECK(second.count("process.pid") == 0);
    REQUIRE(r.resource_spans(0).scope_spans_size() == 1);
    CHECK(r.resource_spans(0).scope_spans(0).scope().name() == "xtel");
    CHECK_FALSE(r.resource_spans(0).scope_spans(0).scope().version().empty());
    CHECK(r.resource_spans(0).scope_spans(0).spans_size() == 2);
    CHECK(r.resource_spans(1).scope_spans(0).spans_size() == 1);
}

TEST_CASE("a span carries its record's ids, times, kind, name and flags", "[otlp_traces]") {
    auto rec = record(1);
    rec.trace_flags = 0x01;
    const auto r = encode({{"prefill-0", 4242, {rec}}});
    const pb::Span& s = r.resource_spans(0).scope_spans(0).spans(0);
    CHECK(s.trace_id() == bytes(rec.trace));
    CHECK(s.span_id() == bytes(rec.span));
    // A root span has no parent: the field is absent, not sixteen zeros.
    CHECK(s.parent_span_id().empty());
    CHECK(s.name() == "write decode-1");
    CHECK(s.kind() == pb::Span::SPAN_KIND_CLIENT);
    CHECK(s.start_time_unix_nano() == start_us * 1000);
    CHECK(s.end_time_unix_nano() == (start_us + 250) * 1000);
    // The trace-flags, and "the parent is not remote" known (there is none).
    CHECK(s.flags() == 0x101);
    CHECK_FALSE(s.has_status());
}

TEST_CASE("a span with a parent names it, remote, and a target's span is a server's",
          "[otlp_traces]") {
    auto rec = record(1);
    rec.parent = {1, 2, 3, 4, 5, 6, 7, 8};
    rec.kind = static_cast<std::uint8_t>(trace::span_ring::side::target);
    rec.operation = 0;
    rec.origin = 1;
    const auto r = encode({{"decode-1", 7, {rec}}});
    const pb::Span& s = r.resource_spans(0).scope_spans(0).spans(0);
    CHECK(s.parent_span_id() == std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8));
    CHECK(s.kind() == pb::Span::SPAN_KIND_SERVER);
    CHECK(s.name() == "read decode-1");
    CHECK(s.flags() == 0x300);
    CHECK(attributes(s.attributes()).at("xtel.trace.origin") == "traceparent");
}

TEST_CASE("a span's attributes are the transfer's, under xtel's names", "[otlp_traces]") {
    const auto r = encode({{"prefill-0", 4242, {record(1)}}});
    CHECK(attributes(r.resource_spans(0).scope_spans(0).spans(0).attributes()) ==
          std::map<std::string, std::string>{{"xtel.operation", "write"},
                                             {"xtel.peer.agent", "decode-1"},
                                             {"xtel.transfer.bytes", "int:4096"},
                                             {"xtel.transfer.descriptors", "int:3"},
                                             {"xtel.transfer.lanes", "int:2"},
                                             {"xtel.transfer.status", "ok"},
                                             {"xtel.transfer.status_code", "int:0"},
                                             {"xtel.request_id", "req-42"},
                                             {"xtel.span.reason", "slow"},
                                             {"xtel.trace.origin", "derived"}});
}

TEST_CASE("a failed transfer's span has status ERROR, error.type and a failure event",
          "[otlp_traces]") {
    auto rec = record(1);
    rec.status = 8;  // timed_out
    rec.reason = 1;
    rec.lanes = 0;
    trace::span_ring::set_text(rec.request_id, "");
    const auto r = encode({{"prefill-0", 4242, {rec}}});
    const pb::Span& s = r.resource_spans(0).scope_spans(0).spans(0);
    REQUIRE(s.has_status());
    CHECK(s.status().code() == pb::Status::STATUS_CODE_ERROR);
    CHECK(s.status().message() == "transfer failed: timed_out");
    const auto attrs = attributes(s.attributes());
    CHECK(attrs.at("error.type") == "timed_out");
    CHECK(attrs.at("xtel.transfer.status") == "timed_out");
    CHECK(attrs.at("xtel.transfer.status_code") == "int:8");
    CHECK(attrs.at("xtel.span.reason") == "failed");
    // Unknown lanes and no request id: left out.
    CHECK(attrs.count("xtel.transfer.lanes") == 0);
    CHECK(attrs.count("xtel.request_id") == 0);
    REQUIRE(s.events_size() == 2);
    CHECK(s.events(1).name() == "failure");
    CHECK(s.events(1).time_unix_nano() == (start_us + 250) * 1000);
}

TEST_CASE("a span's events are its post at the start and its completion at the end",
          "[otlp_traces]") {
    const auto r = encode({{"prefill-0", 4242, {record(1)}}});
    const pb::Span& s = r.resource_spans(0).scope_spans(0).spans(0);
    REQUIRE(s.events_size() == 2);
    CHECK(s.events(0).name() == "post");
    CHECK(s.events(0).time_unix_nano() == start_us * 1000);
    CHECK(s.events(1).name() == "completion");
    CHECK(s.events(1).time_unix_nano() == (start_us + 250) * 1000);
}

TEST_CASE("a span with no peer is named by its operation alone", "[otlp_traces]") {
    auto rec = record(1);
    trace::span_ring::set_text(rec.remote_agent, "");
    const auto r = encode({{"prefill-0", 4242, {rec}}});
    const pb::Span& s = r.resource_spans(0).scope_spans(0).spans(0);
    CHECK(s.name() == "write");
    CHECK(attributes(s.attributes()).count("xtel.peer.agent") == 0);
}

TEST_CASE("OTLP JSON traces write ids in hex, 64-bit times as strings, kind and flags as numbers",
          "[otlp_traces]") {
    auto failed = record(2);
    failed.status = 7;
    failed.parent = {0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31};
    const std::vector<push::otlp_agent_spans> agents{{"prefill-0", 4242, {record(1), failed}}};
    const std::string json = push::encode_spans(agents, resource(), push::otlp_encoding::json);
    CHECK(json.starts_with(
        R"({"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"inference"}})"));
    CHECK(xtel_test::count_of(json, R"("scope":{"name":"xtel","version":")") == 1);
    CHECK(
        xtel_test::count_of(
            json,
            R"({"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"a1a2a3a4a5a6a7a8","flags":256,"name":"write decode-1","kind":3,"startTimeUnixNano":"1700000000000123000","endTimeUnixNano":"1700000000000373000","attributes":[)") ==
        1);
    CHECK(xtel_test::count_of(json, R"("parentSpanId":"b7ad6b7169203331","flags":768)") == 1);
    CHECK(xtel_test::count_of(json,
                              R"({"key":"xtel.transfer.bytes","value":{"intValue":"4096"}})") == 2);
    CHECK(
        xtel_test::count_of(
            json,
            R"("events":[{"timeUnixNano":"1700000000000123000","name":"post"},{"timeUnixNano":"1700000000000373000","name":"completion"}])") ==
        1);
    CHECK(xtel_test::count_of(
              json, R"("status":{"message":"transfer failed: remote_disconnected","code":2})") ==
          1);
    // The JSON says what the protobuf says: the same spans, in the same order.
    const auto r = decode(push::encode_spans(agents, resource(), push::otlp_encoding::protobuf));
    CHECK(r.resource_spans(0).scope_spans(0).spans_size() == 2);
    CHECK(xtel_test::count_of(json, R"("spanId")") == 2);
}

namespace {

push::otlp_trace_options settings(std::map<std::string, std::string> vars) {
    const auto o = push::otlp_trace_options_from(xtel_test::env_table(std::move(vars)), "host-a");
    REQUIRE(o);
    return *o;
}

std::string error_of(std::map<std::string, std::string> vars) {
    try {
        push::otlp_trace_options_from(xtel_test::env_table(std::move(vars)), "host-a");
    } catch (const config_error& e) {
        return e.what();
    }
    return "no error";
}

}  // namespace

TEST_CASE("OTLP traces are off without an endpoint or with OTEL_TRACES_EXPORTER=none",
          "[otlp_traces]") {
    CHECK_FALSE(push::otlp_trace_options_from(xtel_test::env_table({}), "h"));
    // The metrics' own endpoint is not the traces'.
    CHECK_FALSE(push::otlp_trace_options_from(
        xtel_test::env_table({{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://c:4318/m"}}), "h"));
    CHECK_FALSE(push::otlp_trace_options_from(
        xtel_test::env_table(
            {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"}, {"OTEL_TRACES_EXPORTER", "none"}}),
        "h"));
    CHECK(settings(
              {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"}, {"OTEL_TRACES_EXPORTER", "otlp"}})
              .url == "http://c:4318/v1/traces");
}

TEST_CASE("the OTLP traces URL is the traces endpoint as given, else the endpoint's /v1/traces",
          "[otlp_traces]") {
    CHECK(settings({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/base/?tenant=a"}}).url ==
          "http://c:4318/base/v1/traces?tenant=a");
    CHECK(settings({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"},
                    {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://t:1/custom"}})
              .url == "https://t:1/custom");
}

TEST_CASE("the OTLP traces settings read the traces' variables before the generic ones",
          "[otlp_traces]") {
    const auto generic = settings({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"},
                                   {"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"},
                                   {"OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"},
                                   {"OTEL_EXPORTER_OTLP_TIMEOUT", "2500"},
                                   {"OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=7"},
                                   {"OTEL_SERVICE_NAME", "svc"},
                                   {"OTEL_RESOURCE_ATTRIBUTES", "host.name=h2,zone=z"}});
    CHECK(generic.encoding == push::otlp_encoding::json);
    CHECK(generic.gzip);
    CHECK(generic.timeout == 2500ms);
    CHECK(generic.headers == std::vector<std::pair<std::string, std::string>>{{"x-tenant", "7"}});
    CHECK(generic.resource.service_name == "svc");
    CHECK(generic.resource.host_name == "h2");
    REQUIRE(generic.resource.attributes.size() == 1);
    CHECK(generic.resource.attributes[0].name == "zone");

    const auto own = settings({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"},
                               {"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"},
                               {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"},
                               {"OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"},
                               {"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "none"},
                               {"OTEL_EXPORTER_OTLP_TIMEOUT", "2500"},
                               {"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "700"},
                               {"OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=7"},
                               {"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-traces=1"}});
    CHECK(own.encoding == push::otlp_encoding::protobuf);
    CHECK_FALSE(own.gzip);
    CHECK(own.timeout == 700ms);
    CHECK(own.headers == std::vector<std::pair<std::string, std::string>>{{"x-traces", "1"}});
    CHECK(own.resource.host_name == "host-a");
}

TEST_CASE("a malformed OTLP traces setting names the variable, the value and what is accepted",
          "[otlp_traces]") {
    const std::map<std::string, std::string> base{{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"}};
    auto with = [&](std::string var, std::string value) {
        auto vars = base;
        vars[std::move(var)] = std::move(value);
        return error_of(vars);
    };
    CHECK(with("OTEL_TRACES_EXPORTER", "zipkin") ==
          "OTEL_TRACES_EXPORTER='zipkin' is invalid: expected otlp or none");
    CHECK(with("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")
              .starts_with("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL='grpc' is invalid: expected "
                           "http/protobuf or http/json (grpc is not supported"));
    CHECK(with("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "zstd") ==
          "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION='zstd' is invalid: expected gzip or none");
    CHECK(with("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "0")
              .starts_with("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT='0' is invalid"));
    CHECK(with("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "novalue")
              .starts_with("OTEL_EXPORTER_OTLP_TRACES_HEADERS='novalue' is invalid"));
    CHECK(error_of({{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "collector:4318"}})
              .starts_with("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT='collector:4318' is invalid"));
}

TEST_CASE("OTLP traces are POSTed with their content type, retried on 503, partial success counted",
          "[otlp_traces]") {
    pb::ExportTraceServiceResponse partial;
    partial.mutable_partial_success()->set_rejected_spans(1);
    xtel_test::fake_receiver receiver(
        "/v1/traces", std::vector<xtel_test::fake_answer>{
                          {503}, {200, partial.SerializeAsString(), "application/x-protobuf", {}}});
    push::otlp_trace_options o;
    o.url = receiver.url();
    o.headers = {{"x-tenant", "7"}};
    push::otlp_trace_pusher p(o);
    // Nothing to send: no request at all.
    p.push(std::vector<push::otlp_agent_spans>{{"prefill-0", 1, {}}});
    p.push(std::vector<push::otlp_agent_spans>{{"prefill-0", 1, {record(1), record(2)}}});
    REQUIRE(eventually([&] { return p.sender().sent() == 1; }));
    CHECK(p.sender().failed_attempts() == 1);
    CHECK(p.rejected_spans() == 1);
    const std::lock_guard lock(receiver.mutex);
    REQUIRE(receiver.requests.size() == 2);
    CHECK(receiver.requests[1].get_header_value("Content-Type") == "application/x-protobuf");
    CHECK(receiver.requests[1].get_header_value("x-tenant") == "7");
    CHECK(decode(receiver.requests[1].body).resource_spans(0).scope_spans(0).spans_size() == 2);
}

TEST_CASE("a JSON partial success of a traces export counts its rejectedSpans", "[otlp_traces]") {
    const auto p = push::parse_otlp_response(
        R"({"partialSuccess":{"rejectedSpans":"3","errorMessage":"too old"}})", "application/json");
    REQUIRE(p);
    CHECK(p->rejected_data_points == 3);
    CHECK(p->error_message == "too old");
}

}  // namespace otlp_traces_test
