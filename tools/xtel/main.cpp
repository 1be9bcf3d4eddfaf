// xtel: the node's tools for a person at a terminal. `xtel top` is a live view of every agent
// of the node (docs/deployment.md); `xtel nixl install` puts xtel's NIXL plug-in where NIXL
// looks (docs/nixl.md).

#include <cstdio>
#include <string_view>

#include "nixl_install.hpp"
#include "top.hpp"
#include "top_options.hpp"
#include "xtel/core/version.hpp"

namespace {

constexpr std::string_view usage_text =
    "Usage: xtel COMMAND [OPTION]...\n"
    "\n"
    "Commands:\n"
    "  top     a live view of every agent of this node: bandwidth, transfers, latency,\n"
    "          errors, dropped records and writer state, from the agents' node files\n"
    "          (xtel top --help)\n"
    "  nixl    nixl install: link xtel's NIXL plug-in into the NIXL plug-in directory of\n"
    "          the active Python environment (xtel nixl install --help)\n"
    "\n"
    "  --help     this text\n"
    "  --version  the version of xtel\n"
    "Exit status: the command's; 64 bad usage.\n";

}  // namespace

int main(int argc, char** argv) {
    const std::string_view command = argc > 1 ? argv[1] : "";
    if (command == "--help" || command == "-h" || command == "help") {
        std::fwrite(usage_text.data(), 1, usage_text.size(), stdout);
        return 0;
    }
    if (command == "--version") {
        std::printf("xtel %.*s\n", static_cast<int>(xtel::version().size()),
                    xtel::version().data());
        return 0;
    }
    if (command == "top") {
        return xtel::top::main(argc - 1, argv + 1);
    }
    if (command == "nixl") {
        return xtel::nixl_install::main(argc - 1, argv + 1);
    }
    if (command.empty()) {
        std::fprintf(stderr,
                     "xtel: a command is needed: expected top or nixl (--help lists them)\n");
    } else {
        std::fprintf(stderr,
                     "xtel: '%.*s' is not a command: expected top or nixl (--help lists them)\n",
                     static_cast<int>(command.size()), command.data());
    }
    return xtel::top::exit_usage;
}
