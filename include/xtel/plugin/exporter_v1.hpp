#pragma once
/// The third-party exporter plugin API, version 1: everything a plugin author compiles against.
///
/// A plugin is a shared library `libtelemetry_exporter_<name>.so` in
/// NIXL_TELEMETRY_EXPORTER_PLUGIN_DIR with two `extern "C"` entry points:
///
///   const xtel::plugin::descriptor_v1* nixl_telemetry_plugin_init();
///   void nixl_telemetry_plugin_fini();
///
/// This header depends on xtel/core/event.hpp and the standard library only, so a plugin needs
/// neither libxtel nor its dependencies. docs/plugins.md is the guide; examples/plugins/csv is
/// a complete plugin.
///
/// ABI: the types below cross the boundary between the agent and the plugin, so both must be
/// built with the same C++ standard library ABI (libstdc++ with the same _GLIBCXX_USE_CXX11_ABI).
/// Any change to their layout or meaning is a new API version with new `_v2` names; the first
/// member of every descriptor is its API version, so a loader can read it from any plugin
/// before it trusts the rest.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <type_traits>

#include "xtel/core/event.hpp"

/// Marks the entry points as exported from a plugin built with hidden visibility.
#define XTEL_PLUGIN_EXPORT __attribute__((visibility("default")))

namespace xtel::plugin {

/// The plugin API versions. A loader accepts exactly the versions it was built with.
enum class api_version : std::uint32_t {
    v1 = 1,
};

/// The version this header describes.
inline constexpr api_version current_api_version = api_version::v1;

/// The entry points' names, as the loader looks them up.
inline constexpr const char* init_symbol = "nixl_telemetry_plugin_init";
inline constexpr const char* fini_symbol = "nixl_telemetry_plugin_fini";

/// What an exporter is built from: the agent's telemetry settings.
struct init_params_v1 {
    /// NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH as given; empty when unset. Its meaning is the
    /// plugin's (a directory, an address, ...).
    std::filesystem::path output_path;
    /// The agent's name; a file-name-safe string when the agent sets telemetry up.
    std::string agent_name;
    /// NIXL_TELEMETRY_BUFFER_SIZE: how many events the plugin may hold back before it writes.
    std::size_t event_limit = 0;
};

/// Base of every plugin exporter. The agent owns one instance per plugin and calls it only from
/// its telemetry flusher thread, never concurrently with itself and never on a transfer.
class exporter_v1 {
  public:
    explicit exporter_v1(const init_params_v1& params) noexcept
        : event_limit_(params.event_limit) {}
    virtual ~exporter_v1() = default;

    exporter_v1(const exporter_v1&) = delete;
    exporter_v1& operator=(const exporter_v1&) = delete;

    /// Takes one event, in the order its thread recorded it. May throw: the agent catches,
    /// counts and logs the first failure, and goes on with the next event.
    virtual void export_event(const event& e) = 0;

    /// Called after each flush round (every NIXL_TELEMETRY_RUN_INTERVAL ms and at shutdown):
    /// the place to push buffered output. May throw, like export_event.
    virtual void flush() {}

    /// The event limit the exporter was built with.
    std::size_t event_limit() const noexcept { return event_limit_; }

  private:
    const std::size_t event_limit_;
};

/// Builds a plugin's exporter. May throw; see docs/plugins.md for what the agent does then.
using creator_v1 = std::unique_ptr<exporter_v1> (*)(const init_params_v1& params);

/// What nixl_telemetry_plugin_init returns: static data of the plugin that stays valid until
/// nixl_telemetry_plugin_fini. Standard layout; `api` stays the first member in every version.
struct descriptor_v1 {
    api_version api = api_version::v1;
    /// The plugin's name; the loader expects the `<name>` of its file name.
    const char* name = nullptr;
    /// The plugin's own version, free text ("1.0.0"); used in log messages.
    const char* version = nullptr;
    creator_v1 create = nullptr;
};

static_assert(std::is_standard_layout_v<descriptor_v1>);
static_assert(offsetof(descriptor_v1, api) == 0);

/// The entry points' types.
using init_fn_v1 = const descriptor_v1* (*)();
using fini_fn = void (*)();

/// Turns an exporter class into a descriptor, so a plugin's init is a few lines:
///
///   using xtel::plugin::descriptor_v1, xtel::plugin::plugin_creator_v1;
///   extern "C" XTEL_PLUGIN_EXPORT const descriptor_v1* nixl_telemetry_plugin_init() {
///       static constexpr auto d = plugin_creator_v1<my_exporter>::describe("my", "1.0");
///       return &d;
///   }
template <class Exporter>
struct plugin_creator_v1 {
    static_assert(std::is_base_of_v<exporter_v1, Exporter>,
                  "a plugin exporter derives from xtel::plugin::exporter_v1");
    static_assert(std::is_constructible_v<Exporter, const init_params_v1&>,
                  "a plugin exporter is constructible from const init_params_v1&");

    /// The creator: constructs the exporter; its exceptions propagate to the loader.
    static std::unique_ptr<exporter_v1> create(const init_params_v1& params) {
        return std::make_unique<Exporter>(params);
    }

    /// A descriptor of the current API version for this exporter.
    static constexpr descriptor_v1 describe(const char* name, const char* version) noexcept {
        return descriptor_v1{api_version::v1, name, version, &create};
    }
};

}  // namespace xtel::plugin
