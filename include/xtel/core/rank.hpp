#pragma once
/// The rank of the agent's process, as its launcher names it in the environment: the labels
/// `rank` and `local_rank` that every series of the agent carries (the node and Prometheus
/// exporters add them after agent_name), so that the ranks of one node stay apart wherever
/// their series are merged.

#include <cstdint>
#include <optional>

#include "xtel/core/config.hpp"

namespace xtel {

namespace env {
/// Where the global rank is looked for, in order: torchrun (vLLM and SGLang set it too),
/// Open MPI, Slurm.
inline constexpr const char* rank_variables[] = {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"};
/// Where the rank within the node is looked for, in the same order.
inline constexpr const char* local_rank_variables[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                                       "SLURM_LOCALID"};
/// NIXL's: the name of the one variable that holds the local rank, in place of
/// local_rank_variables; set empty, no local_rank label.
inline constexpr const char* rank_env = "NIXL_TELEMETRY_RANK_ENV";
}  // namespace env

/// What the environment says of the process's rank; each part is absent when no variable names
/// it.
struct process_rank {
    std::optional<std::uint64_t> rank;
    std::optional<std::uint64_t> local_rank;

    /// Each part from the first of its variables (env::rank_variables, local_rank_variables,
    /// or for the local rank the one NIXL_TELEMETRY_RANK_ENV names) set to a non-negative
    /// decimal integer. A variable set to anything else is skipped with
    /// one warning naming it and quoting its value: telemetry never stops an agent for a label.
    /// Never throws.
    static process_rank from_env(const env_lookup& lookup = process_env);

    friend bool operator==(const process_rank&, const process_rank&) = default;
};

}  // namespace xtel
