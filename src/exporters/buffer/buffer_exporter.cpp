#include "xtel/exporters/buffer.hpp"

#include <fmt/format.h>

#include "core/log.hpp"
#include "xtel/core/parse.hpp"
#include "xtel/core/telemetry.hpp"

namespace xtel {

namespace {
/// `<dir>/<agent name>`; throws config_error for what the configuration got wrong.
std::filesystem::path recorder_path(const exporter_context& ctx) {
    parse::file_name("agent name", ctx.agent_name);
    return buffer_settings::from_env(ctx.cfg).directory / ctx.agent_name;
}
}  // namespace

buffer_exporter::buffer_exporter(const exporter_context& ctx) : path_(recorder_path(ctx)) {
    try {
        writer_.emplace(path_.parent_path(), ctx.agent_name, ctx.cfg.buffer_size);
    } catch (const exporter_error& e) {
        // Refusing a symbolic link or another user's file is deliberate (never followed, never
        // replaced); so is not throwing: any local user can create a file in a shared directory
        // such as /dev/shm, and must not be able to stop an agent from starting by doing so.
        error_ = e.what();
        detail::log(log_level::error,
                    "agent '{}': flight recorder disabled: {}; transfers go on, their events are "
                    "not recorded (counted as lost)",
                    ctx.agent_name, error_);
    }
}

}  // namespace xtel
