# The programs that only read files, xtel-exporter and xtel top, need no UCX library: neither
# their link lines nor their binaries name one (tests/link_test.py). Only the agent component
# links UCX.
find_program(XTEL_READELF readelf)
if(XTEL_READELF AND TARGET xtel-exporter AND TARGET xtel_cli)
    add_test(NAME "link: xtel-exporter and xtel top link and need no UCX library"
        COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/link_test.py
            ${PROJECT_BINARY_DIR} ${XTEL_READELF}
            xtel-exporter=$<TARGET_FILE:xtel-exporter> xtel_cli=$<TARGET_FILE:xtel_cli>)
endif()
# Nor does a program that makes pipelines and no agent (make_telemetry, the registry component):
# an engine with its own transport, as README.md's minimal_pipeline is, and the Python module,
# which an engine loads beside the UCX NIXL bundles. The module is built only with XTEL_PYTHON
# (the wheel's build, which has no tests): tests/python/test_package.py checks the wheel's.
if(XTEL_READELF AND TARGET minimal_pipeline)
    set(pipeline_programs minimal_pipeline=$<TARGET_FILE:minimal_pipeline>)
    set(test_name "link: minimal_pipeline, which makes pipelines and no agent, links and needs no UCX library")
    if(TARGET _xtel)
        list(APPEND pipeline_programs _xtel=$<TARGET_FILE:_xtel>)
        set(test_name "link: minimal_pipeline and the Python module, which make pipelines and no agent, link and need no UCX library")
    endif()
    add_test(NAME "${test_name}"
        COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/link_test.py
            ${PROJECT_BINARY_DIR} ${XTEL_READELF} ${pipeline_programs})
endif()
