# Debian packages of an installed xtel, made by `cpack -G DEB` in a build directory (or
# scripts/package): one per install component.
#   libxtel-dev   the static library, its headers and CMake files (find_package(xtel)), and
#                 the plug-in API, for building programs with xtel;
#   xtel-tools    xtel-exporter and xtel (xtel top), with the docs, the systemd unit, the
#                 monitoring files and the Kubernetes manifests, for the nodes.
# Their Debian dependencies: the -dev packages of what the library links, for the first; for the
# second, the shared libraries its programs load, as dpkg-shlibdeps finds them.
include_guard(GLOBAL)

set(CPACK_PACKAGE_NAME xtel)
set(CPACK_PACKAGE_VENDOR "xtel")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_CONTACT "xtel maintainers")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGE_FILE_NAME xtel-${PROJECT_VERSION})
set(CPACK_GENERATOR DEB)
set(CPACK_COMPONENTS_ALL dev tools)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libxtel-dev)
set(CPACK_COMPONENT_DEV_DESCRIPTION
    "xtel: the library, its headers and CMake files\n Telemetry for programs that move KV-cache blocks between GPUs and hosts: build a\n transfer agent or an engine's pipeline with find_package(xtel).")
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libucx-dev, libfmt-dev, zlib1g-dev")

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME xtel-tools)
set(CPACK_COMPONENT_TOOLS_DESCRIPTION
    "xtel: xtel-exporter and xtel top, for the nodes\n One xtel-exporter per node serves every agent's metrics to Prometheus and pushes them\n by remote-write and OTLP; xtel top shows them at a terminal.")
set(CPACK_DEBIAN_TOOLS_PACKAGE_SHLIBDEPS ON)
# Its programs link no UCX (tests/link_test.py), so it depends on what dpkg-shlibdeps finds alone.
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION admin)
# The defaults file is a conffile; postinst makes the xtel account and tells systemd of the unit,
# which it neither enables nor starts: the operator names the agents' users first
# (docs/deployment.md, "A systemd unit").
set(CPACK_DEBIAN_TOOLS_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/cmake/debian/conffiles ${PROJECT_SOURCE_DIR}/cmake/debian/postinst
    ${PROJECT_SOURCE_DIR}/cmake/debian/postrm)
set(CPACK_DEBIAN_TOOLS_PACKAGE_CONTROL_STRICT_PERMISSION ON)

include(CPack)
