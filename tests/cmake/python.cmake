# The Python package's tests (tests/python/): the wheel built from this tree as `pip wheel .`
# builds it, installed into a fresh virtual environment, pytest run there against the installed
# package (tests/python/run_wheel.py). Only when XTEL_PYTHON_TESTS is on: the wheel's build is a
# build of the core of its own (Release, a few minutes on two cores), which scripts/test gives
# its small last stage rather than the first one every test runs in.
option(XTEL_PYTHON_TESTS "Register the Python package's tests (they build the wheel)" OFF)
# The wheel's xtel-exporter has no push clients; the test of the spans it would push as OTLP
# (test_instrument_nixl.py) runs this build's when it has them, else the one named here (a
# build with XTEL_PUSH=ON: scripts/test names its first stage's), else is skipped.
set(XTEL_PYTHON_PUSH_EXPORTER "" CACHE FILEPATH
    "An xtel-exporter built with XTEL_PUSH=ON, for the Python tests' OTLP spans")
if(XTEL_PUSH AND TARGET xtel-exporter)
    set(python_push_exporter $<TARGET_FILE:xtel-exporter>)
else()
    set(python_push_exporter "${XTEL_PYTHON_PUSH_EXPORTER}")
endif()
if(XTEL_PYTHON_TESTS AND TARGET telemetry_reader)
    set(test_name "python: the wheel installs into a fresh environment, and its Telemetry, readers, programs and version agree with the C++ core's")
    add_test(NAME "${test_name}"
        COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/python/run_wheel.py
            --source-dir ${PROJECT_SOURCE_DIR} --build-dir ${PROJECT_BINARY_DIR}
            --telemetry-reader $<TARGET_FILE:telemetry_reader>
            "--push-exporter=${python_push_exporter}")
    set_tests_properties("${test_name}" PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1200 RUN_SERIAL TRUE)
endif()
