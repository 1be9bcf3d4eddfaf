# The remote-write client's tests: the unit tests decode its requests with the generated
# messages and snappy; the integration tests push to a real Prometheus (tests/cmake/prometheus.cmake
# finds it). Without the client (XTEL_REMOTE_WRITE off) its test files are left out.
if(TARGET xtel_remote_write)
    target_link_libraries(xtel_unit_tests PRIVATE xtel_remote_write xtel_remote_write_proto
        xtel_snappy)
    if(TARGET xtel_integration_tests)
        target_link_libraries(xtel_integration_tests PRIVATE xtel_remote_write)
        # xtel-exporter has --remote-write (tools/xtel_exporter/CMakeLists.txt).
        target_compile_definitions(xtel_integration_tests PRIVATE XTEL_HAVE_REMOTE_WRITE=1)
    endif()
else()
    if(TARGET xtel_integration_tests)
        target_compile_definitions(xtel_integration_tests PRIVATE XTEL_HAVE_REMOTE_WRITE=0)
    endif()
    foreach(target xtel_unit_tests xtel_integration_tests)
        if(TARGET ${target})
            get_target_property(sources ${target} SOURCES)
            list(FILTER sources EXCLUDE REGEX "/(remote_write|otlp|golden)_test\\.cpp$")
            set_target_properties(${target} PROPERTIES SOURCES "${sources}")
        endif()
    endforeach()
endif()
