#pragma once
/// What this machine offers a transfer besides host memory: whether GPU memory can be
/// registered. Its GPUs named as one attribute value are metrics::local_gpu_identifier
/// (xtel/metrics/attributes.hpp).

#include "xtel/core/status.hpp"

namespace xtel {

/// Whether this build and machine can register GPU memory: ok, or why not (not_supported).
status vram_support();

}  // namespace xtel
