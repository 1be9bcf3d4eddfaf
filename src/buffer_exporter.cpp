#include "xtel/exporters/buffer.hpp"

#include "xtel/telemetry.hpp"

namespace xtel {

namespace {
std::filesystem::path output_dir(const config& cfg) {
    return cfg.output_path.empty() ? std::filesystem::path(config::default_output_dir)
                                   : std::filesystem::path(cfg.output_path);
}
}  // namespace

buffer_exporter::buffer_exporter(const exporter_context& ctx)
    : writer_(output_dir(ctx.cfg), ctx.agent_name, ctx.cfg.buffer_size) {}

// The pipelines the registry hands out are compiled here once (see the extern templates in
// xtel/pipelines.hpp), so users who name a built-in exporter pay no compile time for them.
template class telemetry<buffer_exporter>;

}  // namespace xtel
