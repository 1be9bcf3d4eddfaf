#pragma once
// The CUDA runtime, loaded when first used (private to src/). xtel is built against the CUDA
// Toolkit's headers when one is found, but never links libcudart: a program that uses xtel
// then starts on a host without the CUDA runtime, and only registering GPU memory (or naming the
// local GPUs) needs it. The library loaded is the one of the toolkit's major version the build
// saw (libcudart.so.<major>), by its soname, so the dynamic loader's search rules apply.

#include <string>
#include <vector>

namespace xtel::detail::cuda {

/// The CUDA devices present; 0, with `why` saying why, when the runtime cannot be loaded,
/// reports an error, or finds none. Loads the runtime on the first call (thread-safe).
int device_count(std::string& why);

/// The CUDA devices' names, as the runtime reports them; empty when device_count() is 0.
std::vector<std::string> device_names();

/// The runtime's soname this build loads ("libcudart.so.13"); empty in a build without CUDA.
const char* runtime_library() noexcept;

}  // namespace xtel::detail::cuda
