#include "xtel/agent/basic_agent.hpp"
#include "xtel/agent/device.hpp"
#include "xtel/core/parse.hpp"

namespace xtel {

namespace detail {

std::string checked_agent_name(std::string name) {
    parse::file_name("agent name", name);
    return name;
}

}  // namespace detail

status vram_support() {
    return detail::vram_support();
}

}  // namespace xtel
