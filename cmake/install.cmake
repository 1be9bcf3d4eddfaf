# install(EXPORT) so that consumers can find_package(xtel) as well as FetchContent it.
include(CMakePackageConfigHelpers)

# Every component, and xtel::xtel over them (a consumer links that; the others are there for the
# link).
install(TARGETS xtel xtel_core xtel_metrics xtel_http xtel_node xtel_exporters xtel_agent
    EXPORT xtel-targets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
# xtel::plugin_api: the header-only target third-party exporter plugins link (docs/plugins.md).
# Its headers (xtel/plugin/exporter_v1.hpp, xtel/core/event.hpp) are in the include/xtel install.
include(plugin_api)
install(TARGETS xtel_plugin_api EXPORT xtel-targets COMPONENT dev)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/xtel DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
    COMPONENT dev)
install(EXPORT xtel-targets NAMESPACE xtel:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/xtel
    COMPONENT dev)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/xtel-config.cmake.in
    ${PROJECT_BINARY_DIR}/xtel-config.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/xtel)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/xtel-config-version.cmake
    COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/xtel-config.cmake ${PROJECT_BINARY_DIR}/xtel-config-version.cmake
    DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/xtel COMPONENT dev)

# What an operator reads beside the programs.
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/LICENSE
    DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT tools)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs
    COMPONENT tools FILES_MATCHING PATTERN "*.md")

include(package)
