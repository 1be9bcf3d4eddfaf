#pragma once
/// What this machine offers a transfer besides host memory: whether GPU memory can be
/// registered, and its GPUs named as one attribute value.

#include <string>

#include "xtel/status.hpp"

namespace xtel {

/// Whether this build and machine can register GPU memory: ok, or why not (not_supported).
status vram_support();

namespace metrics {
/// This machine's CUDA devices through metrics::gpu_identifier ("2x_nvidia_h100"), computed
/// once per process; empty when xtel was built without CUDA or no device is present.
const std::string& local_gpu_identifier();
}  // namespace metrics

}  // namespace xtel
