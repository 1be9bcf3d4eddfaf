# Exporter plugins for the plugin tests: one shared library per way a plugin can be wrong
# (tests/plugins/*.cpp), a text file named like a plugin, and the CSV example plugin. Their
# directories reach the integration tests as compile definitions.
include(plugin_api)

set(XTEL_TEST_PLUGIN_DIR ${CMAKE_CURRENT_BINARY_DIR}/plugins)
set(XTEL_TEST_PLUGINS missing_init missing_fini api_mismatch init_null init_throws no_creator
    ctor_throws export_throws always_throws lifecycle unresolved)
set(XTEL_TEST_PLUGIN_TARGETS)
foreach(name IN LISTS XTEL_TEST_PLUGINS)
    xtel_add_exporter_plugin(xtel_test_plugin_${name} ${name}
        ${CMAKE_CURRENT_SOURCE_DIR}/plugins/${name}.cpp)
    set_target_properties(xtel_test_plugin_${name} PROPERTIES
        LIBRARY_OUTPUT_DIRECTORY ${XTEL_TEST_PLUGIN_DIR})
    list(APPEND XTEL_TEST_PLUGIN_TARGETS xtel_test_plugin_${name})
endforeach()
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/plugins/not_elf.txt
    ${XTEL_TEST_PLUGIN_DIR}/libtelemetry_exporter_not_elf.so COPYONLY)

# With XTEL_BUILD_EXAMPLES off the CSV plugin is still needed here.
if(NOT TARGET xtel_csv_plugin)
    add_subdirectory(${PROJECT_SOURCE_DIR}/examples/plugins/csv
        ${PROJECT_BINARY_DIR}/examples/plugins/csv)
endif()

if(TARGET xtel_integration_tests)
    add_dependencies(xtel_integration_tests ${XTEL_TEST_PLUGIN_TARGETS} xtel_csv_plugin)
    target_compile_definitions(xtel_integration_tests PRIVATE
        XTEL_TEST_PLUGIN_DIR="${XTEL_TEST_PLUGIN_DIR}"
        XTEL_CSV_PLUGIN_DIR="$<TARGET_FILE_DIR:xtel_csv_plugin>")
endif()
