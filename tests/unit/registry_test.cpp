#include <stdlib.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <system_error>
#include <type_traits>
#include <vector>

#include "test_util.hpp"
#include "xtel/agent/basic_agent.hpp"
#include "xtel/exporters/pipelines.hpp"
#include "xtel/registry/exporter_sets.hpp"
#include "xtel/registry/pipeline_choice.hpp"

namespace registry_test {

namespace {

using xtel_test::temp_dir;

xtel::config buffer_config(const temp_dir& dir, std::vector<std::string> exporters = {"buffer"}) {
    xtel::config c;
    c.enabled = true;
    c.exporters = std::move(exporters);
    c.output_path = dir.path().string();
    return c;
}

/// Sets environment variables for one scope and restores what was there.
class scoped_env {
  public:
    void set(const char* name, const std::string& value) {
        const char* old = std::getenv(name);
        saved_.push_back({name, old ? std::optional<std::string>(old) : std::nullopt});
        ::setenv(name, value.c_str(), 1);
    }
    ~scoped_env() {
        for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
            if (it->second) {
                ::setenv(it->first, it->second->c_str(), 1);
            } else {
                ::unsetenv(it->first);
            }
        }
    }

  private:
    std::vector<std::pair<const char*, std::optional<std::string>>> saved_;
};

}  // namespace

TEST_CASE("an exporter list names the same pipeline in any order") {
    const std::vector<std::string> a{"prometheus", "buffer"}, b{"buffer", "prometheus"};
    CHECK(xtel::canonical_exporter_set(a) == "buffer,prometheus");
    CHECK(xtel::canonical_exporter_set(b) == "buffer,prometheus");
    CHECK(xtel::canonical_exporter_set(std::vector<std::string>{"buffer"}) == "buffer");
}

TEST_CASE("the registry builds the buffer pipeline") {
    const auto sets = xtel::exporter_sets();
    CHECK(std::find(sets.begin(), sets.end(), "buffer") != sets.end());
    for (const auto& s : sets) {
        // Every key is already canonical.
        std::vector<std::string> names;
        std::size_t start = 0;
        while (start <= s.size()) {
            const auto comma = s.find(',', start);
            names.push_back(s.substr(start, comma - start));
            start = comma == std::string::npos ? s.size() + 1 : comma + 1;
        }
        CHECK(xtel::canonical_exporter_set(names) == s);
    }
}

TEST_CASE("the choice both factories share is the named exporters' mask, spelled as declared") {
    temp_dir dir;
    const xtel_test::log_capture log;  // NOP's warning
    const auto both = xtel::detail::choose_pipeline(buffer_config(dir, {"Node", "buffer"}));
    CHECK(both.mask == xtel::pipeline_mask<xtel::buffer_exporter, xtel::node_exporter>);
    CHECK(both.cfg.exporters == std::vector<std::string>{"node", "buffer"});
    CHECK(both.cfg.output_path == dir.path().string());
    const auto unset = xtel::detail::choose_pipeline(buffer_config(dir, {}));
    CHECK(unset.mask == xtel::pipeline_mask<xtel::buffer_exporter>);
    auto off_config = buffer_config(dir);
    off_config.enabled = false;
    CHECK(xtel::detail::choose_pipeline(off_config).mask == 0);
    CHECK(xtel::detail::choose_pipeline(buffer_config(dir, {"NOP"})).mask == 0);
    // The masks index make_agent's and make_telemetry's tables: every one is a pipeline's.
    CHECK(both.mask < xtel::pipeline_count);
}

TEST_CASE("telemetry off gives an agent that records nothing and writes no file") {
    temp_dir dir;
    auto cfg = buffer_config(dir);
    cfg.enabled = false;
    const auto a = xtel::make_agent("quiet", cfg);
    CHECK_FALSE(a->telemetry_enabled());
    CHECK(a->name() == "quiet");
    a->flush_telemetry();
    CHECK(a->stats().events_exported == 0);
    CHECK_FALSE(std::filesystem::exists(dir.path() / "quiet"));
}

TEST_CASE("the buffer exporter gives an agent whose flight recorder is named after it") {
    temp_dir dir;
    const auto a = xtel::make_agent("recorded", buffer_config(dir));
    CHECK(a->telemetry_enabled());
    CHECK(std::filesystem::is_regular_file(dir.path() / "recorded"));
    a->flush_telemetry();
    CHECK(a->stats().events_exported >= 3);  // agent_start and the backend's start-up events
}

