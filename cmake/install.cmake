# install(EXPORT) so that consumers can find_package(xtel) as well as FetchContent it.
include(CMakePackageConfigHelpers)

# Every component, and xtel::xtel over them (a consumer links that; the others are there for the
# link).
install(TARGETS xtel xtel_core xtel_metrics xtel_http xtel_node xtel_trace xtel_exporters
    xtel_registry xtel_agent
    EXPORT xtel-targets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
# xtel::plugin_api: the header-only target third-party exporter plugins link (docs/plugins.md).
# Its headers (xtel/plugin/exporter_v1.hpp, xtel/core/event.hpp) are in the include/xtel install.
include(plugin_api)
install(TARGETS xtel_plugin_api EXPORT xtel-targets COMPONENT dev)
# Less xtel/push/: the push clients (remote write, OTLP) are xtel-exporter's, built only where
# xtel is the top-level project with XTEL_PUSH, and neither their library nor its protobuf,
# snappy and libcurl are installed, so that a consumer's find_package needs none of them (the
# README's requirements). Their headers alone would be declarations nothing defines.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/xtel DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
    COMPONENT dev PATTERN push EXCLUDE)
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

# For the node: xtel-exporter's systemd unit, its sysusers.d entry (the xtel account) and the
# defaults file an operator edits (a conffile: an upgrade keeps the operator's edits), the
# drop-in for agents of several accounts as an example; the monitoring files (Prometheus rules,
# Grafana dashboards) and the Kubernetes manifests, to copy where they are served from
# (docs/monitoring.md, docs/deployment.md). The unit names /usr/bin/xtel-exporter: the packages
# install with the prefix /usr.
install(FILES ${PROJECT_SOURCE_DIR}/deploy/systemd/xtel-exporter.service
    DESTINATION lib/systemd/system COMPONENT tools)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/systemd/xtel-exporter.sysusers
    DESTINATION lib/sysusers.d RENAME xtel-exporter.conf COMPONENT tools)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/systemd/xtel-exporter.default
    DESTINATION /etc/default RENAME xtel-exporter COMPONENT tools)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/systemd/several-uids.conf
    DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples/systemd COMPONENT tools)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/monitoring/ DESTINATION ${CMAKE_INSTALL_DATADIR}/xtel/monitoring
    COMPONENT tools)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/deploy/kubernetes/
    DESTINATION ${CMAKE_INSTALL_DATADIR}/xtel/kubernetes COMPONENT tools
    FILES_MATCHING PATTERN "*.yaml" PATTERN "test" EXCLUDE)

include(package)
