#include "core/cuda_runtime.hpp"

#include <fmt/format.h>

#if defined(XTEL_HAVE_CUDA)
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#endif

namespace xtel::detail::cuda {

#if defined(XTEL_HAVE_CUDA)

namespace {

#define XTEL_STRINGIFY_(x) #x
#define XTEL_STRINGIFY(x) XTEL_STRINGIFY_(x)
/// CUDART_VERSION is major * 1000 + minor * 10; the soname carries the major only.
constexpr const char* soname = "libcudart.so." XTEL_STRINGIFY(XTEL_CUDART_MAJOR);

/// The three entry points xtel calls, resolved once.
struct runtime {
    using count_fn = cudaError_t (*)(int*);
    using properties_fn = cudaError_t (*)(cudaDeviceProp*, int);
    using error_string_fn = const char* (*)(cudaError_t);

    count_fn device_count = nullptr;
    properties_fn properties = nullptr;
    error_string_fn error_string = nullptr;
    std::string failure;  ///< why the runtime is not there; empty when it is
};

const runtime& load() {
    static const runtime r = [] {
        runtime out;
        // RTLD_LOCAL: the runtime's symbols stay out of the global namespace, so that a program
        // that links its own libcudart keeps resolving to its own.
        void* handle = ::dlopen(soname, RTLD_NOW | RTLD_LOCAL);
        if (handle == nullptr) {
            const char* e = ::dlerror();
            out.failure = fmt::format("no CUDA runtime: {} cannot be loaded ({})", soname,
                                      e != nullptr ? e : "unknown reason");
            return out;
        }
        out.device_count =
            reinterpret_cast<runtime::count_fn>(::dlsym(handle, "cudaGetDeviceCount"));
        // CUDA 12 exports the properties of its own struct layout as _v2; 13 under the plain name.
        auto* properties = ::dlsym(handle, "cudaGetDeviceProperties_v2");
        if (properties == nullptr) {
            properties = ::dlsym(handle, "cudaGetDeviceProperties");
        }
        out.properties = reinterpret_cast<runtime::properties_fn>(properties);
        out.error_string =
            reinterpret_cast<runtime::error_string_fn>(::dlsym(handle, "cudaGetErrorString"));
        if (out.device_count == nullptr || out.properties == nullptr ||
            out.error_string == nullptr) {
            out.failure = fmt::format(
                "no CUDA runtime: {} lacks cudaGetDeviceCount, "
                "cudaGetDeviceProperties or cudaGetErrorString",
                soname);
        }
        return out;  // the handle stays open for the life of the process
    }();
    return r;
}

}  // namespace

int device_count(std::string& why) {
    const runtime& r = load();
    if (!r.failure.empty()) {
        why = r.failure;
        return 0;
    }
    int devices = 0;
    const cudaError_t err = r.device_count(&devices);
    if (err != cudaSuccess || devices <= 0) {
        why = fmt::format("no CUDA device present (cudaGetDeviceCount: {})",
                          err == cudaSuccess ? "0 devices" : r.error_string(err));
        return 0;
    }
    return devices;
}

std::vector<std::string> device_names() {
    std::string why;
    const int devices = device_count(why);
    std::vector<std::string> names;
    for (int i = 0; i < devices; ++i) {
        cudaDeviceProp p{};
        if (load().properties(&p, i) == cudaSuccess) {
            names.emplace_back(p.name);
        }
    }
    return names;
}

const char* runtime_library() noexcept {
    return soname;
}

#else

int device_count(std::string& why) {
    why =
        "built without CUDA support (configure with the CUDA Toolkit installed and "
        "XTEL_WITH_CUDA=ON)";
    return 0;
}

std::vector<std::string> device_names() {
    return {};
}

const char* runtime_library() noexcept {
    return "";
}

#endif

}  // namespace xtel::detail::cuda
