# README.md's programs (examples/minimal): tests/integration/readme_test.cpp checks that the
# README shows them as they are, and runs them. Built here too when the examples are off.
xtel_integration_tests_name(xtel_minimal_used XTEL_MINIMAL)
if(TARGET xtel_integration_tests AND xtel_minimal_used)
    if(NOT TARGET minimal_agent)
        add_subdirectory(${PROJECT_SOURCE_DIR}/examples/minimal
            ${PROJECT_BINARY_DIR}/examples/minimal)
    endif()
    add_dependencies(xtel_integration_tests minimal_agent minimal_pipeline)
    target_compile_definitions(xtel_integration_tests PRIVATE
        XTEL_MINIMAL_AGENT="$<TARGET_FILE:minimal_agent>"
        XTEL_MINIMAL_PIPELINE="$<TARGET_FILE:minimal_pipeline>")
endif()
