// docs/quickstart.md as a reader runs it: its sh blocks, in order, in one bash, in a scratch
// directory, with only what the doc names as placeholders replaced (build/release and two
// ports). Every block must end with status 0, print what the doc shows under it, and the last
// must stop and remove everything the others started; the bytes the demos wrote are checked
// exactly where the doc shows them. A doc that drifts from the programs fails here.
//
// The doc's conventions: a ```sh block is run unless the line right above it is
// "<!-- not run by the quickstart test: REASON -->"; a ```text block right after a run block is
// what that block prints, line by line in order (it may print more), with `<name>` for text that
// differs from run to run and "..." for lines left out; no other kind of block. The listing of
// the agents' directory is compared whole: a file more or less there fails.

#include <signal.h>

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "prometheus_support.hpp"
#include "test_util.hpp"

extern char** environ;

namespace quickstart_test {

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const fs::path source_dir = XTEL_SOURCE_DIR;

/// The comment right above an sh block the test does not run, followed by the reason and " -->".
constexpr std::string_view not_run_mark = "<!-- not run by the quickstart test: ";
/// The doc's blocks of each kind: adding, removing or marking one changes a count here, so that
/// no command goes unrun without the test saying so.
constexpr std::size_t blocks_run = 7;
constexpr std::size_t blocks_not_run = 2;

/// The four demos write (rank + 1) MiB each, ranks 0 to 3.
constexpr std::uint64_t mib = 1 << 20;
constexpr std::uint64_t bytes_written = (1 + 2 + 3 + 4) * mib;

enum class block_kind { run, not_run, output, unknown };

struct block {
    block_kind kind = block_kind::unknown;
    std::size_t line = 0;  ///< of the opening fence, from 1
    std::string text;      ///< between the fences, each line with its newline
    std::string reason;    ///< why a not_run block is not run
};

struct quickstart {
    std::vector<block> blocks;
    std::vector<std::string> errors;  ///< what breaks the doc's conventions, by line
};

/// The fenced blocks of the doc: ```sh (run, unless the line above is the not-run mark),
/// ```text (the output of the sh block right before it); anything else is an error.
quickstart parse(const std::string& markdown) {
    quickstart doc;
    std::istringstream in(markdown);
    std::string line;
    std::string previous;
    std::optional<block> open;
    for (std::size_t n = 1; std::getline(in, line); previous = line, ++n) {
        if (open) {
            if (line == "```") {
                doc.blocks.push_back(std::move(*open));
                open.reset();
            } else {
                open->text += line + '\n';
            }
            continue;
        }
        const bool marked = previous.starts_with(not_run_mark);
        if (marked && line != "```sh") {
            doc.errors.push_back(
                fmt::format("line {}: the not-run mark is not above an sh block", n - 1));
        }
        if (!line.starts_with("```")) {
            continue;
        }
        open = block{.line = n};
        const std::string_view info = std::string_view(line).substr(3);
        if (info == "sh" && marked) {
            open->kind = block_kind::not_run;
            if (previous.ends_with(" -->")) {
                open->reason =
                    previous.substr(not_run_mark.size(), previous.size() - not_run_mark.size() - 4);
            }
        } else if (info == "sh") {
            open->kind = block_kind::run;
        } else if (info == "text") {
            open->kind = block_kind::output;
        } else {
            doc.errors.push_back(fmt::format(
                "line {}: a ```{} block (the quickstart has sh and text only)", n, info));
        }
    }
    if (open) {
        doc.errors.push_back(fmt::format("line {}: a block that is never closed", open->line));
    }
    // An output block belongs to the command block right before it, which must be run.
    for (std::size_t i = 0; i < doc.blocks.size(); ++i) {
        if (doc.blocks[i].kind == block_kind::output &&
            (i == 0 || doc.blocks[i - 1].kind != block_kind::run)) {
            doc.errors.push_back(fmt::format(
                "line {}: output that does not follow a block the test runs", doc.blocks[i].line));
        }
    }
    return doc;
}

quickstart read_quickstart() {
    const std::string text = xtel_test::read_file(source_dir / "docs/quickstart.md");
    REQUIRE_FALSE(text.empty());
    return parse(text);
}

std::size_t count_kind(const quickstart& doc, block_kind kind) {
    return static_cast<std::size_t>(std::count_if(doc.blocks.begin(), doc.blocks.end(),
                                                  [&](const block& b) { return b.kind == kind; }));
}

void replace_all(std::string& text, std::string_view from, std::string_view to) {
    for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
        text.replace(at, from.size(), to);
    }
}

/// The doc's placeholders, and what this run puts in their place.
struct placeholders {
    std::string build_dir;  ///< for build/release
    std::uint16_t exporter_port = 0;
    std::uint16_t prometheus_port = 0;

