# docs/quickstart.md is run by tests/integration/quickstart_test.cpp: its commands call the
# build's xfer_demo, xtel-exporter and xtel (the integration tests depend on them already), and
# prometheus, promtool (tests/CMakeLists.txt finds them) and curl by name; the test puts the
# directories found here first on PATH, and fails, naming the package, when one is missing.
find_program(XTEL_CURL curl)
if(TARGET xtel_integration_tests)
    target_compile_definitions(xtel_integration_tests PRIVATE
        XTEL_CURL="$<$<BOOL:${XTEL_CURL}>:${XTEL_CURL}>")
endif()
