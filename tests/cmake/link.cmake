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