    std::string apply(std::string text) const {
        replace_all(text, "build/release/", build_dir + "/");
        replace_all(text, ":9465", fmt::format(":{}", exporter_port));
        replace_all(text, ":19090", fmt::format(":{}", prometheus_port));
        return text;
    }
};

/// A line of shown output as a pattern: `<name>` (lower-case letters, digits, spaces) stands for
/// any text, a run of spaces for one or more (columns are padded to their widths), the rest is
/// literal.
std::regex pattern_of(std::string_view shown) {
    static const std::string special = "\\^$.|?*+()[]{}";
    std::string re;
    for (std::size_t i = 0; i < shown.size();) {
        const auto close = shown.find('>', i);
        if (shown[i] == '<' && close != std::string_view::npos && close > i + 1 &&
            shown.substr(i + 1, close - i - 1)
                    .find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789 ") ==
                std::string_view::npos) {
            re += ".+?";
            i = close + 1;
        } else if (shown[i] == ' ') {
            re += " +";
            i = shown.find_first_not_of(' ', i);
            i = i == std::string_view::npos ? shown.size() : i;
        } else {
            if (special.find(shown[i]) != std::string::npos) {
                re += '\\';
            }
            re += shown[i++];
        }
    }
    return std::regex(re);
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        line.erase(line.find_last_not_of(" \t") + 1);
        lines.push_back(line);
    }
    return lines;
}

/// Each line `shown` has (but empty ones and "..."), matched in order by lines of `printed`
/// (which may have more); the first that is not, or nothing when all are.
std::optional<std::string> first_missing(const std::string& shown, const std::string& printed) {
    const auto out = lines_of(printed);
    auto at = out.begin();
    for (const auto& line : lines_of(shown)) {
        if (line.empty() || line == "...") {
            continue;
        }
        const auto re = pattern_of(line);
        at = std::find_if(at, out.end(),
                          [&](const std::string& o) { return std::regex_match(o, re); });
        if (at == out.end()) {
            return line;
        }
        ++at;
    }
    return std::nullopt;
}

/// FAILs, saying what to install, when a program the doc runs was not found at configure time.
void require_program(std::string_view path, std::string_view name, std::string_view package) {
    if (path.empty()) {
        FAIL(
            fmt::format("{} was not found when the build was configured: the quickstart runs it; "
                        "install the Debian package {} (scripts/deps does) and configure again",
                        name, package));
    }
}

/// PATH with the directories of the programs the doc runs by name first.
std::string search_path() {
    std::string path;
    for (const fs::path program : {XTEL_PROMETHEUS, XTEL_PROMTOOL, XTEL_CURL}) {
        if (program.has_parent_path()) {
            path += program.parent_path().string() + ":";
        }
    }
    const char* inherited = std::getenv("PATH");
    return path + (inherited != nullptr ? inherited : "/usr/bin:/bin");
}

/// The variables of this environment that would change what the doc's programs do: telemetry
/// settings, rank variables that would become labels, OTLP endpoints that would make the
/// exporter push. A reader's terminal may have them too; the doc sets what it needs.
std::vector<std::string> variables_to_unset() {
    std::vector<std::string> names = {
        "RANK",          "LOCAL_RANK",    "OMPI_COMM_WORLD_RANK",
        "SLURM_PROCID",  "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK",
        "XTEL_LOG_LEVEL"};
    for (char** e = environ; *e != nullptr; ++e) {
        const std::string_view kv(*e);
        if (kv.starts_with("NIXL_TELEMETRY_") || kv.starts_with("OTEL_")) {
            names.emplace_back(kv.substr(0, kv.find('=')));
        }
    }
    return names;
}

/// The tail of every log the doc's commands wrote (under `dir`), for a failure's report.
std::string logs_under(const fs::path& dir) {
    std::string report;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
         it.increment(ec)) {
        if (it->path().extension() == ".log") {
            const auto text = xtel_test::read_file(it->path());
            report += fmt::format("--- {} (its end) ---\n{}\n", it->path().string(),
                                  text.substr(text.size() > 2000 ? text.size() - 2000 : 0));
        }
    }
    return report;
}

/// What a run of the doc's blocks left.
struct blocks_run_result {
    std::optional<int> status;         ///< bash's exit status; none: it did not end in time
    std::size_t done = 0;              ///< blocks that ended with status 0, from the first
    std::vector<std::string> outputs;  ///< what each block printed
    bool left_running = false;         ///< something a block started was running at the end
    std::string bash_log;              ///< what bash itself printed (a syntax error, say)
};

