#include "xtel/core/version.hpp"

namespace xtel {

std::string_view version() noexcept {
    return XTEL_VERSION_STRING;
}

}  // namespace xtel
