# The Prometheus exporter's tests talk HTTP to the endpoint (httplib's client), run promtool on
# its output, and let a real Prometheus server scrape xfer_demo (tests/cmake/agent.cmake gives
# the integration tests its path).
target_link_libraries(xtel_unit_tests PRIVATE PkgConfig::httplib)
# The stress tests attack with the benchmark's hostile clients (bench/hostile_clients.hpp): the
# endpoint's (unit) and xtel-exporter's (integration).
target_include_directories(xtel_unit_tests PRIVATE ${PROJECT_SOURCE_DIR}/bench)
if(TARGET xtel_integration_tests)
    target_include_directories(xtel_integration_tests PRIVATE ${PROJECT_SOURCE_DIR}/bench)
endif()

find_program(XTEL_PROMTOOL promtool)
find_program(XTEL_PROMETHEUS prometheus)
if(TARGET xtel_integration_tests)
    target_link_libraries(xtel_integration_tests PRIVATE PkgConfig::httplib)
    target_compile_definitions(xtel_integration_tests PRIVATE
        XTEL_PROMTOOL="$<$<BOOL:${XTEL_PROMTOOL}>:${XTEL_PROMTOOL}>"
        XTEL_PROMETHEUS="$<$<BOOL:${XTEL_PROMETHEUS}>:${XTEL_PROMETHEUS}>")
endif()
# zlib: the HTTP tests inflate gzip answers. The OpenMetrics check renders a store with exemplars
# itself (no producer records them yet), with the renderer private to src/.
target_link_libraries(xtel_unit_tests PRIVATE ZLIB::ZLIB)
if(TARGET xtel_integration_tests)
    target_include_directories(xtel_integration_tests PRIVATE ${PROJECT_SOURCE_DIR}/src)
endif()