/// Runs `run` in one bash, as a terminal would, so that the blocks share variables and jobs:
/// from `scratch`/clone, an empty directory (they may use nothing of the clone but
/// build/release), with TMPDIR `scratch`/tmp (where mktemp -d makes the doc's directory).
/// Each block's output goes to a file of its own, and its number to `done` once it has ended
/// with status 0 (set -e: the script stops at the first command that fails).
blocks_run_result run_blocks(const std::vector<const block*>& run,
                             const placeholders& p,
                             const fs::path& scratch) {
    const fs::path harness = scratch / "harness";
    const auto output_file = [&](std::size_t i) {
        return harness / fmt::format("block-{}.out", i);
    };
    std::string script = fmt::format("set -euo pipefail\ncd '{}'\n", (scratch / "clone").string());
    for (std::size_t i = 0; i < run.size(); ++i) {
        script += fmt::format("# docs/quickstart.md line {}\n{{\n{}}} >'{}' 2>&1 </dev/null\n",
                              run[i]->line, p.apply(run[i]->text), output_file(i).string());
        script += fmt::format("echo {} >>'{}'\n", i, (harness / "done").string());
    }
    prom_it::write_file(harness / "quickstart.sh", script);

    prom_it::spawn_options o;
    o.argv = {"bash", (harness / "quickstart.sh").string()};
    o.env = {{"TMPDIR", (scratch / "tmp").string()}, {"PATH", search_path()}};
    o.unset = variables_to_unset();
    o.stdin_path = "/dev/null";
    o.output_path = harness / "bash.log";
    o.own_process_group = true;  // what the blocks start in the background is in it too
    prom_it::child_process bash(o);
    const pid_t group = bash.pid();

    blocks_run_result r;
    r.status = bash.wait(90s);
    // Whatever of the group is still running was not stopped by the doc's last block.
    r.left_running = ::kill(-group, 0) == 0;
    ::kill(-group, SIGKILL);
    bash.wait(10s);
    for (std::size_t i = 0; i < run.size(); ++i) {
        r.outputs.push_back(xtel_test::read_file(output_file(i)));
    }
    r.done = lines_of(xtel_test::read_file(harness / "done")).size();
    r.bash_log = xtel_test::read_file(harness / "bash.log");
    return r;
}

/// Which block failed, what it printed, and the logs the doc's commands wrote under `tmp`.
std::string failure_report(const std::vector<const block*>& run,
                           const placeholders& p,
                           const blocks_run_result& r,
                           const fs::path& tmp) {
    std::string report = fmt::format("{} of the {} blocks ran with status 0", r.done, run.size());
    if (r.done < run.size()) {
        report += fmt::format(
            "; the block at docs/quickstart.md line {} {}:\n{}--- its output ---\n{}\n"
            "--- bash ---\n{}\n{}",
            run[r.done]->line, r.status ? "failed" : "did not end within 90 s",
            p.apply(run[r.done]->text), r.outputs[r.done], r.bash_log, logs_under(tmp));
    }
    return report;
}

/// What the block whose commands contain `command` printed; there must be exactly one.
std::string printed_by(const std::vector<const block*>& run,
                       const blocks_run_result& r,
                       std::string_view command) {
    std::string found;
    std::size_t matches = 0;
    for (std::size_t i = 0; i < run.size(); ++i) {
        if (run[i]->text.find(command) != std::string::npos) {
            found = r.outputs[i];
            ++matches;
        }
    }
    INFO(command);
    REQUIRE(matches == 1);
    return found;
}

/// What the doc shows under the run block whose commands contain `command`.
std::string shown_under(const quickstart& doc, std::string_view command) {
    for (std::size_t i = 0; i + 1 < doc.blocks.size(); ++i) {
        if (doc.blocks[i].kind == block_kind::run &&
            doc.blocks[i].text.find(command) != std::string::npos &&
            doc.blocks[i + 1].kind == block_kind::output) {
            return doc.blocks[i + 1].text;
        }
    }
    FAIL("docs/quickstart.md shows no output under the block that runs " << command);
    return {};
}