TEST_CASE("an enabled configuration without exporter names gets the buffer exporter") {
    temp_dir dir;
    const auto a = xtel::make_agent("defaulted", buffer_config(dir, {}));
    CHECK(a->telemetry_enabled());
    CHECK(std::filesystem::is_regular_file(dir.path() / "defaulted"));
}

TEST_CASE("built-in exporter names are matched ignoring case as every keyword is") {
    temp_dir dir;
    const auto a = xtel::make_agent("cased", buffer_config(dir, {"Buffer"}));
    CHECK(a->telemetry_enabled());
    CHECK(std::filesystem::is_regular_file(dir.path() / "cased"));
    // Two spellings of one exporter name it twice.
    try {
        (void)xtel::make_agent("twice", buffer_config(dir, {"buffer", "BUFFER"}));
        FAIL("make_agent accepted buffer twice");
    } catch (const xtel::config_error& e) {
        CHECK_THAT(std::string(e.what()), Catch::Contains("'buffer' is named twice"));
    }
}

TEST_CASE("a mistyped exporter name gets the built-in one it was meant to be") {
    temp_dir dir;
    for (const auto& [typed, meant] :
         {std::pair{"prometheous", "prometheus"}, {"bufer", "buffer"}, {"ndoe", "node"}}) {
        INFO(typed);
        try {
            (void)xtel::make_agent("typo", buffer_config(dir, {typed}));
            FAIL("make_agent accepted " << typed);
        } catch (const xtel::config_error& e) {
            CHECK_THAT(std::string(e.what()),
                       Catch::Contains(std::string("(did you mean '") + meant + "'?)"));
        }
    }
    // A name near none of them gets no guess.
    try {
        (void)xtel::make_agent("typo", buffer_config(dir, {"csv"}));
        FAIL("make_agent accepted csv");
    } catch (const xtel::config_error& e) {
        CHECK_THAT(std::string(e.what()), !Catch::Contains("did you mean"));
    }
}

TEST_CASE("an unknown exporter name without a plugin directory is an error naming what exists") {
    temp_dir dir;
    try {
        (void)xtel::make_agent("nobody", buffer_config(dir, {"buffer", "nosuch"}));
        FAIL("make_agent accepted an unknown exporter");
    } catch (const xtel::config_error& e) {
        const std::string what = e.what();
        CHECK_THAT(what, Catch::Contains("NIXL_TELEMETRY_EXPORTER='buffer,nosuch'"));
        CHECK_THAT(what, Catch::Contains(
                             "'nosuch' is not a built-in exporter (buffer, prometheus, node)"));
        CHECK_THAT(what, Catch::Contains("NIXL_TELEMETRY_EXPORTER_PLUGIN_DIR is not set"));
    }
    // Nothing was created on the way to the error.
    CHECK(std::filesystem::is_empty(dir.path()));
}

TEST_CASE("an unknown exporter name missing from the plugin directory lists the plugins there") {
    temp_dir dir;
    temp_dir plugins;
    std::ofstream(plugins.path() / "libtelemetry_exporter_alpha.so") << "x";
    auto cfg = buffer_config(dir, {"nosuch"});
    cfg.plugin_dir = plugins.path();
    try {
        (void)xtel::make_agent("nobody", cfg);
        FAIL("make_agent accepted an unknown exporter");
    } catch (const xtel::config_error& e) {
        const std::string what = e.what();
        CHECK_THAT(what, Catch::Contains("has no libtelemetry_exporter_nosuch.so"));
        CHECK_THAT(what, Catch::Contains("plugins there: alpha"));
    }
    CHECK(std::filesystem::is_empty(dir.path()));
}

TEST_CASE("an agent name that cannot be a file name is refused before anything starts") {
    temp_dir dir;
    CHECK_THROWS_WITH(xtel::make_agent("../escape", buffer_config(dir)),
                      Catch::Contains("'../escape'") && Catch::Contains("agent name"));
    CHECK_THROWS_AS(xtel::make_agent("", buffer_config(dir)), xtel::config_error);
    CHECK(std::filesystem::is_empty(dir.path()));
}

