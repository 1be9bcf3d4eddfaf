# What the push clients of xtel-exporter (src/push/: remote-write and OTLP) need: protobuf for the
# messages, snappy for the remote-write body, libcurl for the POST. They are a library of their
# own, not part of xtel::xtel, so that programs linking only the telemetry library need none of
# them.
#
# XTEL_PUSH is ON, OFF or AUTO. AUTO, the default where xtel is the top-level project,
# builds them when the three are found and says which are missing otherwise, so that a first
# build (scripts/demo, which installs only what the demo needs) does not stop for packages the
# demo does not use. A consumer that vendors xtel gets OFF. scripts/test asks for ON: the
# tests of the push clients must not be left out quietly.
include_guard(GLOBAL)

if(PROJECT_IS_TOP_LEVEL)
    set(xtel_push_default AUTO)
else()
    set(xtel_push_default OFF)
endif()
# Its name until 0.1: a build that still says XTEL_REMOTE_WRITE gets what it asked for, and one
# line saying the new name.
if(DEFINED XTEL_REMOTE_WRITE AND NOT DEFINED XTEL_PUSH)
    message(DEPRECATION "xtel: XTEL_REMOTE_WRITE is now XTEL_PUSH (it builds OTLP too); "
        "using XTEL_PUSH=${XTEL_REMOTE_WRITE}")
    set(xtel_push_default ${XTEL_REMOTE_WRITE})
endif()
set(XTEL_PUSH ${xtel_push_default} CACHE STRING
    "Build xtel-exporter's push clients, remote-write and OTLP (protobuf, snappy, libcurl): ON, OFF or AUTO")
set_property(CACHE XTEL_PUSH PROPERTY STRINGS ON OFF AUTO)
string(TOUPPER "${XTEL_PUSH}" xtel_push_choice)

if(xtel_push_choice STREQUAL "AUTO")
    find_package(Protobuf QUIET)
    find_package(CURL QUIET)
    find_path(XTEL_SNAPPY_INCLUDE_DIR snappy.h)
    find_library(XTEL_SNAPPY_LIBRARY snappy)
    set(xtel_push_missing)
    if(NOT Protobuf_FOUND OR NOT Protobuf_PROTOC_EXECUTABLE)
        list(APPEND xtel_push_missing "libprotobuf-dev protobuf-compiler")
    endif()
    if(NOT XTEL_SNAPPY_INCLUDE_DIR OR NOT XTEL_SNAPPY_LIBRARY)
        list(APPEND xtel_push_missing libsnappy-dev)
    endif()
    if(NOT CURL_FOUND)
        list(APPEND xtel_push_missing libcurl4-openssl-dev)
    endif()
    if(xtel_push_missing)
        list(JOIN xtel_push_missing " " xtel_push_missing_text)
        message(STATUS "xtel: push clients (remote-write, OTLP) OFF: not found: ${xtel_push_missing_text}")
        set(XTEL_PUSH OFF)
    else()
        set(XTEL_PUSH ON)
    endif()
elseif(XTEL_PUSH)
    set(XTEL_PUSH ON)
else()
    set(XTEL_PUSH OFF)
endif()

if(XTEL_PUSH)
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
message(STATUS "xtel: push clients (remote-write, OTLP) ${XTEL_PUSH}")
