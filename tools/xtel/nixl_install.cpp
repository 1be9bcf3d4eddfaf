#include "nixl_install.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <variant>
#include <vector>

#include "top_options.hpp"

namespace xtel::nixl_install {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view plugin_name = "libtelemetry_exporter_xtel.so";

// Where the plug-in and the Python are when none is named. Installed by CMake, the plug-in is in
// the library directory of the install (XTEL_NIXL_PLUGIN_DEFAULT). Installed by the Python
// package's wheel (XTEL_NIXL_PLUGIN_IN_PACKAGE, python/CMakeLists.txt), this program is a script
// of the environment and the plug-in package data of xtel, whose path the environment's Python
// knows, and that Python is the python3 beside this program (the venv's bin/).
#ifdef XTEL_NIXL_PLUGIN_IN_PACKAGE
constexpr bool plugin_in_package = true;
#define PLUGIN_DEFAULT_TEXT "the one in the xtel package PYTHON imports"
#define PYTHON_DEFAULT_TEXT "the python3 beside this program, else python3 on PATH"
#define XTEL_NIXL_PLUGIN_DEFAULT ""
#else
constexpr bool plugin_in_package = false;
#define PLUGIN_DEFAULT_TEXT XTEL_NIXL_PLUGIN_DEFAULT
#define PYTHON_DEFAULT_TEXT "python3 on PATH, the active one"
#endif

constexpr std::string_view usage_text =
    "Usage: xtel nixl install [--python PYTHON | --plugin-dir DIR] [--plugin PATH]\n"
    "\n"
    "Links xtel's NIXL plug-in (libtelemetry_exporter_xtel.so) into the plug-in directory of\n"
    "the NIXL that PYTHON imports (the .nixl_cu12 or .nixl_cu13 wheel's .libs/plugins), beside\n"
    "NIXL's own plug-ins; then NIXL_TELEMETRY_EXPORTER=xtel loads it. Running it again changes\n"
    "nothing.\n"
    "\n"
    "  --python PYTHON  the environment's Python (default: " PYTHON_DEFAULT_TEXT
    ")\n"
    "  --plugin-dir DIR NIXL's plug-in directory itself, in place of asking Python\n"
    "  --plugin PATH    the plug-in to link (default: " PLUGIN_DEFAULT_TEXT
    ")\n"
    "Exit status: 0 linked or already linked, 1 failed, 64 bad usage.\n";

/// Prints NIXL's plug-in directories of each NIXL wheel the environment has, one a line,
/// without importing NIXL (its import starts CUDA's probing).
constexpr std::string_view find_plugin_dirs =
    "import glob, importlib.util, os\n"
    "for m in ('nixl_cu12', 'nixl_cu13'):\n"
    "    s = importlib.util.find_spec(m)\n"
    "    if s and s.origin:\n"
    "        root = os.path.dirname(os.path.dirname(s.origin))\n"
    "        for d in glob.glob(os.path.join(root, '.' + m + '*.libs', 'plugins')):\n"
    "            print(d)\n";

/// Prints the path of the plug-in the xtel package carries, without importing the package.
constexpr std::string_view find_package_plugin =
    "import importlib.util, os\n"
    "s = importlib.util.find_spec('xtel')\n"
    "p = s and s.origin and os.path.join(os.path.dirname(s.origin), "
    "'libtelemetry_exporter_xtel.so')\n"
    "if p and os.path.isfile(p):\n"
    "    print(p)\n";

struct options {
    std::string python;
    std::optional<fs::path> plugin_dir;
    std::optional<fs::path> plugin;
};

/// The Python asked when --python is not given.
std::string default_python() {
    if (plugin_in_package) {
        std::error_code ec;
        const fs::path beside = fs::read_symlink("/proc/self/exe", ec).parent_path() / "python3";
        if (!ec && fs::exists(beside, ec)) {
            return beside.string();
        }
    }
    return "python3";
}

int fail(const std::string& message) {
    std::fprintf(stderr, "xtel nixl install: %s\n", message.c_str());
    return 1;
}

/// Single-quoted for sh.
std::string sh_quoted(std::string_view s) {
    std::string out = "'";
    for (const char c : s) {
        out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    }
    return out + "'";
}

/// The lines `script` prints, run by `python`, or an error message.
std::variant<std::vector<fs::path>, std::string> ask_python(const std::string& python,
                                                            std::string_view script) {
    const std::string command = sh_quoted(python) + " -c " + sh_quoted(script) + " 2>&1";
    FILE* pipe = ::popen(command.c_str(), "r");
    if (pipe == nullptr) {
        return "could not run " + python;
    }
    std::string out;
    char buf[4096];
    while (const std::size_t n = std::fread(buf, 1, sizeof buf, pipe)) {
        out.append(buf, n);
    }
    const int status = ::pclose(pipe);
    if (status != 0) {
        while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) {
            out.pop_back();
        }
        return "--python " + python + " failed (exit status " + std::to_string(status >> 8) +
               "): " + out;
    }
    std::vector<fs::path> dirs;
    for (std::size_t at = 0; at < out.size();) {
        const std::size_t end = std::min(out.find('\n', at), out.size());
        if (end > at) {
            dirs.emplace_back(out.substr(at, end - at));
        }
        at = end + 1;
    }
    return dirs;
}

