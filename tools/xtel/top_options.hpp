#pragma once
// `xtel top`'s command line: the options, their defaults and the usage text.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "top_view.hpp"
#include "xtel/core/error.hpp"

namespace xtel::top {

/// sysexits.h: the command was used incorrectly.
inline constexpr int exit_usage = 64;

struct options {
    static constexpr std::chrono::milliseconds min_interval{100};
    static constexpr std::chrono::milliseconds max_interval{3'600'000};

    std::filesystem::path dir = "/dev/shm";
    column sort = column::tx_rate;
    bool reverse = false;
    std::string filter;
    std::chrono::milliseconds interval{1000};
    std::uint64_t stale_ttl_s = 60;
    /// --allow-uid: the owners whose node files are shown besides the uid it runs as.
    std::vector<uid_t> allowed_uids;
    bool once = false;
    bool help = false;
};

/// The text `xtel top --help` prints.
std::string usage();

/// Reads the arguments after `top` (argv[1] on is the first option). The directory must exist
/// unless help is asked. Throws usage_error.
options parse_options(int argc, char** argv);

}  // namespace xtel::top