TEST_CASE("make_agent without a configuration reads NIXL_TELEMETRY_* from the environment") {
    temp_dir dir;
    scoped_env env;
    env.set("NIXL_TELEMETRY_ENABLE", "yes");
    env.set("NIXL_TELEMETRY_EXPORTER", "buffer");
    env.set("NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", dir.path().string());
    const auto a = xtel::make_agent("from_env");
    CHECK(a->telemetry_enabled());
    CHECK(std::filesystem::is_regular_file(dir.path() / "from_env"));

    env.set("NIXL_TELEMETRY_EXPORTER", "bogus");
    CHECK_THROWS_WITH(xtel::make_agent("from_env_bad"), Catch::Contains("'bogus'"));
}

TEST_CASE("the concrete agents are final, so calls on them need no virtual dispatch") {
    STATIC_REQUIRE(std::is_final_v<xtel::basic_agent<xtel::buffer_telemetry>>);
    STATIC_REQUIRE(std::is_final_v<xtel::basic_agent<xtel::disabled_telemetry>>);
    STATIC_REQUIRE(std::is_base_of_v<xtel::agent, xtel::basic_agent<xtel::buffer_telemetry>>);
}

TEST_CASE("every combination of the built-in exporters, with or without plugins, can be built") {
    // Generated from xtel::builtin_exporters: with buffer, prometheus and node, 15 sets.
    const auto sets = xtel::exporter_sets();
    const std::vector<std::string> expected{"buffer",
                                            "buffer,node",
                                            "buffer,node,plugin",
                                            "buffer,node,plugin,prometheus",
                                            "buffer,node,prometheus",
                                            "buffer,plugin",
                                            "buffer,plugin,prometheus",
                                            "buffer,prometheus",
                                            "node",
                                            "node,plugin",
                                            "node,plugin,prometheus",
                                            "node,prometheus",
                                            "plugin",
                                            "plugin,prometheus",
                                            "prometheus"};
    CHECK(sets == expected);
    CHECK(sets.size() == xtel::pipeline_count - 1);
}

TEST_CASE("the built-in exporters' names come from their types") {
    STATIC_REQUIRE(xtel::builtin_exporter_names.size() == 3);
    STATIC_REQUIRE(xtel::builtin_exporter_names[0] == xtel::buffer_exporter::name);
    STATIC_REQUIRE(xtel::builtin_exporter_names[1] == xtel::prometheus_exporter::name);
    STATIC_REQUIRE(xtel::builtin_exporter_names[2] == xtel::node_exporter::name);
    STATIC_REQUIRE(xtel::is_builtin_exporter("node"));
    STATIC_REQUIRE(xtel::is_builtin_exporter("prometheus"));
    STATIC_REQUIRE_FALSE(xtel::is_builtin_exporter("plugin"));
    STATIC_REQUIRE_FALSE(xtel::is_builtin_exporter("csv"));
}

TEST_CASE("the named pipelines are the generated ones, whatever order their exporters are named") {
    using xtel::buffer_exporter, xtel::plugin_exporter, xtel::prometheus_exporter;
    STATIC_REQUIRE(std::is_same_v<xtel::disabled_telemetry, xtel::telemetry<>>);
    STATIC_REQUIRE(std::is_same_v<xtel::buffer_telemetry, xtel::telemetry<buffer_exporter>>);
    STATIC_REQUIRE(std::is_same_v<xtel::plugin_telemetry, xtel::telemetry<plugin_exporter>>);
    STATIC_REQUIRE(std::is_same_v<xtel::buffer_plugin_telemetry,
                                  xtel::telemetry<buffer_exporter, plugin_exporter>>);
    STATIC_REQUIRE(std::is_same_v<xtel::pipeline_of<plugin_exporter, prometheus_exporter>,
                                  xtel::telemetry<prometheus_exporter, plugin_exporter>>);
    STATIC_REQUIRE(std::is_same_v<xtel::pipeline_of<prometheus_exporter, buffer_exporter>,
                                  xtel::buffer_prometheus_telemetry>);
}

