// Loading third-party exporter plugins: name checks, dlopen, entry points, descriptor checks.

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <fstream>
#include <map>
#include <mutex>
#include <system_error>

#include "core/log.hpp"
#include "exporters/plugin/plugin_descriptor.hpp"
#include "xtel/core/error.hpp"
#include "xtel/exporters/plugin.hpp"

namespace xtel {

namespace {

constexpr std::string_view file_prefix = "libtelemetry_exporter_";
constexpr std::string_view file_suffix = ".so";

/// ASCII only, not isalnum(): the accepted set must not depend on the locale.
constexpr bool is_name_char(char c) noexcept {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
}

[[noreturn]] void fail(const std::filesystem::path& file, std::string_view cause) {
    throw exporter_error(fmt::format("telemetry exporter plugin {}: {}", file.string(), cause));
}

std::string dl_error_text() {
    const char* e = ::dlerror();
    return e != nullptr ? std::string(e) : std::string("the dynamic loader gave no reason");
}

/// Checked before dlopen so that "not a shared object" is said plainly, and so that a text file
/// that happens to carry a plugin's name is never handed to the dynamic loader.
bool starts_with_elf_magic(const std::filesystem::path& file) {
    std::ifstream in(file, std::ios::binary);
    char magic[4] = {};
    in.read(magic, sizeof magic);
    return in.gcount() == 4 && std::memcmp(magic,
                                           "\x7f"
                                           "ELF",
                                           4) == 0;
}

void* find_entry_point(void* handle, const std::filesystem::path& file, const char* symbol) {
    ::dlerror();
    void* const address = ::dlsym(handle, symbol);
    if (address == nullptr) {
        ::dlerror();
        fail(file, fmt::format("the entry point {}() is missing: a plugin defines it extern \"C\" "
                               "and exports it (XTEL_PLUGIN_EXPORT)",
                               symbol));
    }
    return address;
}

template <class Function>
Function entry_point_cast(void* address) noexcept {
    // POSIX guarantees that dlsym's object pointer converts to a function pointer.
    Function f;
    static_assert(sizeof f == sizeof address);
    std::memcpy(&f, &address, sizeof f);
    return f;
}

/// Runs a plugin's fini. Never throws: it runs from destructors and on error paths.
void call_fini(plugin::fini_fn fini, const std::filesystem::path& file) noexcept {
    try {
        fini();
    } catch (const std::exception& e) {
        detail::log(log_level::error, "telemetry exporter plugin {}: {}() threw: {}", file.string(),
                    plugin::fini_symbol, detail::printable(e.what()));
    } catch (...) {
        detail::log(log_level::error, "telemetry exporter plugin {}: {}() threw", file.string(),
                    plugin::fini_symbol);
    }
}

/// Calls fini on scope exit unless disarmed: once init has returned a descriptor, fini runs on
/// every path, including the checks that reject the descriptor.
struct fini_guard {
    plugin::fini_fn fini;
    const std::filesystem::path& file;
    bool armed = true;
    ~fini_guard() {
        if (armed) {
            call_fini(fini, file);
        }
    }
};

/// The plugin file `file` (of plugin `name`) in `dir`, checked before the dynamic loader sees
/// it: the directory is set and is one, and the file is a regular file that starts as a shared
/// object does.
std::filesystem::path checked_plugin_path(const std::filesystem::path& dir,
                                          std::string_view name,
                                          const std::string& file) {
    if (dir.empty()) {
        throw exporter_error(fmt::format(
            "telemetry exporter '{}' is not built in, and {} is not set: set it to the directory "
            "that holds {}",
            name, env::plugin_dir, file));
    }
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) {
        throw exporter_error(fmt::format(
            "telemetry exporter plugin directory {} ({}): {}", dir.string(), env::plugin_dir,
            std::filesystem::exists(dir, ec) ? "is not a directory" : "does not exist"));
    }
    std::filesystem::path path = dir / file;
    const auto st = std::filesystem::status(path, ec);
    if (!std::filesystem::exists(st)) {
        const auto present = list_plugins(dir);
        fail(path, fmt::format("the file does not exist (plugins in {}: {})", dir.string(),
                               present.empty() ? std::string("none")
                                               : fmt::format("{}", fmt::join(present, ", "))));
    }
    if (!std::filesystem::is_regular_file(st)) {
        fail(path, "is not a regular file");
    }
    if (!starts_with_elf_magic(path)) {
        fail(path, "is not a shared object (it does not start with the ELF magic number)");
    }
    return path;
}

/// The library at `path`, loaded with every symbol resolved and none made global.
void* open_library(const std::filesystem::path& path) {
    // RTLD_NOW: every undefined symbol is resolved here, so a plugin built against a library
    //   that is missing fails now with the loader's reason, instead of aborting the process
    //   the first time the flusher calls into the unresolved function.
    // RTLD_LOCAL: the plugin's symbols stay out of the global namespace, so two plugins, or a
    //   plugin and the agent, that define the same symbol do not interpose on each other; we
    //   reach the plugin only through dlsym on this handle.
    // Not RTLD_NODELETE: the library is unloaded once its last user is gone, after fini, and
    //   nothing the plugin made outlives that (exporters are destroyed first, exception
    //   messages and descriptor strings are copied). A plugin that starts threads joins them in
    //   its exporter's destructor or in fini (docs/plugins.md). glibc itself keeps a library
    //   that defines GNU unique symbols mapped; fini still runs first.
    // Not RTLD_DEEPBIND: the plugin would resolve its symbols in its own dependencies before
    //   the process's, and could bind to a second copy of what the agent uses (operator new,
    //   libstdc++'s stream globals); sanitizers cannot interpose on it either.
    ::dlerror();
    void* const handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        fail(path, fmt::format("cannot be loaded as a shared object: {}", dl_error_text()));
    }
    return handle;
}

