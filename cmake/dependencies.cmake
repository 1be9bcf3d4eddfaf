# All third-party lookups in one place. Installed (Debian) packages are found first.
include_guard(GLOBAL)

find_package(fmt REQUIRED)
find_package(Threads REQUIRED)
find_package(ucx REQUIRED)
# gzip for /metrics answers (Debian zlib1g-dev).
find_package(ZLIB REQUIRED)

# CUDA is optional: with it the agent can register GPU memory.
if(XTEL_WITH_CUDA)
    find_package(CUDAToolkit QUIET)
endif()
set(XTEL_HAVE_CUDA OFF)
if(CUDAToolkit_FOUND)
    set(XTEL_HAVE_CUDA ON)
endif()
message(STATUS "xtel: CUDA support ${XTEL_HAVE_CUDA}")

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
endif()