/// The exact bytes, wherever the doc shows them, whatever its output blocks say: the initiators'
/// series on /metrics, Prometheus's sums, xtel top's total.
void check_exact_bytes(const std::vector<const block*>& run, const blocks_run_result& r) {
    const auto metrics = printed_by(run, r, "/metrics");
    INFO(metrics);
    CHECK(xtel_test::count_of("\n" + metrics, "\nxtel_exporter_agents 8\n") == 1);
    for (std::uint64_t rank = 0; rank < 4; ++rank) {
        const auto line =
            fmt::format("xtel_transfer_bytes_total{{agent_name=\"rank{}-initiator\"", rank);
        const auto at = metrics.find(line);
        REQUIRE(at != std::string::npos);
        CHECK(metrics.substr(at, metrics.find('\n', at) - at)
                  .ends_with(fmt::format("}} {}", (rank + 1) * mib)));
    }
    const auto queries = printed_by(run, r, "sum(xtel_transfer_bytes_total)");
    INFO(queries);
    CHECK(xtel_test::count_of(queries, fmt::format(",\"{}\"]", bytes_written)) == 1);
    for (std::uint64_t rank = 0; rank < 4; ++rank) {
        CHECK(xtel_test::count_of(
                  queries, fmt::format("{{rank=\"{}\"}} => {} @[", rank, (rank + 1) * mib)) == 1);
    }
    const auto top = printed_by(run, r, "--once");
    INFO(top);
    CHECK(xtel_test::count_of(top, "agents 8: 8 live, 0 closed, 0 dead") == 1);
    CHECK(xtel_test::count_of(
              top, fmt::format("total  tx 10.0MiB ({} B)  rx 0B (0 B)", bytes_written)) == 1);
}

}  // namespace

TEST_CASE("every block of the quickstart is run by the test or is output it checks or says why not",
          "[quickstart]") {
    const auto doc = read_quickstart();
    for (const auto& error : doc.errors) {
        FAIL_CHECK("docs/quickstart.md " << error);
    }
    CHECK(count_kind(doc, block_kind::run) == blocks_run);
    CHECK(count_kind(doc, block_kind::not_run) == blocks_not_run);
    CHECK(count_kind(doc, block_kind::output) >= 4);
    for (const auto& b : doc.blocks) {
        if (b.kind == block_kind::not_run) {
            CAPTURE(b.line);
            CHECK(b.reason.size() > 10);
        }
    }
}

TEST_CASE("every sh block of the quickstart is valid bash", "[quickstart]") {
    for (const auto& b : read_quickstart().blocks) {
        if (b.kind == block_kind::run || b.kind == block_kind::not_run) {
            const auto r = xtel_test::run({"bash", "-n", "-c", b.text});
            INFO("docs/quickstart.md line " << b.line << ":\n" << b.text << r.err);
            CHECK(r.exit_code == 0);
        }
    }
}

TEST_CASE("the quickstart's commands run in order and show the exact bytes its four demos wrote",
          "[quickstart]") {
    require_program(XTEL_PROMETHEUS, "prometheus", "prometheus");
    require_program(XTEL_PROMTOOL, "promtool", "prometheus");
    require_program(XTEL_CURL, "curl", "curl");
    const auto doc = read_quickstart();
    REQUIRE(doc.errors.empty());
    std::vector<const block*> run;
    for (const auto& b : doc.blocks) {
        if (b.kind == block_kind::run) {
            run.push_back(&b);
        }
    }
    REQUIRE(run.size() == blocks_run);

    const xtel_test::temp_dir scratch;
    for (const auto* d : {"clone", "tmp", "harness"}) {
        fs::create_directories(scratch / d);
    }
    placeholders p{.build_dir = XTEL_BINARY_DIR, .exporter_port = prom_it::free_port()};
    do {
        p.prometheus_port = prom_it::free_port();
    } while (p.prometheus_port == p.exporter_port);

    const auto r = run_blocks(run, p, scratch.path());
    {
        INFO(failure_report(run, p, r, scratch / "tmp"));
        REQUIRE(r.done == run.size());
        REQUIRE(r.status == 0);
    }
    CHECK_FALSE(r.left_running);
    CHECK(fs::is_empty(scratch / "tmp"));    // the last block removed all the doc made
    CHECK(fs::is_empty(scratch / "clone"));  // and nothing was written into the clone

    // What each command printed is what the doc shows under it.
    for (std::size_t i = 0, n = 0; i < doc.blocks.size(); ++i) {
        if (doc.blocks[i].kind == block_kind::run) {
            ++n;
        } else if (doc.blocks[i].kind == block_kind::output) {
            const auto& printed = r.outputs[n - 1];
            if (const auto missing = first_missing(p.apply(doc.blocks[i].text), printed)) {
                FAIL_CHECK("docs/quickstart.md line "
                           << doc.blocks[i].line << " shows a line that the block at line "
                           << run[n - 1]->line << " did not print (in that order):\n"
                           << *missing << "\nit printed:\n"
                           << printed);
            }
        }
    }
    // The agents' directory exactly as the doc lists it: the rule above lets a block print
    // more, and the listing showed 8 of the 16 files there (not the agents' .spans).
    const std::string listing = "ls \"$work/agents\"";
    CHECK(printed_by(run, r, listing) == shown_under(doc, listing));
    check_exact_bytes(run, r);
}

}  // namespace quickstart_test