/// The descriptor a plugin's init returns: never null; what init throws becomes an
/// exporter_error that quotes it.
const plugin::descriptor_v1* call_init(plugin::init_fn_v1 init, const std::filesystem::path& path) {
    const plugin::descriptor_v1* descriptor = nullptr;
    try {
        descriptor = init();
    } catch (const std::exception& e) {
        fail(path, fmt::format("{}() threw: {}", plugin::init_symbol, detail::printable(e.what())));
    } catch (...) {
        fail(path, fmt::format("{}() threw", plugin::init_symbol));
    }
    if (descriptor == nullptr) {
        fail(path,
             fmt::format("{}() returned null: the plugin declined to load", plugin::init_symbol));
    }
    return descriptor;
}

}  // namespace

std::string detail::printable(std::string_view text, std::size_t max) {
    const bool cut = text.size() > max;
    text = text.substr(0, max);
    std::string out;
    out.reserve(text.size() + 3);
    for (const char c : text) {
        const auto u = static_cast<unsigned char>(c);
        if (c == '\\') {
            out += "\\\\";
        } else if (u >= 0x20 && u < 0x7f) {
            out += c;
        } else {
            out += fmt::format("\\x{:02x}", u);
        }
    }
    if (cut) {
        out += "...";
    }
    return out;
}

std::string detail::printable_c_string(const char* s) {
    return s == nullptr ? std::string()
                        : printable(std::string_view(s, ::strnlen(s, max_plugin_text + 1)));
}

detail::descriptor_check detail::check_descriptor(const plugin::descriptor_v1& d,
                                                  std::string_view file_name) {
    descriptor_check r;
    // `api` is the first member in every version, so it can be read before the layout of the
    // rest is known to match; nothing else is read when it does not.
    if (d.api != plugin::current_api_version) {
        r.error = fmt::format(
            "its plugin API version {} does not match: this xtel loads plugins of API version {} "
            "(rebuild the plugin against this xtel's xtel/plugin/exporter_v1.hpp)",
            static_cast<std::uint32_t>(d.api),
            static_cast<std::uint32_t>(plugin::current_api_version));
        return r;
    }
    if (d.create == nullptr) {
        r.error = "its descriptor has no creator (create is null)";
        return r;
    }
    const std::string_view own =
        d.name != nullptr ? std::string_view(d.name, ::strnlen(d.name, max_plugin_text + 1))
                          : std::string_view();
    // A name is read up to one byte past the bound; one that long is not any plugin's file name
    // (those are at most 64 bytes), and comparing its first bytes could pass for equal.
    r.name_differs = own.size() > max_plugin_text || own != file_name;
    r.own_name = printable(own);
    r.version = printable_c_string(d.version);
    return r;
}

bool is_valid_plugin_name(std::string_view name) noexcept {
    return !name.empty() && name.size() <= max_plugin_name_length &&
           std::all_of(name.begin(), name.end(), is_name_char);
}

std::string plugin_file_name(std::string_view name) {
    if (!is_valid_plugin_name(name)) {
        throw exporter_error(fmt::format(
            "telemetry exporter plugin name '{}' is invalid: expected 1 to {} letters, digits, "
            "'_' or '-' (the name becomes part of a file name in {})",
            name, max_plugin_name_length, env::plugin_dir));
    }
    return fmt::format("{}{}{}", file_prefix, name, file_suffix);
}

bool plugin_available(const config& cfg, std::string_view name) {
    if (cfg.plugin_dir.empty() || !is_valid_plugin_name(name)) {
        return false;
    }
    std::error_code ec;
    return std::filesystem::is_regular_file(cfg.plugin_dir / plugin_file_name(name), ec);
}

