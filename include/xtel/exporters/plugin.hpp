#pragma once
/// The plugin exporter: third-party exporters loaded from shared libraries (the plugin guide's
/// dlopen contract), wrapped as a pipeline policy, `telemetry<plugin_exporter>`.
///
/// The virtual call into the plugin happens here, on the flusher thread only; the record path
/// never sees a plugin.

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "xtel/core/exporter.hpp"
#include "xtel/plugin/exporter_v1.hpp"

namespace xtel {

/// Longest plugin name accepted.
inline constexpr std::size_t max_plugin_name_length = 64;

/// True for 1 to max_plugin_name_length letters, digits, '_' and '-': no name that passes can
/// leave the plugin directory ('/', '.' and ".." are impossible).
bool is_valid_plugin_name(std::string_view name) noexcept;

/// "libtelemetry_exporter_<name>.so". Throws exporter_error for an invalid name.
std::string plugin_file_name(std::string_view name);

/// True when cfg.plugin_dir is set and holds a regular file for `name` (nothing is loaded).
/// The registry asks this for an exporter name it does not compile in.
bool plugin_available(const config& cfg, std::string_view name);

/// The plugin names present in `dir` (files named like plugins), sorted; for error messages.
std::vector<std::string> list_plugins(const std::filesystem::path& dir);

namespace detail {
/// dlclose()s a handle from dlopen().
struct library_closer {
    void operator()(void* handle) const noexcept;
};
using library_handle = std::unique_ptr<void, library_closer>;
}  // namespace detail

/// A plugin library that passed every check: loaded, both entry points found, init returned a
/// descriptor of a supported API version. Destruction calls fini, then dlclose.
class plugin_library {
  public:
    /// Loads `<dir>/libtelemetry_exporter_<name>.so`. Throws exporter_error naming the file and
    /// the cause. Prefer load_plugin(), which shares one load between agents.
    plugin_library(const std::filesystem::path& dir, std::string_view name);
    ~plugin_library();

    plugin_library(const plugin_library&) = delete;
    plugin_library& operator=(const plugin_library&) = delete;

    /// Builds an exporter. Throws exporter_error naming the file when the creator throws or
    /// returns null; the library stays usable.
    std::unique_ptr<plugin::exporter_v1> create(const plugin::init_params_v1& params) const;

    const std::filesystem::path& path() const noexcept { return path_; }
    /// The name the plugin was asked for (its file name's `<name>`).
    const std::string& name() const noexcept { return name_; }
    /// The plugin's own version string from its descriptor.
    const std::string& version() const noexcept { return version_; }
    plugin::api_version api() const noexcept { return api_; }

  private:
    detail::library_handle handle_;  // first member, so the last one destroyed
    std::filesystem::path path_;
    std::string name_;
    std::string version_;
    plugin::api_version api_ = plugin::api_version::v1;
    plugin::creator_v1 create_ = nullptr;
    plugin::fini_fn fini_ = nullptr;
};

/// Loads `<dir>/libtelemetry_exporter_<name>.so`, or shares the copy already loaded in this
/// process, so that init and fini run once per load however many agents use the plugin.
/// Throws exporter_error naming the file and the cause.
std::shared_ptr<const plugin_library> load_plugin(const std::filesystem::path& dir,
                                                  std::string_view name);

/// What one plugin of a plugin_exporter is doing.
struct plugin_status {
    std::string name;
    std::filesystem::path path;
    std::string version;
    /// False when its exporter could not be built: that plugin is disabled.
    bool active = false;
    /// Why it is disabled; empty when active.
    std::string error;
    /// export_event and flush calls that threw.
    std::uint64_t failures = 0;
    /// Events this plugin did not take: each one its export_event threw on, and every event
    /// while it is disabled.
    std::uint64_t events_lost = 0;
};

/// The pipeline policy over the plugins named in ctx.cfg.exporters, each loaded from
/// ctx.cfg.plugin_dir, in that order. A library that fails its checks throws exporter_error
/// (the agent does not start); an exporter whose constructor throws disables that plugin with
/// an error log (the agent runs without it). See docs/plugins.md.
class plugin_exporter {
  public:
    static constexpr std::string_view name = "plugin";

    explicit plugin_exporter(const exporter_context& ctx);
    ~plugin_exporter();

    plugin_exporter(plugin_exporter&&) noexcept;
    plugin_exporter& operator=(plugin_exporter&&) = delete;

    /// Hands every event to every active plugin. An exception from a plugin is caught,
    /// counted, and logged the first time for that plugin; the next event goes on.
    void export_batch(std::span<const event> batch) noexcept;

    /// Calls each active plugin's flush(), with the same failure handling.
    void on_flush_end() noexcept;

    /// Plugins whose exporter runs.
    std::size_t active_count() const noexcept;

    /// True when no plugin's exporter runs (xtel/core/exporter.hpp's optional member).
    bool disabled() const noexcept { return active_count() == 0; }
    /// Events lost, summed over the plugins (plugin_status::events_lost).
    std::uint64_t events_lost() const noexcept;

    /// One entry per plugin, in load order. Safe to call while the flusher runs.
    std::vector<plugin_status> status() const;

  private:
    struct loaded;

    /// Counts a plugin's failure and logs the first one.
    void note_failure(loaded& plugin, std::string_view call, std::string_view what) noexcept;

    std::string agent_name_;
    std::vector<std::unique_ptr<loaded>> plugins_;
};

}  // namespace xtel
