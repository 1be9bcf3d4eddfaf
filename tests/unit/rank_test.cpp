// The rank labels: which variables name the process's rank, in which order, what is ignored,
// and that every series of the agent carries them.

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "xtel/core/rank.hpp"
#include "xtel/metrics/agent_metrics.hpp"
#include "xtel/metrics/agent_metrics_settings.hpp"

namespace rank_test {

using xtel::process_rank;
using xtel_test::env_table;

namespace {

process_rank rank_of(std::map<std::string, std::string> vars) {
    return process_rank::from_env(env_table(std::move(vars)));
}

}  // namespace

TEST_CASE("RANK and LOCAL_RANK name the rank and the local rank") {
    CHECK(rank_of({{"RANK", "3"}, {"LOCAL_RANK", "1"}}) == process_rank{3, 1});
    CHECK(rank_of({{"RANK", "12"}}) == process_rank{12, std::nullopt});
    CHECK(rank_of({{"LOCAL_RANK", "0"}}) == process_rank{std::nullopt, 0});
    CHECK(rank_of({}) == process_rank{});
}

TEST_CASE("Open MPI's then Slurm's variables name the rank when RANK and LOCAL_RANK do not") {
    CHECK(rank_of({{"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "2"}}) ==
          process_rank{5, 2});
    CHECK(rank_of({{"SLURM_PROCID", "7"}, {"SLURM_LOCALID", "3"}}) == process_rank{7, 3});
    CHECK(rank_of({{"OMPI_COMM_WORLD_RANK", "5"}, {"SLURM_PROCID", "7"}}) ==
          process_rank{5, std::nullopt});
    CHECK(rank_of({{"RANK", "1"},
                   {"LOCAL_RANK", "1"},
                   {"OMPI_COMM_WORLD_RANK", "5"},
                   {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                   {"SLURM_PROCID", "7"},
                   {"SLURM_LOCALID", "3"}}) == process_rank{1, 1});
}

TEST_CASE("a rank that is not a non-negative decimal integer is ignored with one warning") {
    for (const char* bad :
         {"", "-1", "abc", " 3", "3 ", "+3", "0x10", "1.5", "99999999999999999999"}) {
        INFO("RANK='" << bad << "'");
        const xtel_test::log_capture log;
        CHECK(rank_of({{"RANK", bad}}) == process_rank{});
        const auto warnings = log.at(xtel::log_level::warning);
        REQUIRE(warnings.size() == 1);
        CHECK(warnings[0].find(std::string("RANK='") + bad + "' is ignored") != std::string::npos);
        CHECK(log.all().size() == 1);
    }
}

TEST_CASE("an ignored rank variable leaves the next one to name the rank") {
    const xtel_test::log_capture log;
    CHECK(rank_of({{"RANK", "x"}, {"SLURM_PROCID", "4"}, {"LOCAL_RANK", "-2"}}) ==
          process_rank{4, std::nullopt});
    const auto warnings = log.at(xtel::log_level::warning);
    REQUIRE(warnings.size() == 2);
    CHECK(warnings[0].find("RANK='x' is ignored") != std::string::npos);
    CHECK(warnings[1].find("LOCAL_RANK='-2' is ignored") != std::string::npos);
}

TEST_CASE("a rank written with leading zeros is labelled as the number") {
    CHECK(rank_of({{"RANK", "007"}}) == process_rank{7, std::nullopt});
}

TEST_CASE("NIXL_TELEMETRY_RANK_ENV names the one variable that holds the local rank") {
    CHECK(rank_of({{"NIXL_TELEMETRY_RANK_ENV", "MY_GPU"}, {"MY_GPU", "4"}, {"LOCAL_RANK", "1"}}) ==
          process_rank{std::nullopt, 4});
    CHECK(rank_of({{"NIXL_TELEMETRY_RANK_ENV", "MY_GPU"}, {"LOCAL_RANK", "1"}}) == process_rank{});
    CHECK(rank_of({{"NIXL_TELEMETRY_RANK_ENV", "MY_GPU"}, {"RANK", "9"}, {"MY_GPU", "2"}}) ==
          process_rank{9, 2});
}

TEST_CASE("an empty NIXL_TELEMETRY_RANK_ENV asks for no local_rank label") {
    CHECK(rank_of({{"NIXL_TELEMETRY_RANK_ENV", ""}, {"LOCAL_RANK", "1"}}) == process_rank{});
}

TEST_CASE("a NIXL_TELEMETRY_RANK_ENV that is no variable name is ignored with one warning") {
    const xtel_test::log_capture log;
    CHECK(rank_of({{"NIXL_TELEMETRY_RANK_ENV", "LOCAL RANK"}, {"LOCAL_RANK", "1"}}) ==
          process_rank{std::nullopt, 1});
    const auto warnings = log.at(xtel::log_level::warning);
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0] ==
          "NIXL_TELEMETRY_RANK_ENV='LOCAL RANK' is ignored: expected the name of an environment "
          "variable (letters, digits, '_'); the local rank is looked for in LOCAL_RANK, "
          "OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID");
}

TEST_CASE("the metric model's settings read the rank variables") {
    const auto s = xtel::metrics::agent_metrics_settings::from_env(
        env_table({{"RANK", "3"}, {"LOCAL_RANK", "1"}}));
    CHECK(s.rank == process_rank{3, 1});
}

TEST_CASE("every series of an agent with a rank carries rank and local_rank after agent_name") {
    xtel::metrics::agent_metrics_settings s;
    s.hostname = "host";
    s.builders = {"legacy"};
    s.rank = process_rank{3, 1};
    xtel::metrics::agent_metrics agent("a", s);
    agent.publish();
    const auto snap = agent.latest();
    REQUIRE(snap);
    CHECK(snap->labels == std::vector<xtel::metrics::label>{
                              {"agent_name", "a"}, {"rank", "3"}, {"local_rank", "1"}});
    CHECK_FALSE(snap->families.empty());
}

TEST_CASE("an agent without a rank carries agent_name alone") {
    xtel::metrics::agent_metrics_settings s;
    s.hostname = "host";
    s.builders = {"legacy"};
    xtel::metrics::agent_metrics agent("a", s);
    agent.publish();
    REQUIRE(agent.latest());
    CHECK(agent.latest()->labels == std::vector<xtel::metrics::label>{{"agent_name", "a"}});
}

}  // namespace rank_test