std::vector<std::string> list_plugins(const std::filesystem::path& dir) {
    std::vector<std::string> names;
    std::error_code ec;
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string file = it->path().filename().string();
        if (file.size() <= file_prefix.size() + file_suffix.size() ||
            file.compare(0, file_prefix.size(), file_prefix) != 0 ||
            file.compare(file.size() - file_suffix.size(), file_suffix.size(), file_suffix) != 0) {
            continue;
        }
        std::string name =
            file.substr(file_prefix.size(), file.size() - file_prefix.size() - file_suffix.size());
        if (is_valid_plugin_name(name)) {
            names.push_back(std::move(name));
        }
    }
    std::sort(names.begin(), names.end());
    return names;
}

void detail::library_closer::operator()(void* handle) const noexcept {
    if (handle != nullptr && ::dlclose(handle) != 0) {
        detail::log(log_level::warning, "telemetry exporter plugin: dlclose failed: {}",
                    dl_error_text());
    }
}

plugin_library::plugin_library(const std::filesystem::path& dir, std::string_view name)
    : name_(name) {
    const std::string file = plugin_file_name(name);  // first: nothing else sees a bad name
    path_ = checked_plugin_path(dir, name, file);
    handle_.reset(open_library(path_));

    // Both entry points are looked up before either runs, so a library without fini is
    // rejected before any of its code has run.
    const auto init = entry_point_cast<plugin::init_fn_v1>(
        find_entry_point(handle_.get(), path_, plugin::init_symbol));
    const auto fini = entry_point_cast<plugin::fini_fn>(
        find_entry_point(handle_.get(), path_, plugin::fini_symbol));

    const plugin::descriptor_v1* const descriptor = call_init(init, path_);
    fini_guard guard{fini, path_};

    const auto checked = detail::check_descriptor(*descriptor, name_);
    if (!checked.error.empty()) {
        fail(path_, checked.error);
    }
    api_ = descriptor->api;
    create_ = descriptor->create;
    version_ = checked.version;
    if (checked.name_differs) {
        detail::log(log_level::warning,
                    "telemetry exporter plugin {}: its descriptor names it '{}'; it is known by "
                    "its file name, '{}'",
                    path_.string(), checked.own_name, name_);
    }

    guard.armed = false;
    fini_ = fini;
    detail::log(log_level::info, "telemetry exporter plugin '{}' version '{}' loaded from {}",
                name_, version_, path_.string());
}

plugin_library::~plugin_library() {
    if (fini_ != nullptr) {
        call_fini(fini_, path_);
    }
    // handle_ is destroyed after this body: dlclose comes after fini.
}

std::unique_ptr<plugin::exporter_v1> plugin_library::create(
    const plugin::init_params_v1& params) const {
    std::unique_ptr<plugin::exporter_v1> exporter;
    try {
        exporter = create_(params);
    } catch (const std::exception& e) {
        fail(path_,
             fmt::format("the exporter's constructor threw: {}", detail::printable(e.what())));
    } catch (...) {
        fail(path_, "the exporter's constructor threw something that is not a std::exception");
    }
    if (!exporter) {
        fail(path_, "the plugin's creator returned null");
    }
    return exporter;
}

namespace {

/// One load per file in the process: several agents in one process share the library, and its
/// init and fini run once per load, not once per agent.
struct library_cache {
    struct entry {
        std::unique_ptr<plugin_library> library;
        std::size_t users = 0;
    };
    std::mutex mutex;
    std::map<std::filesystem::path, entry> entries;
};

library_cache& cache() {
    // Never destroyed: an exporter in a static object may be released after any static cache
    // would have been.
    static auto* const instance = new library_cache;
    return *instance;
}

void release(const std::filesystem::path& key) noexcept {
    auto& c = cache();
    const std::lock_guard lock(c.mutex);
    const auto it = c.entries.find(key);
    if (it != c.entries.end() && --it->second.users == 0) {
        // Destroyed under the lock (fini, then dlclose), so a load of the same file that waits
        // on the lock starts after fini has finished, never between the two.
        c.entries.erase(it);
    }
}

}  // namespace

std::shared_ptr<const plugin_library> load_plugin(const std::filesystem::path& dir,
                                                  std::string_view name) {
    const std::string file = plugin_file_name(name);
    std::error_code ec;
    std::filesystem::path key = std::filesystem::weakly_canonical(dir / file, ec);
    if (ec) {
        key = (dir / file).lexically_normal();
    }
    const plugin_library* library = nullptr;
    {
        auto& c = cache();
        const std::lock_guard lock(c.mutex);
        const auto it = c.entries.try_emplace(key).first;
        if (!it->second.library) {
            try {
                it->second.library = std::make_unique<plugin_library>(dir, name);
            } catch (...) {
                c.entries.erase(it);
                throw;
            }
        }
        ++it->second.users;
        library = it->second.library.get();
    }
    // Made outside the lock: if it fails, shared_ptr calls the deleter, which takes the lock.
    return std::shared_ptr<const plugin_library>(library,
                                                 [key](const plugin_library*) { release(key); });
}

}  // namespace xtel
