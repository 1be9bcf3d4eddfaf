// The entry point NIXL's plug-in manager looks up in libtelemetry_exporter_xtel.so (the only
// symbol the library exports: plugin.map).
#include <memory>
#include <string>

#include "nixl/xtel_exporter.hpp"
#include "xtel/core/version.hpp"
#include "xtel/nixl/abi_v2.hpp"

namespace {

namespace abi = xtel::nixl::abi_v2;

/// Never null, never throws: NIXL throws out of nixlAgent's constructor for either. The
/// exporter's constructor catches its own failures; only the allocation of the object itself
/// is left, and without memory for that small an object the agent is lost anyway.
std::unique_ptr<abi::exporter> create_exporter(const abi::init_params& params) noexcept {
    try {
        return std::make_unique<xtel::nixl::xtel_exporter>(params);
    } catch (...) {
        return nullptr;
    }
}

}  // namespace

extern "C" __attribute__((visibility("default"))) abi::plugin* nixl_telemetry_plugin_init() {
    // "xtel" and the version fit std::string's inline buffer: building them allocates nothing
    // and so cannot throw.
    static abi::plugin plugin{abi::api_version::v2, &create_exporter, "xtel",
                              std::string(xtel::version())};
    return &plugin;
}
