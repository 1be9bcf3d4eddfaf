// README.md's C++ blocks are the programs of examples/minimal, byte for byte, and those programs
// build (tests/cmake/readme.cmake) and do what the README says: a README that drifts from code
// that compiles and runs fails here.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "prometheus_support.hpp"
#include "test_util.hpp"
#include "xtel/exporters/flight_recorder.hpp"

namespace readme_test {

namespace {

using xtel_test::telemetry_env;
using xtel_test::temp_dir;

const std::filesystem::path source_dir = XTEL_SOURCE_DIR;
const std::string agent_program = XTEL_MINIMAL_AGENT;
const std::string pipeline_program = XTEL_MINIMAL_PIPELINE;

struct code_block {
    std::size_t line = 0;  ///< of the opening fence, from 1
    std::string text;      ///< between the fences, every line with its newline
};

/// The blocks of a Markdown text in `language` (```cpp, ```sh).
std::vector<code_block> blocks_of(const std::string& markdown, std::string_view language) {
    std::vector<code_block> blocks;
    std::istringstream in(markdown);
    std::string line;
    std::optional<code_block> open;
    const std::string fence = "```" + std::string(language);
    for (std::size_t n = 1; std::getline(in, line); ++n) {
        if (!open && line == fence) {
            open = code_block{n, {}};
        } else if (open && line == "```") {
            blocks.push_back(std::move(*open));
            open.reset();
        } else if (open) {
            open->text += line + '\n';
        }
    }
    return blocks;
}

/// The file a block says it is, from its first line ("// examples/minimal/agent.cpp: ...").
std::string file_named_by(const code_block& block) {
    const std::string prefix = "// ";
    const auto colon = block.text.find(':');
    const auto newline = block.text.find('\n');
    if (block.text.compare(0, prefix.size(), prefix) != 0 || colon > newline) {
        return {};
    }
    return block.text.substr(prefix.size(), colon - prefix.size());
}

std::vector<code_block> readme_blocks() {
    return blocks_of(xtel_test::read_file(source_dir / "README.md"), "cpp");
}

/// The values a flight recorder holds under `name`, oldest first.
std::vector<std::uint64_t> values_of(const std::filesystem::path& file, std::string_view name) {
    xtel::flight_recorder::reader r(file);
    std::vector<std::uint64_t> values;
    (void)r.poll([&](const xtel::event& e) {
        if (e.name_view() == name) {
            values.push_back(e.value);
        }
    });
    return values;
}

}  // namespace

TEST_CASE("every cpp block of the readme is a file of examples/minimal as it is there",
          "[readme]") {
    const auto blocks = readme_blocks();
    CHECK(blocks.size() >= 2);
    for (const auto& block : blocks) {
        CAPTURE(block.line);
        const std::string file = file_named_by(block);
        REQUIRE_THAT(file, Catch::StartsWith("examples/minimal/"));
        REQUIRE(std::filesystem::is_regular_file(source_dir / file));
        CHECK(block.text == xtel_test::read_file(source_dir / file));
    }
}

TEST_CASE("every program of examples/minimal is shown in the readme", "[readme]") {
    const auto blocks = readme_blocks();
    std::size_t programs = 0;
    for (const auto& entry : std::filesystem::directory_iterator(source_dir / "examples/minimal")) {
        if (entry.path().extension() != ".cpp") {
            continue;
        }
        ++programs;
        const std::string file = "examples/minimal/" + entry.path().filename().string();
        CAPTURE(file);
        CHECK(std::any_of(blocks.begin(), blocks.end(),
                          [&](const code_block& b) { return file_named_by(b) == file; }));
    }
    CHECK(programs >= 2);  // the directory was found
}

TEST_CASE("the readme's agent example writes between two agents and records the bytes",
          "[readme]") {
    temp_dir dir;
    const telemetry_env env{{"NIXL_TELEMETRY_ENABLE", "y"},
                            {"NIXL_TELEMETRY_EXPORTER", "buffer"},
                            {"NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", dir.path().string()},
                            {"NIXL_TELEMETRY_BUFFER_SIZE", std::nullopt}};
    const auto r = xtel_test::run({agent_program});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out == "prefill-0 wrote 4096 bytes into decode-0: verified\n");
    // The initiator's flight recorder holds the write: its bytes and its one request.
    CHECK(values_of(dir.path() / "prefill-0", "agent_tx_bytes") ==
          std::vector<std::uint64_t>{4096});
    CHECK(values_of(dir.path() / "prefill-0", "agent_tx_requests_num") ==
          std::vector<std::uint64_t>{1});
    CHECK(std::filesystem::is_regular_file(dir.path() / "decode-0"));
}

TEST_CASE("the readme's agent example names a malformed variable and exits 2", "[readme]") {
    temp_dir dir;
    const telemetry_env env{{"NIXL_TELEMETRY_ENABLE", "y"},
                            {"NIXL_TELEMETRY_EXPORTER", "buffer"},
                            {"NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", dir.path().string()},
                            {"NIXL_TELEMETRY_BUFFER_SIZE", "lots"}};
    const auto r = xtel_test::run({agent_program});
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("NIXL_TELEMETRY_BUFFER_SIZE='lots' is invalid"));
    CHECK(std::filesystem::is_empty(dir.path()));
}

