# The remote-write client's tests: the unit tests decode its requests with the generated
# messages and snappy; the integration tests push to a real Prometheus (tests/cmake/prometheus.cmake
# finds it). Without the client (XTEL_PUSH off) its test files are left out.
if(TARGET xtel_push)
    target_link_libraries(xtel_unit_tests PRIVATE xtel_push xtel_push_proto
        xtel_exposition_proto xtel_snappy)
    if(TARGET xtel_integration_tests)
        target_link_libraries(xtel_integration_tests PRIVATE xtel_push)
        # xtel-exporter has --remote-write (tools/xtel_exporter/CMakeLists.txt).
        target_compile_definitions(xtel_integration_tests PRIVATE XTEL_HAVE_PUSH=1)
    endif()
else()
    if(TARGET xtel_integration_tests)
        target_compile_definitions(xtel_integration_tests PRIVATE XTEL_HAVE_PUSH=0)
    endif()
    # scripts/test's last stage builds xtel-exporter so, to run this.
    if(TARGET xtel-exporter)
        add_test(NAME "push off: xtel-exporter refuses every push flag in a build without the clients, naming the build"
            COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/push_off_test.sh $<TARGET_FILE:xtel-exporter>)
    endif()
    foreach(target xtel_unit_tests xtel_integration_tests)
        if(TARGET ${target})
            get_target_property(sources ${target} SOURCES)
            list(FILTER sources EXCLUDE REGEX "/(remote_write|otlp|otlp_traces|exporter_traces|golden|protobuf_exposition)_test\\.cpp$")
            set_target_properties(${target} PROPERTIES SOURCES "${sources}")
        endif()
    endforeach()
endif()
