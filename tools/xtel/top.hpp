#pragma once
// `xtel top`: reads the node files with the collector xtel-exporter uses, and shows them (one
// frame on stdout with --once, else live on the terminal until q or a signal).

namespace xtel::top {

/// Runs `xtel top` with its arguments (argv[0] is "top"); returns the exit status.
int main(int argc, char** argv);

}  // namespace xtel::top