TEST_CASE("the readme's pipeline example records into the flight recorder the environment places",
          "[readme]") {
    temp_dir dir;
    const telemetry_env env{{"NIXL_TELEMETRY_ENABLE", "y"},
                            {"NIXL_TELEMETRY_EXPORTER", std::nullopt},
                            {"NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", dir.path().string()},
                            {"NIXL_TELEMETRY_BUFFER_SIZE", std::nullopt}};
    const auto r = xtel_test::run({pipeline_program});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const auto file = dir.path() / "engine-0";
    CHECK(values_of(file, "agent_memory_registered") == std::vector<std::uint64_t>{1ull << 30});
    CHECK(values_of(file, "agent_tx_bytes") == std::vector<std::uint64_t>{1 << 20});
    CHECK(values_of(file, "agent_xfer_time") == std::vector<std::uint64_t>{340});
}

TEST_CASE("the readme's pipeline example exports to what NIXL_TELEMETRY_EXPORTER names",
          "[readme]") {
    temp_dir dir;
    const telemetry_env env{{"NIXL_TELEMETRY_ENABLE", "y"},
                            {"NIXL_TELEMETRY_EXPORTER", "node"},
                            {"NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", dir.path().string()},
                            {"NIXL_TELEMETRY_BUFFER_SIZE", std::nullopt}};
    const auto r = xtel_test::run({pipeline_program});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(std::filesystem::is_regular_file(dir.path() / "engine-0.metrics"));
    CHECK_FALSE(std::filesystem::exists(dir.path() / "engine-0"));
}

TEST_CASE("the readme's pipeline example with telemetry off writes nothing", "[readme]") {
    temp_dir dir;
    const telemetry_env env{{"NIXL_TELEMETRY_ENABLE", "n"},
                            {"NIXL_TELEMETRY_EXPORTER", "buffer"},
                            {"NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", dir.path().string()},
                            {"NIXL_TELEMETRY_BUFFER_SIZE", std::nullopt}};
    const auto r = xtel_test::run({pipeline_program});
    CHECK(r.exit_code == 0);
    CHECK(r.err.empty());
    CHECK(std::filesystem::is_empty(dir.path()));
}

TEST_CASE("the readme's demo commands run as written and their readers miss no event", "[readme]") {
    const auto sh = blocks_of(xtel_test::read_file(source_dir / "README.md"), "sh");
    const auto demo = std::find_if(sh.begin(), sh.end(), [](const code_block& b) {
        return b.text.find("xfer_demo --linger") != std::string::npos;
    });
    REQUIRE(demo != sh.end());
    // As a reader runs it from the source tree, with the programs of this build, the default
    // directory /dev/shm and the port as placeholders for a scratch directory and a free port.
    const temp_dir dir;
    const std::string port = std::to_string(prom_it::free_port());
    std::string text = demo->text;
    const std::vector<std::pair<std::string, std::string>> placeholders = {
        {"build/release/examples/xfer_demo/xfer_demo", XTEL_XFER_DEMO},
        {"build/release/examples/cpp/telemetry_reader", XTEL_TELEMETRY_READER},
        {"python3 examples/python/telemetry_reader.py",
         std::string(XTEL_PYTHON) + " " + XTEL_PYTHON_READER},
        {"/dev/shm", dir.path().string()},
        {"9464", port}};
    for (const auto& [from, to] : placeholders) {
        REQUIRE(text.find(from) != std::string::npos);
        for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at)) {
            text.replace(at, from.size(), to);
            at += to.size();
        }
    }
    // The block sets the rest; the output path stands for the default /dev/shm.
    const telemetry_env env{{"NIXL_TELEMETRY_ENABLE", std::nullopt},
                            {"NIXL_TELEMETRY_EXPORTER", std::nullopt},
                            {"NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH", dir.path().string()},
                            {"NIXL_TELEMETRY_BUFFER_SIZE", std::nullopt}};
    const auto r = xtel_test::run({"timeout", "120", "bash", "-euo", "pipefail", "-c",
                                   "cd '" + dir.path().string() + "'\n" + text});
    INFO("block at README.md line " << demo->line << ":\n" << text << "\n" << r.out << r.err);
    REQUIRE(r.exit_code == 0);
    // Both readers say how many events they read and missed.
    const std::string file = (dir.path() / "xfer_initiator").string();
    CHECK(xtel_test::count_of(r.err, file + ": ") == 2);
    CHECK(xtel_test::count_of(r.err, " missed") == 2);
    CHECK(xtel_test::count_of(r.err, ", 0 missed") == 2);
    CHECK(r.out.find("xtel_transfer_bytes_total{agent_name=\"xfer_initiator\"") !=
          std::string::npos);
    CHECK(r.out.find("} 67108864\n") != std::string::npos);
}

}  // namespace readme_test