/// The options, or the exit status of bad usage (or --help).
std::variant<options, int> parse(int argc, char** argv) {
    options o;
    o.python = default_python();
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--help" || a == "-h") {
            std::fwrite(usage_text.data(), 1, usage_text.size(), stdout);
            return 0;
        }
        if ((a == "--python" || a == "--plugin-dir" || a == "--plugin") && i + 1 < argc) {
            const std::string v = argv[++i];
            if (a == "--python") {
                o.python = v;
            } else if (a == "--plugin-dir") {
                o.plugin_dir = v;
            } else {
                o.plugin = v;
            }
            continue;
        }
        std::fprintf(stderr,
                     "xtel nixl install: '%.*s' is not an option here: expected --python, "
                     "--plugin-dir or --plugin, each with a value (--help)\n",
                     static_cast<int>(a.size()), a.data());
        return top::exit_usage;
    }
    return o;
}

/// The one plug-in directory to link into, or the exit status of a failure.
std::variant<fs::path, int> plugin_dir_of(const options& o) {
    if (o.plugin_dir) {
        std::error_code ec;
        if (!fs::is_directory(*o.plugin_dir, ec)) {
            return fail("--plugin-dir '" + o.plugin_dir->string() +
                        "' is not a directory: expected NIXL's plug-in directory (the one "
                        "holding libplugin_UCX.so)");
        }
        return *o.plugin_dir;
    }
    auto found = ask_python(o.python, find_plugin_dirs);
    if (const auto* error = std::get_if<std::string>(&found)) {
        return fail(*error);
    }
    const auto& dirs = std::get<std::vector<fs::path>>(found);
    if (dirs.size() != 1) {
        std::string which;
        for (const fs::path& d : dirs) {
            which += " '" + d.string() + "'";
        }
        return fail(dirs.empty()
                        ? "the Python '" + o.python +
                              "' has no NIXL wheel (nixl-cu12 or nixl-cu13) with a plug-in "
                              "directory: activate NIXL's environment, or give --python or "
                              "--plugin-dir"
                        : "the Python '" + o.python +
                              "' has more than one NIXL plug-in "
                              "directory:" +
                              which + ": give --plugin-dir");
    }
    return dirs.front();
}

/// The plug-in to link: --plugin, or where the install put it, or the exit status of a failure.
std::variant<fs::path, int> plugin_of(const options& o) {
    if (o.plugin) {
        return *o.plugin;
    }
    if (!plugin_in_package) {
        return fs::path(XTEL_NIXL_PLUGIN_DEFAULT);
    }
    auto found = ask_python(o.python, find_package_plugin);
    if (const auto* error = std::get_if<std::string>(&found)) {
        return fail(*error);
    }
    const auto& paths = std::get<std::vector<fs::path>>(found);
    if (paths.empty()) {
        return fail("the Python '" + o.python + "' has no xtel package holding " +
                    std::string(plugin_name) + ": give --python or --plugin");
    }
    return paths.front();
}

/// Links `plugin` into `dir`: a link already there to it is left, a link elsewhere replaced, a
/// file refused (it is not xtel's to remove).
int link_into(const fs::path& dir, const fs::path& plugin) {
    std::error_code ec;
    const fs::path target = fs::absolute(plugin, ec);
    if (ec || !fs::is_regular_file(target, ec)) {
        return fail("--plugin '" + plugin.string() + "' is not a file: expected xtel's " +
                    std::string(plugin_name));
    }
    const fs::path link = dir / plugin_name;
    const fs::file_status st = fs::symlink_status(link, ec);
    if (fs::is_symlink(st)) {
        if (fs::read_symlink(link, ec) == target) {
            std::printf("xtel nixl install: %s already links to %s\n", link.c_str(),
                        target.c_str());
            return 0;
        }
        fs::remove(link, ec);
    } else if (fs::exists(st)) {
        return fail("'" + link.string() +
                    "' is there and is not a link: not xtel's to replace; remove it first");
    }
    fs::create_symlink(target, link, ec);
    if (ec) {
        return fail("could not link '" + link.string() + "' to '" + target.string() +
                    "': " + ec.message());
    }
    std::printf("xtel nixl install: linked %s to %s\n", link.c_str(), target.c_str());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2 || std::string_view(argv[1]) != "install") {
        std::fprintf(stderr,
                     "xtel nixl: expected the command install (xtel nixl install "
                     "--help)\n");
        return top::exit_usage;
    }
    const auto parsed = parse(argc - 1, argv + 1);
    if (const int* status = std::get_if<int>(&parsed)) {
        return *status;
    }
    const options& o = std::get<options>(parsed);
    const auto plugin = plugin_of(o);
    if (const int* status = std::get_if<int>(&plugin)) {
        return *status;
    }
    const auto dir = plugin_dir_of(o);
    if (const int* status = std::get_if<int>(&dir)) {
        return *status;
    }
    return link_into(std::get<fs::path>(dir), std::get<fs::path>(plugin));
}

}  // namespace xtel::nixl_install
