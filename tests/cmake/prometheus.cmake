# The Prometheus exporter's tests talk HTTP to the endpoint (httplib's client), run promtool on
# its output, and let a real Prometheus server scrape a workload program.
target_link_libraries(xtel_unit_tests PRIVATE PkgConfig::httplib)

add_executable(xtel_prometheus_workload ${CMAKE_CURRENT_SOURCE_DIR}/programs/prometheus_workload.cpp)
target_link_libraries(xtel_prometheus_workload PRIVATE xtel::xtel fmt::fmt)

find_program(XTEL_PROMTOOL promtool)
find_program(XTEL_PROMETHEUS prometheus)
if(TARGET xtel_integration_tests)
    add_dependencies(xtel_integration_tests xtel_prometheus_workload)
    target_link_libraries(xtel_integration_tests PRIVATE PkgConfig::httplib)
    target_compile_definitions(xtel_integration_tests PRIVATE
        XTEL_PROMETHEUS_WORKLOAD="$<TARGET_FILE:xtel_prometheus_workload>"
        XTEL_PROMTOOL="$<$<BOOL:${XTEL_PROMTOOL}>:${XTEL_PROMTOOL}>"
        XTEL_PROMETHEUS="$<$<BOOL:${XTEL_PROMETHEUS}>:${XTEL_PROMETHEUS}>")
endif()
