#pragma once
// `xtel nixl install`: xtel's NIXL plug-in linked into the plug-in directory of the NIXL that a
// Python environment runs (docs/nixl.md, "Where the plug-in goes"), beside NIXL's own plug-ins:
// NIXL_PLUGIN_DIR would hide them, and NIXL's UCX plug-in finds its UCX by its own path, which a
// link to it from elsewhere breaks.

namespace xtel::nixl_install {

/// Runs the arguments after `nixl` (argv[0] is "nixl"). Exit status: 0 linked or already
/// linked, 1 a failure its message names, 64 bad usage.
int main(int argc, char** argv);

}  // namespace xtel::nixl_install
