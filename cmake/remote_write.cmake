# What the Prometheus remote-write client (src/node/remote_write.*) needs: protobuf for the
# messages, snappy for the body, libcurl for the POST. It is a library of its own, not part of
# xtel::xtel, so that programs linking only the telemetry library need none of them; it is on
# where the node's exporter program is built (xtel itself, top-level), and off for consumers.
include_guard(GLOBAL)

option(XTEL_REMOTE_WRITE "Build the Prometheus remote-write client (protobuf, snappy, libcurl)"
    ${PROJECT_IS_TOP_LEVEL})

if(XTEL_REMOTE_WRITE)
    # Debian 12: libprotobuf-dev protobuf-compiler (3.21), libsnappy-dev, libcurl4-openssl-dev.
    find_package(Protobuf REQUIRED)
    find_package(CURL REQUIRED)
    # libsnappy-dev ships no CMake config on every release, so its header and library directly.
    find_path(XTEL_SNAPPY_INCLUDE_DIR snappy.h REQUIRED)
    find_library(XTEL_SNAPPY_LIBRARY snappy REQUIRED)
    if(NOT TARGET xtel_snappy)
        add_library(xtel_snappy UNKNOWN IMPORTED)
        set_target_properties(xtel_snappy PROPERTIES
            IMPORTED_LOCATION ${XTEL_SNAPPY_LIBRARY}
            INTERFACE_INCLUDE_DIRECTORIES ${XTEL_SNAPPY_INCLUDE_DIR})
    endif()
endif()
message(STATUS "xtel: remote-write client ${XTEL_REMOTE_WRITE}")
