# The OTLP integration tests decode what xtel-exporter pushes with the OpenTelemetry JS
# project's definitions, in a receiver run by Node.js (tests/otlp/receiver.js; scripts/test
# installs its npm packages with xtel_install_npm_test_deps).
find_program(XTEL_NODE node)
if(TARGET xtel_integration_tests)
    target_compile_definitions(xtel_integration_tests PRIVATE
        XTEL_NODE="$<$<BOOL:${XTEL_NODE}>:${XTEL_NODE}>"
        XTEL_OTLP_RECEIVER="${PROJECT_SOURCE_DIR}/tests/otlp/receiver.js")
endif()
