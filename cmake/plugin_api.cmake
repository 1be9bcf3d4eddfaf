# xtel::plugin_api: the headers a third-party exporter plugin compiles against
# (xtel/plugin/exporter_v1.hpp and xtel/core/event.hpp). Header-only and free of xtel's dependencies,
# so a plugin links neither libxtel nor fmt nor UCX. Included wherever a plugin is built and by
# install.cmake; the guard keeps one definition.
include_guard(GLOBAL)

add_library(xtel_plugin_api INTERFACE)
add_library(xtel::plugin_api ALIAS xtel_plugin_api)
set_target_properties(xtel_plugin_api PROPERTIES EXPORT_NAME plugin_api)
target_compile_features(xtel_plugin_api INTERFACE cxx_std_20)
target_include_directories(xtel_plugin_api INTERFACE
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)

# Builds `target` as a plugin: libtelemetry_exporter_<name>.so, only the entry points exported.
# The target name is free; the file name is what the loader looks for.
function(xtel_add_exporter_plugin target name)
    add_library(${target} MODULE ${ARGN})
    set_target_properties(${target} PROPERTIES
        PREFIX "lib"
        OUTPUT_NAME "telemetry_exporter_${name}"
        SUFFIX ".so"
        CXX_VISIBILITY_PRESET hidden
        VISIBILITY_INLINES_HIDDEN ON)
    target_link_libraries(${target} PRIVATE xtel::plugin_api)
endfunction()
