# All third-party lookups in one place. Installed (Debian) packages are found first.
include_guard(GLOBAL)

find_package(fmt REQUIRED)
find_package(Threads REQUIRED)
find_package(ucx REQUIRED)
# gzip for /metrics answers (Debian zlib1g-dev).
find_package(ZLIB REQUIRED)

# CUDA is optional: with it the agent can register GPU memory. Only the toolkit's headers are
# used at build time; the runtime (libcudart.so.<major>) is loaded when GPU memory is first
# registered, so every program built with xtel starts on a host without it, whoever vendors it.
if(XTEL_WITH_CUDA)
    find_package(CUDAToolkit QUIET)
endif()
set(XTEL_HAVE_CUDA OFF)
if(CUDAToolkit_FOUND)
    set(XTEL_HAVE_CUDA ON)
    message(STATUS "xtel: CUDA support ON (CUDA ${CUDAToolkit_VERSION}: libcudart.so.${CUDAToolkit_VERSION_MAJOR} is loaded when first used; programs start without it)")
elseif(XTEL_WITH_CUDA)
    message(STATUS "xtel: CUDA support OFF (no CUDA Toolkit found; GPU memory cannot be registered)")
else()
    message(STATUS "xtel: CUDA support OFF (XTEL_WITH_CUDA=OFF)")
endif()

if(XTEL_BUILD_TESTS)
    find_package(Catch2 2 REQUIRED)
    # The tests run the Python reader (examples/python) beside the C++ one; nothing that is
    # built needs Python, so a consumer's build does not look for it.
    find_package(Python3 REQUIRED COMPONENTS Interpreter)
    # The tests' HTTP client; the endpoint itself has its own server (src/http/).
    find_package(PkgConfig REQUIRED)
    pkg_check_modules(httplib REQUIRED IMPORTED_TARGET cpp-httplib)
endif()
if(XTEL_BUILD_BENCH)
    find_package(benchmark REQUIRED)
    # The harness's real peer (bench/peer_bench.cpp): the library NIXL's Prometheus exporter is
    # built on (Debian: prometheus-cpp-dev, scripts/deps's bench group), its core alone.
    find_package(prometheus-cpp REQUIRED)
endif()
