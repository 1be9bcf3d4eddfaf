#include "xtel/agent/basic_agent.hpp"
#include "xtel/agent/device.hpp"

namespace xtel {

status vram_support() {
    return detail::vram_support();
}

}  // namespace xtel