TEST_CASE("prometheus with a plugin that is not there names the plugin directory's contents") {
    temp_dir dir;
    temp_dir plugins;
    std::ofstream(plugins.path() / "libtelemetry_exporter_alpha.so") << "x";
    auto cfg = buffer_config(dir, {"prometheus", "csv"});
    cfg.plugin_dir = plugins.path();
    CHECK_THROWS_WITH(xtel::make_agent("nobody", cfg),
                      Catch::Contains("NIXL_TELEMETRY_EXPORTER='prometheus,csv'") &&
                          Catch::Contains("has no libtelemetry_exporter_csv.so") &&
                          Catch::Contains("plugins there: alpha"));
}

TEST_CASE("NIXL_TELEMETRY_EXPORTER=NOP is telemetry off, and that is said once") {
    temp_dir dir;
    const xtel_test::log_capture log;
    const auto a = xtel::make_agent("nop", buffer_config(dir, {"NOP"}));
    CHECK_FALSE(a->telemetry_enabled());
    CHECK(std::filesystem::is_empty(dir.path()));
    const auto warnings = log.at(xtel::log_level::warning);
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0] ==
          "NIXL_TELEMETRY_EXPORTER='NOP': xtel has no collect-only exporter (no getXferTelemetry "
          "reads events in process), so telemetry is off; name one of buffer, prometheus, node "
          "to export");
}

TEST_CASE("NOP beside other exporters is refused") {
    temp_dir dir;
    CHECK_THROWS_WITH(xtel::make_agent("nop", buffer_config(dir, {"buffer", "nop"})),
                      Catch::StartsWith("NIXL_TELEMETRY_EXPORTER='buffer,nop' is invalid: NOP, "
                                        "NIXL's collect-only exporter, writes nothing"));
    CHECK(std::filesystem::is_empty(dir.path()));
}

TEST_CASE("upstream's prometheus_mp and doca exporters are refused with what to name instead") {
    temp_dir dir;
    CHECK_THROWS_WITH(
        xtel::make_agent("mp", buffer_config(dir, {"prometheus_mp"})),
        "NIXL_TELEMETRY_EXPORTER='prometheus_mp' is invalid: 'prometheus_mp': it is upstream "
        "NIXL's multi-process Prometheus exporter, which xtel does not have: name node and run one "
        "xtel-exporter per node, which serves every rank on one endpoint (docs/deployment.md)");
    CHECK_THROWS_WITH(xtel::make_agent("doca", buffer_config(dir, {"doca"})),
                      Catch::StartsWith("NIXL_TELEMETRY_EXPORTER='doca' is invalid: 'doca': it is "
                                        "upstream NIXL's DOCA exporter, which xtel does not have: "
                                        "name prometheus"));
    CHECK(std::filesystem::is_empty(dir.path()));
}

TEST_CASE("NIXL_TELEMETRY_DIR with no exporter that writes a directory is said to be unused") {
    temp_dir dir;
    scoped_env env;
    env.set("NIXL_TELEMETRY_ENABLE", "y");
    env.set("NIXL_TELEMETRY_EXPORTER", "prometheus");
    env.set("NIXL_TELEMETRY_DIR", dir.path().string());
    env.set("NIXL_TELEMETRY_PROMETHEUS_ADDRESS", "127.0.0.1:0");
    const xtel_test::log_capture log;
    const auto a = xtel::make_agent("dirless");
    CHECK(a->telemetry_enabled());
    const auto warnings = log.at(xtel::log_level::warning);
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0] == "NIXL_TELEMETRY_DIR='" + dir.path().string() +
                             "' is not used: none of the exporters named (prometheus) writes a "
                             "directory; name buffer to keep a flight recorder there");
}

TEST_CASE("NIXL's Prometheus port without the prometheus exporter named is said to be unused") {
    temp_dir dir;
    scoped_env env;
    env.set("NIXL_TELEMETRY_PROMETHEUS_PORT", "9090");
    const xtel_test::log_capture log;
    const auto a = xtel::make_agent("portless", buffer_config(dir, {"buffer"}));
    CHECK(a->telemetry_enabled());
    const auto warnings = log.at(xtel::log_level::warning);
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0] ==
          "NIXL_TELEMETRY_PROMETHEUS_PORT='9090' is not used: prometheus is not among the "
          "exporters named (buffer); name it in NIXL_TELEMETRY_EXPORTER to serve /metrics");
}

}  // namespace registry_test
